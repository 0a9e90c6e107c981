// Machine administration (core/machine_service.h) on every store (the fake,
// SQLite or PostgreSQL): what each operation stores and answers, and a case
// for every refusal the service returns.
#include "core/machine_service.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "base/hex.h"
#include "core/testing/core_fixture.h"
#include "wire/codec.h"

namespace rackgate::core::testing {
namespace {

// A well-formed EK certificate that chains to no trust anchor: self-signed.
Bytes UntrustedCertificate() {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> x(X509_new(), &X509_free);
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 7);
  X509_time_adj_ex(X509_getm_notBefore(x.get()), 0, 0, nullptr);
  X509_time_adj_ex(X509_getm_notAfter(x.get()), 20000, 0, nullptr);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("EK"), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  X509_set_pubkey(x.get(), key.get());
  X509_sign(x.get(), key.get(), EVP_sha256());
  unsigned char* der = nullptr;
  const int n = i2d_X509(x.get(), &der);
  Bytes out(der, der + n);
  OPENSSL_free(der);
  return out;
}

class MachineServiceTest : public EveryStoreTest {
 protected:
  MachineServiceTest() : machines_(store_.get(), store_.get(), store_.get(), attestation_.get()) {}

  // `m` as discovery records it: pending, in pool workers, as `hostname`.
  void Discovered(const SoftMachine& m, const std::string& hostname) {
    storage::Enrollment p;
    p.hostname = hostname;
    p.pool = "workers";
    p.ek_public = m.ek.tpm2b_public();
    p.ek_hash = m.EkHash();
    p.state = storage::MachineState::kPending;
    ASSERT_TRUE(store_->Enroll(p, actor_, false, now_).ok());
  }
  // An enroll request for `m` as `hostname` in pool workers, by its EK
  // public area.
  static wire::EnrollRequest Request(const SoftMachine& m, const std::string& hostname) {
    wire::EnrollRequest r;
    r.hostname = hostname;
    r.pool = "workers";
    r.ek_public_base64 = wire::Base64Encode(m.ek.tpm2b_public());
    r.addresses = std::vector<wire::AddressView>{{"InternalIP", "10.0.0.5"}};
    return r;
  }
  // The import of `rows` through the wire's streamed decoder, as the
  // handler calls it.
  Result<wire::ImportAnswer> Import(const wire::ImportRequest& request) {
    const std::string body = wire::EncodeImportRequest(request);
    return machines_.Import([&body](const wire::ImportRowSink& row) { return wire::DecodeImportRequest(body, row); },
                            actor_);
  }
  static wire::ImportRowRequest Row(const SoftMachine& m, const std::string& hostname, int64_t line) {
    wire::EnrollRequest r = Request(m, hostname);
    return {r, line, std::nullopt};
  }
  std::string LastWhy() {
    auto audit = store_->ListAudit({});
    return audit.ok() && !audit->empty() ? audit->back().why : "";
  }
  static std::string Reason(const Status& s) { return s.reason(); }

  storage::Actor actor_{"operator", ""};
  MachineService machines_;
};

TEST_P(MachineServiceTest, EnrollCreatesThenMergesAndSaysWhatItDid) {
  SoftMachine m;
  auto made = machines_.Enroll(Request(m, "node-1"), actor_);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_TRUE(made->created);
  EXPECT_EQ(made->answer.outcome, "created");
  EXPECT_EQ(made->answer.summary, "node-1: enrolled");
  EXPECT_EQ(made->answer.machine.ek_hash, hex::Encode(m.EkHash()));
  EXPECT_EQ(made->answer.machine.state, "enrolled");
  EXPECT_EQ(made->answer.machine.addresses, (std::vector<wire::AddressView>{{"InternalIP", "10.0.0.5"}}));
  EXPECT_EQ(LastWhy(), "enrolled by an operator");

  // Only vars given: the addresses and the pool are kept.
  wire::EnrollRequest vars;
  vars.hostname = "node-1";
  vars.ek_public_base64 = wire::Base64Encode(m.ek.tpm2b_public());
  vars.vars_given = true;
  vars.vars_json = R"({"zone":"z1"})";
  auto merged = machines_.Enroll(vars, actor_);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_FALSE(merged->created);
  EXPECT_EQ(merged->answer.outcome, "updated");
  EXPECT_EQ(merged->answer.changes, (std::vector<std::string>{"vars +zone"}));
  EXPECT_EQ(merged->answer.summary, "node-1: vars +zone; addresses unchanged");
  EXPECT_EQ(merged->answer.machine.vars_json, R"({"zone":"z1"})");
  EXPECT_EQ(merged->answer.machine.pool, "workers");
  EXPECT_EQ(merged->answer.machine.addresses.size(), 1u);

  auto again = machines_.Enroll(vars, actor_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->answer.outcome, "unchanged");
  EXPECT_EQ(again->answer.summary, "node-1: unchanged");
}

TEST_P(MachineServiceTest, EnrollRefusals) {
  SoftMachine m, other;
  ASSERT_TRUE(machines_.Enroll(Request(m, "node-1"), actor_).ok());
  struct Case {
    std::string what;
    wire::EnrollRequest request;
    Status::Code code;
    const char* reason;
  };
  std::vector<Case> cases;
  const auto add = [&](std::string what, auto change, Status::Code code, const char* reason) {
    wire::EnrollRequest r = Request(other, "node-2");
    change(r);
    cases.push_back({std::move(what), std::move(r), code, reason});
  };
  using C = Status::Code;
  add("no hostname", [](auto& r) { r.hostname.clear(); }, C::kInvalidArgument, "field_missing");
  add("no EK", [](auto& r) { r.ek_public_base64.reset(); }, C::kInvalidArgument, "field_missing");
  add("EK not base64", [](auto& r) { r.ek_public_base64 = "!!"; }, C::kInvalidArgument, "field_invalid");
  add("certificate not base64", [](auto& r) { r.ek_certificate_base64 = "!!"; }, C::kInvalidArgument,
      "field_invalid");
  add("policy", [](auto& r) { r.policy_given = true, r.policy_json = R"({"pcrs": 7})"; }, C::kInvalidArgument,
      "policy_malformed");
  add("vars not an object", [](auto& r) { r.vars_given = true, r.vars_json = "[1]"; }, C::kInvalidArgument,
      "field_invalid");
  add("vars name", [](auto& r) { r.vars_given = true, r.vars_json = R"({"a b":"x"})"; }, C::kInvalidArgument,
      "field_invalid");
  add("vars value", [](auto& r) { r.vars_given = true, r.vars_json = R"({"a":1})"; }, C::kInvalidArgument,
      "field_invalid");
  add("unset_vars count", [](auto& r) { r.unset_vars.assign(65, "a"); }, C::kInvalidArgument, "field_invalid");
  add("unset_vars name", [](auto& r) { r.unset_vars = {""}; }, C::kInvalidArgument, "field_invalid");
  add("policy and clear_policy",
      [](auto& r) {
        r.policy_given = true;
        r.policy_json = R"({"version": 1})";
        r.clear_policy = true;
      },
      C::kInvalidArgument, "field_invalid");
  add("new without a pool", [](auto& r) { r.pool.reset(); }, C::kInvalidArgument, "field_missing");
  add("unknown pool", [](auto& r) { r.pool = "nowhere"; }, C::kNotFound, "pool_unknown");
  add("hostname", [](auto& r) { r.hostname = "Bad_Name"; }, C::kInvalidArgument, "hostname_invalid");
  add("EK of another machine", [&m](auto& r) { r.ek_public_base64 = wire::Base64Encode(m.ek.tpm2b_public()); },
      C::kInvalidArgument, "ek_in_use");
  add("another EK for a hostname", [](auto& r) { r.hostname = "node-1"; }, C::kInvalidArgument, "ek_conflict");
  for (const Case& c : cases) {
    auto r = machines_.Enroll(c.request, actor_);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status().ToString();
    EXPECT_EQ(r.status().reason(), c.reason) << c.what << ": " << r.status().ToString();
  }
  // The EK public area's parser names the field. A malformed certificate is
  // malformed input (400); one that does not verify is refused (403),
  // whatever code the verifier used.
  wire::EnrollRequest garbage = Request(other, "node-2");
  garbage.ek_public_base64 = wire::Base64Encode(Bytes{0, 2, 1, 2});
  auto unparsed = machines_.Enroll(garbage, actor_);
  ASSERT_FALSE(unparsed.ok());
  EXPECT_EQ(unparsed.status().message().rfind("ek_public: ", 0), 0u) << unparsed.status().ToString();
  wire::EnrollRequest cert = Request(other, "node-2");
  cert.ek_certificate_base64 = wire::Base64Encode(Bytes{0x30, 0x03, 0x02, 0x01, 0x01});
  auto malformed = machines_.Enroll(cert, actor_);
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), Status::Code::kInvalidArgument) << malformed.status().ToString();
  EXPECT_EQ(malformed.status().reason().rfind("ek_cert_", 0), 0u) << malformed.status().ToString();
  cert.ek_public_base64.reset();
  cert.ek_certificate_base64 = wire::Base64Encode(UntrustedCertificate());
  auto refused = machines_.Enroll(cert, actor_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kVerificationFailed) << refused.status().ToString();
  EXPECT_EQ(refused.status().reason().rfind("ek_cert_", 0), 0u) << refused.status().ToString();
  // Nothing of it was stored.
  EXPECT_EQ(machines_.List(std::nullopt, std::nullopt)->size(), 1u);

  // A new TPM under the old name, explicitly.
  wire::EnrollRequest replace = Request(other, "node-1");
  replace.replace_ek = true;
  auto replaced = machines_.Enroll(replace, actor_);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->answer.outcome, "replaced_ek");
  EXPECT_EQ(replaced->answer.machine.ek_hash, hex::Encode(other.EkHash()));
  EXPECT_EQ(LastWhy(), "EK replaced by an operator");
}

TEST_P(MachineServiceTest, ImportEnrollsEveryRowOrNone) {
  SoftMachine a, b;
  wire::ImportRequest request;
  request.rows = {Row(a, "node-1", 2), Row(b, "node-2", 3)};
  request.rows[1].machine.vars_given = true;
  request.rows[1].machine.vars_json = R"({"rack":"r2"})";
  request.dry_run = true;
  auto dry = Import(request);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_TRUE(dry->dry_run);
  EXPECT_EQ(dry->imported, 0);
  EXPECT_EQ(dry->created, 2);
  EXPECT_TRUE(machines_.List(std::nullopt, std::nullopt)->empty());

  request.dry_run = false;
  auto done = Import(request);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->imported, 2);
  EXPECT_EQ(done->created, 2);
  ASSERT_EQ(done->rows.size(), 2u);
  EXPECT_EQ(done->rows[1].where, "line 3");
  EXPECT_EQ(done->rows[1].hostname, "node-2");
  EXPECT_EQ(LastWhy(), "inventory import");

  // A row is the machine's desired state: its addresses; its vars only when
  // it names them.
  request.rows[0].machine.addresses = std::vector<wire::AddressView>{{"InternalIP", "10.0.0.9"}};
  request.rows[1].machine.vars_given = false;
  request.rows[1].machine.vars_json.reset();
  auto again = Import(request);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->updated, 1);
  EXPECT_EQ(again->unchanged, 1);
  EXPECT_EQ(again->rows[0].changes,
            (std::vector<std::string>{"addresses +InternalIP=10.0.0.9 -InternalIP=10.0.0.5"}));
  EXPECT_EQ(machines_.Show("node-2")->vars_json, R"({"rack":"r2"})");
}

TEST_P(MachineServiceTest, ImportRefusals) {
  SoftMachine a, b;
  const auto refused = [&](wire::ImportRequest request) {
    auto r = Import(request);
    return r.ok() ? Status::Ok() : r.status();
  };
  wire::ImportRequest no_pool;
  no_pool.rows = {Row(a, "node-1", 2), Row(b, "node-2", 3)};
  no_pool.rows[1].machine.pool.reset();
  Status s = refused(no_pool);
  EXPECT_EQ(s.reason(), "field_missing");
  EXPECT_EQ(s.message(), "line 3 (node-2): pool is required");

  wire::ImportRequest bad_ek;
  bad_ek.rows = {Row(a, "node-1", 2)};
  bad_ek.rows[0].machine.ek_public_base64.reset();
  bad_ek.rows[0].machine.ek_certificate_base64 = wire::Base64Encode(UntrustedCertificate());
  s = refused(bad_ek);
  EXPECT_EQ(s.code(), Status::Code::kVerificationFailed) << s.ToString();
  EXPECT_EQ(s.message().rfind("line 2 (node-1): ", 0), 0u) << s.ToString();

  wire::ImportRequest twice;
  twice.rows = {Row(a, "node-1", 2), Row(a, "node-2", 3)};
  EXPECT_EQ(refused(twice).reason(), "import_duplicate");

  wire::ImportRequest nowhere;
  nowhere.rows = {Row(a, "node-1", 2), Row(b, "node-2", 3)};
  nowhere.rows[1].machine.pool = "nowhere";
  s = refused(nowhere);
  EXPECT_EQ(s.reason(), "pool_unknown");
  EXPECT_NE(s.message().find("line 3 (node-2)"), std::string::npos) << s.ToString();
  EXPECT_TRUE(machines_.List(std::nullopt, std::nullopt)->empty());  // all or nothing

  // The bound on rows, checked as they arrive.
  const wire::ImportRowRequest row = Row(a, "node-1", 2);
  auto many = machines_.Import(
      [&row](const wire::ImportRowSink& sink) -> Result<wire::ImportRequest> {
        if (Status st = sink(row, kMaxImportRows); !st.ok()) return st;
        return wire::ImportRequest{};
      },
      actor_);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.status().reason(), "field_invalid");
  EXPECT_NE(many.status().message().find("at most 100000 machines"), std::string::npos);
}

TEST_P(MachineServiceTest, ListAndShowWithTheLastReportAndAttestation) {
  SoftMachine m, pending;
  ASSERT_TRUE(machines_.Enroll(Request(m, "node-1"), actor_).ok());
  Discovered(pending, "pending-1");

  auto all = machines_.List(std::nullopt, std::nullopt);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  for (const auto& v : *all) {
    EXPECT_TRUE(v.with_last_report);
    EXPECT_FALSE(v.last_report.has_value());
  }
  auto waiting = machines_.List(std::string("workers"), std::string("pending"));
  ASSERT_TRUE(waiting.ok());
  ASSERT_EQ(waiting->size(), 1u);
  EXPECT_EQ(waiting->front().hostname, "pending-1");
  // An empty pool lists nothing; a pool that does not exist is refused
  // (issue 32: `list --pool nope` was an empty table and exit 0).
  storage::Pool other;
  other.name = "other";
  ASSERT_TRUE(store_->PutPool(other, actor_, now_).ok());
  auto empty = machines_.List(std::string("other"), std::nullopt);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());
  auto nope = machines_.List(std::string("nope"), std::nullopt);
  EXPECT_EQ(Reason(nope.status()), "pool_unknown");
  EXPECT_EQ(nope.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(Reason(machines_.List(std::nullopt, std::string("sleeping")).status()), "state_invalid");

  auto shown = machines_.Show("node-1");
  ASSERT_TRUE(shown.ok());
  EXPECT_FALSE(shown->last_attestation.has_value());
  EXPECT_TRUE(shown->with_last_report);
  Attest(m);
  storage::ProvisioningReportRecord report;
  report.machine_id = store_->GetMachine("node-1")->id;
  report.at = now_;
  report.outcome = "failed";
  report.step = "ignition";
  report.exit_status = 3;
  report.done = {"fetch"};
  ASSERT_TRUE(store_->RecordReport(report).ok());
  shown = machines_.Show("node-1");
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  ASSERT_TRUE(shown->last_attestation.has_value());
  EXPECT_EQ(shown->last_attestation->at, now_);
  ASSERT_TRUE(shown->last_report.has_value());
  EXPECT_EQ(shown->last_report->step, "ignition");
  EXPECT_EQ(shown->last_report->done, (std::vector<std::string>{"fetch"}));
  EXPECT_EQ(shown->trust, "trusted");
  auto listed = machines_.List(std::nullopt, std::string("attested"));
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  ASSERT_TRUE(listed->front().last_report.has_value());
  EXPECT_EQ(listed->front().last_report->outcome, "failed");
  EXPECT_EQ(Reason(machines_.Show("node-9").status()), "hostname_unknown");
}

TEST_P(MachineServiceTest, ApproveNamesAndPlacesADiscoveredMachine) {
  SoftMachine pending, m;
  Discovered(pending, "pending-1");
  ASSERT_TRUE(machines_.Enroll(Request(m, "node-1"), actor_).ok());

  wire::ApprovalRequest bad_vars;
  bad_vars.vars_json = "null";
  EXPECT_EQ(Reason(machines_.Approve("pending-1", bad_vars, actor_).status()), "field_invalid");
  wire::ApprovalRequest taken;
  taken.hostname = "node-1";
  EXPECT_EQ(Reason(machines_.Approve("pending-1", taken, actor_).status()), "hostname_taken");
  wire::ApprovalRequest elsewhere;
  elsewhere.pool = "nowhere";
  EXPECT_EQ(Reason(machines_.Approve("pending-1", elsewhere, actor_).status()), "pool_unknown");

  wire::ApprovalRequest approval;
  approval.hostname = "node-2";
  approval.addresses = std::vector<wire::AddressView>{{"InternalIP", "10.0.0.9"}};
  approval.vars_json = R"({"rack":"r1"})";
  auto approved = machines_.Approve("pending-1", approval, actor_);
  ASSERT_TRUE(approved.ok()) << approved.status().ToString();
  EXPECT_EQ(approved->hostname, "node-2");
  EXPECT_EQ(approved->state, "enrolled");
  EXPECT_EQ(approved->vars_json, R"({"rack":"r1"})");
  EXPECT_EQ(LastWhy(), "by operator");
  EXPECT_EQ(Reason(machines_.Approve("node-2", {}, actor_).status()), "state_conflict");
  EXPECT_EQ(Reason(machines_.Approve("node-9", {}, actor_).status()), "hostname_unknown");
}

TEST_P(MachineServiceTest, RevokeResetDeleteAndRename) {
  SoftMachine m, n;
  ASSERT_TRUE(machines_.Enroll(Request(m, "node-1"), actor_).ok());
  ASSERT_TRUE(machines_.Enroll(Request(n, "node-2"), actor_).ok());
  EXPECT_EQ(Reason(machines_.Reset("node-1", "", false, actor_).status()), "state_conflict");
  // Issue 32: a revoke needs a reason; a revoked machine is reset only
  // when the operator asks to lift the revocation.
  EXPECT_EQ(Reason(machines_.Revoke("node-1", "", actor_).status()), "field_missing");
  EXPECT_EQ(machines_.Show("node-1")->state, "enrolled");
  auto revoked = machines_.Revoke("node-1", "disk stolen", actor_);
  ASSERT_TRUE(revoked.ok());
  EXPECT_EQ(revoked->state, "revoked");
  EXPECT_EQ(LastWhy(), "disk stolen");
  EXPECT_EQ(Reason(machines_.Reset("node-1", "racked again", false, actor_).status()), "machine_revoked");
  EXPECT_EQ(machines_.Show("node-1")->state, "revoked");
  EXPECT_EQ(LastWhy(), "disk stolen");
  // Enrolling it again says it is revoked, and leaves it so.
  auto again = machines_.Enroll(Request(m, "node-1"), actor_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->answer.outcome, storage::kEnrollUnchanged);
  EXPECT_EQ(again->answer.machine.state, "revoked");
  EXPECT_NE(again->answer.summary.find("REVOKED"), std::string::npos) << again->answer.summary;
  EXPECT_NE(again->answer.summary.find("--unrevoke"), std::string::npos) << again->answer.summary;
  auto reset = machines_.Reset("node-1", "racked again", true, actor_);
  ASSERT_TRUE(reset.ok());
  EXPECT_EQ(reset->state, "enrolled");
  EXPECT_EQ(LastWhy(), "racked again");
  EXPECT_EQ(Reason(machines_.Revoke("node-9", "why", actor_).status()), "hostname_unknown");

  // Rename: a new name is required, free and valid; the machine quiet.
  EXPECT_EQ(Reason(machines_.Rename("node-1", {"", ""}, actor_).status()), "field_missing");
  EXPECT_EQ(Reason(machines_.Rename("node-1", {"node-2", ""}, actor_).status()), "hostname_taken");
  EXPECT_EQ(Reason(machines_.Rename("node-1", {"Bad_Name", ""}, actor_).status()), "hostname_invalid");
  EXPECT_EQ(Reason(machines_.Rename("node-9", {"node-3", ""}, actor_).status()), "hostname_unknown");
  auto renamed = machines_.Rename("node-1", {"node-3", ""}, actor_);
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  EXPECT_EQ(renamed->hostname, "node-3");
  EXPECT_EQ(renamed->renamed_from, std::optional<std::string>("node-1"));
  EXPECT_EQ(LastWhy(), "renamed by operator");

  // Delete: only a quiet machine; the answer is the machine as it was.
  Attest(n);
  EXPECT_EQ(Reason(machines_.Delete("node-2", "", actor_).status()), "machine_active");
  EXPECT_EQ(Reason(machines_.Rename("node-2", {"node-4", ""}, actor_).status()), "machine_active");
  auto deleted = machines_.Delete("node-3", "", actor_);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_TRUE(deleted->deleted);
  EXPECT_EQ(deleted->hostname, "node-3");
  EXPECT_EQ(LastWhy(), "deleted by operator");
  EXPECT_EQ(Reason(machines_.Show("node-3").status()), "hostname_unknown");
  EXPECT_EQ(Reason(machines_.Delete("node-3", "", actor_).status()), "hostname_unknown");
}

RACKGATE_ON_EVERY_STORE(MachineServiceTest);

}  // namespace
}  // namespace rackgate::core::testing
