// The merge of an operator's enrollment (core/enrollment_merge.h): what is
// kept, what is replaced, the changes in words, and every refusal. Pure: no
// store (the store's part is storage/enrollment_test.cc's).
#include "core/enrollment_merge.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rackgate::core {
namespace {

using storage::Address;
using storage::Enrollment;
using storage::Machine;
using storage::MachineState;

Machine Stored() {
  Machine m;
  m.id = 1;
  m.hostname = "node-1";
  m.pool = "workers";
  m.state = MachineState::kEnrolled;
  m.ek_hash = {1, 2, 3};
  m.addresses = {{"Hostname", "node-1"}, {"InternalIP", "10.0.0.1"}};
  m.vars_json = R"({"old":"x","rack":"r1","role":"db"})";
  m.policy_json = R"({"p":1})";
  return m;
}

Enrollment Bare() {
  Enrollment e;
  e.hostname = "node-1";
  e.ek_hash = {1, 2, 3};
  return e;
}

// The operator's re-enroll: only the fields given, added and merged.
EnrollFields Given(bool addresses, bool vars, bool policy, bool pool = false) {
  EnrollFields f;
  f.pool = pool;
  f.addresses = addresses;
  f.replace_addresses = false;
  f.vars = vars;
  f.replace_vars = false;
  f.policy = policy;
  return f;
}

TEST(EnrollmentMerge, Issue15ReenrollWithoutAddressesOrVarsKeepsThem) {
  const Machine stored = Stored();
  auto m = MergeEnrollment(Bare(), Given(false, false, false), &stored, MachineState::kEnrolled);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->enrollment.pool, "workers");
  EXPECT_EQ(m->enrollment.addresses, stored.addresses);
  EXPECT_EQ(m->enrollment.vars_json, stored.vars_json);
  EXPECT_EQ(m->enrollment.policy_json, stored.policy_json);
  EXPECT_TRUE(m->changes.empty());
  EXPECT_TRUE(m->changed.empty());
}

TEST(EnrollmentMerge, AddsAddressesAndMergesVarsByName) {
  const Machine stored = Stored();
  Enrollment more = Bare();
  more.addresses = {{"InternalIP", "10.0.0.6"}, {"InternalIP", "10.0.0.1"}};
  more.vars_json = R"({"role":"web","zone":"z1"})";
  EnrollFields f = Given(true, true, false);
  f.unset_vars = {"old"};
  auto m = MergeEnrollment(more, f, &stored, MachineState::kEnrolled);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->enrollment.addresses,
            (std::vector<Address>{{"Hostname", "node-1"}, {"InternalIP", "10.0.0.1"}, {"InternalIP", "10.0.0.6"}}));
  EXPECT_EQ(m->enrollment.vars_json, R"({"rack":"r1","role":"web","zone":"z1"})");
  EXPECT_EQ(m->changes, (std::vector<std::string>{"addresses +InternalIP=10.0.0.6", "vars ~role +zone -old"}));
  EXPECT_EQ(m->changed, (std::vector<std::string>{"addresses", "vars"}));
  // Values never reach the words (names only).
  for (const auto& w : m->changes) EXPECT_EQ(w.find("web"), std::string::npos) << w;
}

TEST(EnrollmentMerge, ReplaceFlagsDropTheRest) {
  const Machine stored = Stored();
  Enrollment only = Bare();
  only.addresses = {{"InternalIP", "10.0.0.6"}};
  only.vars_json = R"({"rack":"r2"})";
  EnrollFields f = Given(true, true, true);
  f.replace_addresses = true;
  f.replace_vars = true;  // and the policy given as none: cleared
  auto m = MergeEnrollment(only, f, &stored, MachineState::kEnrolled);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->enrollment.addresses, (std::vector<Address>{{"InternalIP", "10.0.0.6"}}));
  EXPECT_EQ(m->enrollment.vars_json, R"({"rack":"r2"})");
  EXPECT_FALSE(m->enrollment.policy_json.has_value());
  EXPECT_EQ(m->changes,
            (std::vector<std::string>{"addresses +InternalIP=10.0.0.6 -Hostname=node-1 -InternalIP=10.0.0.1",
                                      "vars ~rack -old -role", "policy cleared"}));
}

TEST(EnrollmentMerge, PoolPolicyCertificateAndStateInWords) {
  Machine stored = Stored();
  stored.policy_json.reset();
  stored.state = MachineState::kPending;
  Enrollment e = Bare();
  e.pool = "masters";
  e.policy_json = R"({"p":2})";
  e.ek_certificate = storage::Bytes{0x30};
  e.tpm_manufacturer = "id:49465800";
  EnrollFields f = Given(false, false, true, true);
  auto m = MergeEnrollment(e, f, &stored, MachineState::kEnrolled);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->changes, (std::vector<std::string>{"pool workers -> masters", "policy set", "ek_certificate updated",
                                                  "state pending -> enrolled"}));
  EXPECT_EQ(m->changed, (std::vector<std::string>{"pool", "policy", "ek_certificate", "state"}));
  stored.policy_json = R"({"p":1})";
  auto replaced = MergeEnrollment(e, f, &stored, MachineState::kPending);
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->changes[1], "policy replaced");
}

TEST(EnrollmentMerge, ANewMachineTakesWhatIsGiven) {
  Enrollment e = Bare();
  e.pool = "workers";
  e.addresses = {{"InternalIP", "10.0.0.2"}, {"Hostname", "node-1"}};
  e.vars_json = R"({"b":"2","a":"1"})";
  auto m = MergeEnrollment(e, Given(true, true, true, true), nullptr, MachineState::kEnrolled);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->enrollment.addresses, (std::vector<Address>{{"Hostname", "node-1"}, {"InternalIP", "10.0.0.2"}}));
  EXPECT_EQ(m->enrollment.vars_json, R"({"a":"1","b":"2"})");
  EXPECT_TRUE(m->changes.empty());
}

TEST(EnrollmentMerge, Refusals) {
  // A new machine needs a pool, given and not empty.
  for (bool given : {false, true}) {
    auto r = MergeEnrollment(Bare(), Given(false, false, false, given), nullptr, MachineState::kEnrolled);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), "field_missing");
    EXPECT_NE(r.status().message().find("a new machine needs a pool"), std::string::npos);
  }
  const Machine stored = Stored();
  Enrollment e = Bare();
  e.vars_json = "[]";
  auto given = MergeEnrollment(e, Given(false, true, false), &stored, MachineState::kEnrolled);
  ASSERT_FALSE(given.ok());
  EXPECT_EQ(given.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(given.status().reason(), "field_invalid");
  Machine broken = Stored();
  broken.vars_json = "not json";
  for (bool vars : {false, true}) {
    auto corrupt = MergeEnrollment(Bare(), Given(false, vars, false), &broken, MachineState::kEnrolled);
    ASSERT_FALSE(corrupt.ok());
    EXPECT_EQ(corrupt.status().code(), Status::Code::kCorruption);
    EXPECT_EQ(corrupt.status().reason(), "db_corrupt");
  }
}

}  // namespace
}  // namespace rackgate::core
