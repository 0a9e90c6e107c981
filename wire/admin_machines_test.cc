// Tests of the admin API's machine bodies (wire/admin_machines.h): round trips, the answers' exact text,
// every truncation, malformed fields, and the streamed import.
#include "wire/admin_machines.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "wire/admin_pools.h"

namespace rackgate::wire {
namespace {

template <typename Decode>
void ExpectEveryPrefixRefused(const std::string& body, Decode decode) {
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = decode(std::string_view(body).substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes accepted";
    if (!r.ok()) EXPECT_EQ(r.status().reason(), "bad_json") << n;
  }
}

MachineView SomeMachine() {
  MachineView m;
  m.hostname = "node-1";
  m.pool = "workers";
  m.state = "joined";
  m.ek_hash = "00ff";
  m.has_ek_certificate = true;
  m.tpm_manufacturer = "id:49465800";
  m.tpm_model = "SLB9670";
  m.tpm_version = "7.85";
  m.addresses = {{"Hostname", "node-1"}, {"InternalIP", "10.0.0.5"}};
  m.created_at = 1800000000;
  m.updated_at = 1800000100;
  m.has_policy = true;
  m.vars_json = R"({"rack":"r12"})";
  m.last_attested_at = 1800000200;
  m.client_cert_issued_at = 1800000300;
  m.trust = "untrusted";
  m.trust_reason = "attestation_too_old";
  m.trust_changed_at = 1800000400;
  m.with_last_report = true;
  m.last_report = MachineReportView{1800000500, "failed", "ignition", "exit", "disk not found", 3, {"fetch"}};
  m.last_attestation = MachineAttestationView{1800000200, 4, 2, 18446744073709551615u};
  return m;
}

EnrollRequest SomeEnroll() {
  EnrollRequest r;
  r.hostname = "node-1";
  r.pool = "workers";
  r.ek_public_base64 = "AAEC";
  r.ek_certificate_base64 = "MIIB";
  r.addresses = std::vector<AddressView>{{"InternalIP", "10.0.0.6"}};
  r.policy_given = true;
  r.policy_json = R"({"pcrs":{"7":["aa"]}})";
  r.vars_given = true;
  r.vars_json = R"({"rack":"r1"})";
  r.unset_vars = {"old"};
  r.replace_addresses = true;
  r.replace_vars = true;
  r.replace_ek = true;
  return r;
}

TEST(MachineView, RoundTripsAndTruncation) {
  const MachineView m = SomeMachine();
  const std::string body = EncodeMachineView(m);
  auto back = DecodeMachineView(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
  ExpectEveryPrefixRefused(body, DecodeMachineView);
  MachineView gone = SomeMachine();
  gone.with_last_report = false;
  gone.last_report.reset();
  gone.last_attestation.reset();
  gone.deleted = true;
  gone.renamed_from = "old-name";
  auto gone_back = DecodeMachineView(EncodeMachineView(gone));
  ASSERT_TRUE(gone_back.ok());
  EXPECT_EQ(*gone_back, gone);
}

TEST(MachineView, AnswersTheAppliancesText) {
  // Keys sorted, trust and its time null before a verdict, no last_report
  // unless shown (then null when none), as rackgated always answered.
  MachineView bare;
  bare.hostname = "h";
  bare.pool = "p";
  bare.state = "enrolled";
  EXPECT_EQ(EncodeMachineView(bare),
            R"({"addresses":[],"created_at":0,"ek_hash":"","has_ek_certificate":false,"has_policy":false,)"
            R"("hostname":"h","pool":"p","state":"enrolled","tpm_manufacturer":"","tpm_model":"","tpm_version":"",)"
            R"("trust":null,"trust_changed_at":null,"trust_reason":"","updated_at":0,"vars":{}})");
  bare.with_last_report = true;
  bare.vars_json = R"({"b":"2","a":"1"})";
  const std::string shown = EncodeMachineView(bare);
  EXPECT_NE(shown.find(R"("last_report":null)"), std::string::npos) << shown;
  EXPECT_NE(shown.find(R"("vars":{"a":"1","b":"2"})"), std::string::npos) << shown;
  auto back = DecodeMachineView(shown);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->with_last_report);
  EXPECT_FALSE(back->last_report.has_value());
}

TEST(MachineView, RefusesMalformedFields) {
  for (const char* body :
       {R"({"hostname":1})", R"({"has_policy":"yes"})", R"({"created_at":"x"})", R"({"trust":1})",
        R"({"trust_changed_at":"x"})", R"({"addresses":{}})", R"({"addresses":[1]})", R"({"vars":[]})",
        R"({"last_report":1})", R"({"last_report":{"done":"x"}})", R"({"last_report":{"exit_status":"x"}})",
        R"({"last_attestation":[]})", R"({"last_attestation":{"clock":-1}})", R"({"deleted":"yes"})"}) {
    auto r = DecodeMachineView(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().reason(), "field_invalid") << body;
  }
  EXPECT_TRUE(DecodeMachineView(R"({"hostname":"h","later":1})").ok());
}

TEST(MachineList, RoundTripsAndTruncation) {
  const std::vector<MachineView> machines = {SomeMachine(), MachineView{}};
  const std::string body = EncodeMachineList(machines);
  auto back = DecodeMachineList(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, machines);
  ExpectEveryPrefixRefused(body, DecodeMachineList);
  EXPECT_FALSE(DecodeMachineList(R"({"machines":{}})").ok());
  EXPECT_FALSE(DecodeMachineList(R"({"machines":[1]})").ok());
  auto none = DecodeMachineList("{}");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(EnrollRequest, RoundTripsAndTruncation) {
  const EnrollRequest r = SomeEnroll();
  const std::string body = EncodeEnrollRequest(r);
  auto back = DecodeEnrollRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  ExpectEveryPrefixRefused(body, DecodeEnrollRequest);
  // Only the hostname is always there: the rest is kept when absent.
  EnrollRequest bare;
  bare.hostname = "node-1";
  EXPECT_EQ(EncodeEnrollRequest(bare), R"({"hostname":"node-1"})");
  auto bare_back = DecodeEnrollRequest(EncodeEnrollRequest(bare));
  ASSERT_TRUE(bare_back.ok());
  EXPECT_EQ(*bare_back, bare);
  // Null policy and vars are given (cleared), not absent.
  EnrollRequest cleared;
  cleared.hostname = "node-1";
  cleared.policy_given = true;
  cleared.vars_given = true;
  auto cleared_back = DecodeEnrollRequest(EncodeEnrollRequest(cleared));
  ASSERT_TRUE(cleared_back.ok());
  EXPECT_EQ(*cleared_back, cleared);
}

TEST(EnrollRequest, ReadsLeniently) {
  // Non-string names and EK fields read as "", non-boolean flags as false:
  // the core refuses what is missing, as the appliance always did.
  auto r = DecodeEnrollRequest(R"({"hostname":1,"pool":2,"ek_public":3,"replace_ek":"yes","clear_policy":1})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->hostname, "");
  EXPECT_EQ(r->pool, std::optional<std::string>(""));
  EXPECT_EQ(r->ek_public_base64, std::optional<std::string>(""));
  EXPECT_FALSE(r->replace_ek);
  EXPECT_FALSE(r->clear_policy);
  auto odd = DecodeEnrollRequest(R"({"addresses":[{"kind":1}],"vars":[1]})");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(*odd->addresses, (std::vector<AddressView>{{"", ""}}));
  EXPECT_EQ(odd->vars_json, std::optional<std::string>("[1]"));  // the core refuses it
}

TEST(EnrollRequest, RefusesMalformedFields) {
  struct Case {
    const char* body;
    const char* reason;
    const char* message;
  };
  for (const Case& c :
       {Case{"", "bad_json", "body is not a JSON object"}, Case{"[]", "bad_json", "body is not a JSON object"},
        Case{R"({"addresses":"x"})", "field_invalid", "addresses must be a list"},
        Case{R"({"addresses":["x"]})", "field_invalid", R"(an address is an object {"kind": ..., "value": ...})"},
        Case{R"({"unset_vars":"x"})", "field_invalid", "unset_vars must be a list of at most 64 names"},
        Case{R"({"unset_vars":[1]})", "field_invalid", "unset_vars: names are 1..63 characters"}}) {
    auto r = DecodeEnrollRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().reason(), c.reason) << c.body;
    EXPECT_EQ(r.status().message(), c.message) << c.body;
  }
  const std::string deep = R"({"policy":)" + std::string(kMaxAdminJsonDepth, '[') +
                           std::string(kMaxAdminJsonDepth, ']') + "}";
  EXPECT_EQ(DecodeEnrollRequest(deep).status().reason(), "bad_json");
}

TEST(EnrollAnswer, RoundTripsAndTruncation) {
  const EnrollAnswer a{SomeMachine(), "updated", {"addresses +InternalIP=10.0.0.6"},
                       "node-1: addresses +InternalIP=10.0.0.6; vars unchanged"};
  const std::string body = EncodeEnrollAnswer(a);
  auto back = DecodeEnrollAnswer(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);
  ExpectEveryPrefixRefused(body, DecodeEnrollAnswer);
  // The machine's fields and the outcome's side by side, in one object.
  EXPECT_NE(body.find(R"("outcome":"updated")"), std::string::npos);
  EXPECT_NE(body.find(R"("hostname":"node-1")"), std::string::npos);
  EXPECT_FALSE(DecodeEnrollAnswer(R"({"changes":"x"})").ok());
  EXPECT_FALSE(DecodeEnrollAnswer(R"({"outcome":1})").ok());
}

// Decodes an import body, keeping every row handed over.
Result<ImportRequest> DecodeAll(std::string_view body, std::vector<size_t>* indexes = nullptr) {
  std::vector<ImportRowRequest> rows;
  auto r = DecodeImportRequest(body, [&](ImportRowRequest row, size_t index) {
    rows.push_back(std::move(row));
    if (indexes != nullptr) indexes->push_back(index);
    return Status::Ok();
  });
  if (r.ok()) r->rows = std::move(rows);
  return r;
}

TEST(ImportRequest, RoundTripsRowByRowAndTruncation) {
  ImportRequest r;
  r.dry_run = true;
  EnrollRequest machine = SomeEnroll();
  machine.unset_vars.clear();  // a row has no enroll-call fields
  machine.replace_addresses = machine.replace_vars = machine.replace_ek = false;
  r.rows = {{machine, 12, std::nullopt}, {machine, 17, 3}, {machine, std::nullopt, std::nullopt}};
  r.rows[1].machine.hostname = "node-2";
  r.rows[1].machine.policy_json.reset();  // policy given as null: cleared
  const std::string body = EncodeImportRequest(r);
  std::vector<size_t> indexes;
  auto back = DecodeAll(body, &indexes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(indexes, (std::vector<size_t>{0, 1, 2}));
  ExpectEveryPrefixRefused(body, [](std::string_view b) { return DecodeAll(b); });
  EXPECT_EQ(ImportRowWhere(r.rows[0], 0), "line 12");
  EXPECT_EQ(ImportRowWhere(r.rows[1], 1), "row 3 (line 17)");
  EXPECT_EQ(ImportRowWhere(r.rows[2], 2), "machines[2]");
  // An import row ignores the enroll call's own fields.
  auto flags = DecodeAll(R"({"machines":[{"hostname":"a","unset_vars":7,"replace_ek":true}]})");
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_TRUE(flags->rows[0].machine.unset_vars.empty());
  EXPECT_FALSE(flags->rows[0].machine.replace_ek);
}

TEST(ImportRequest, RefusesInTheAppliancesOrder) {
  struct Case {
    std::string body;
    const char* reason;
    const char* message;
  };
  for (const Case& c : {
           Case{"[]", "bad_json", "body is not a JSON object"},
           // A malformed body wins over a bad row seen before the error.
           Case{R"({"machines":[1], )", "bad_json", "body is not a JSON object"},
           Case{R"({"dry_run":true})", "field_missing", "machines must be a list"},
           Case{R"({"machines":{}})", "field_missing", "machines must be a list"},
           Case{R"({"machines":[],"machines":[]})", "field_invalid", "machines given twice"},
           Case{R"({"machines":[1]})", "field_invalid", "machines[0] (): a machine must be a JSON object"},
           Case{R"({"machines":[{"hostname":"a","line":4,"addresses":1}]})", "field_invalid",
                "line 4 (a): addresses must be a list"},
           Case{R"({"machines":[],"dry_run":"yes"})", "field_invalid", "dry_run must be true or false"},
           Case{R"({"machines":[)" + std::string(kMaxAdminJsonDepth, '[') + std::string(kMaxAdminJsonDepth, ']') +
                    "]}",
                "bad_json", "body is not a JSON object"},
       }) {
    auto r = DecodeAll(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().reason(), c.reason) << c.body;
    EXPECT_EQ(r.status().message(), c.message) << c.body;
  }
}

TEST(ImportRequest, ARefusedRowStopsTheRows) {
  size_t handed = 0;
  auto r = DecodeImportRequest(R"({"machines":[{"hostname":"a"},{"hostname":"b"},{"hostname":"c"}]})",
                               [&](ImportRowRequest row, size_t) {
                                 ++handed;
                                 if (row.machine.hostname == "b") return Status::NotFound("pool_unknown", "no pool");
                                 return Status::Ok();
                               });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "pool_unknown");
  EXPECT_EQ(handed, 2u);
}

TEST(ImportAnswer, RoundTripsAndTruncation) {
  const ImportAnswer a{2, false, 1, 1, 0,
                       {{"line 2", "node-1", "created", {}}, {"line 3", "node-2", "updated", {"vars +rack"}}}};
  const std::string body = EncodeImportAnswer(a);
  auto back = DecodeImportAnswer(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);
  ExpectEveryPrefixRefused(body, DecodeImportAnswer);
  EXPECT_EQ(EncodeImportAnswer(ImportAnswer{}),
            R"({"created":0,"dry_run":false,"imported":0,"rows":[],"unchanged":0,"updated":0})");
  for (const char* bad : {R"({"created":"x"})", R"({"rows":{}})", R"({"rows":[1]})", R"({"rows":[{"changes":1}]})"}) {
    EXPECT_FALSE(DecodeImportAnswer(bad).ok()) << bad;
  }
}

TEST(ApprovalRequest, RoundTripsAndRefuses) {
  ApprovalRequest r;
  r.hostname = "node-x";
  r.pool = "masters";
  r.addresses = std::vector<AddressView>{{"InternalIP", "10.0.0.9"}};
  r.vars_json = R"({"rack":"r1"})";
  r.reason = "racked in r1";
  const std::string body = EncodeApprovalRequest(r);
  auto back = DecodeApprovalRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  // An empty body approves as recorded; a body is an object.
  auto empty = DecodeApprovalRequest("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, ApprovalRequest{});
  for (size_t n = 1; n < body.size(); ++n) EXPECT_FALSE(DecodeApprovalRequest(body.substr(0, n)).ok()) << n;
  struct Case {
    const char* body;
    const char* message;
  };
  for (const Case& c : {Case{R"({"hostname":null})", "hostname is a string"}, Case{R"({"pool":1})", "pool is a string"},
                        Case{R"({"addresses":{}})", "addresses must be a list"},
                        Case{R"({"addresses":[1]})", "an address is {kind, value}"}}) {
    auto bad = DecodeApprovalRequest(c.body);
    ASSERT_FALSE(bad.ok()) << c.body;
    EXPECT_EQ(bad.status().reason(), "field_invalid") << c.body;
    EXPECT_EQ(bad.status().message(), c.message) << c.body;
  }
  // vars travel as given, null too: the core checks them.
  auto null_vars = DecodeApprovalRequest(R"({"vars":null})");
  ASSERT_TRUE(null_vars.ok());
  EXPECT_EQ(null_vars->vars_json, std::optional<std::string>("null"));
}

TEST(ReasonAndRename, RoundTripAndRefuse) {
  const ReasonRequest why{"decommissioned"};
  auto back = DecodeReasonRequest(EncodeReasonRequest(why));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, why);
  EXPECT_EQ(*DecodeReasonRequest(""), ReasonRequest{});
  EXPECT_EQ(*DecodeReasonRequest(R"({"reason":1})"), ReasonRequest{});
  EXPECT_EQ(DecodeReasonRequest("nope").status().reason(), "bad_json");
  // reset's unrevoke (issue 32): only a JSON true lifts a revocation.
  const ReasonRequest lift{"false alarm", true};
  EXPECT_EQ(*DecodeReasonRequest(EncodeReasonRequest(lift)), lift);
  EXPECT_FALSE(DecodeReasonRequest(EncodeReasonRequest(why))->unrevoke);
  EXPECT_FALSE(DecodeReasonRequest(R"({"reason":"x","unrevoke":"yes"})")->unrevoke);
  const RenameRequest rename{"node-2", "typo"};
  auto renamed = DecodeRenameRequest(EncodeRenameRequest(rename));
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ(*renamed, rename);
  ExpectEveryPrefixRefused(EncodeRenameRequest(rename), DecodeRenameRequest);
  EXPECT_EQ(*DecodeRenameRequest(R"({"hostname":7})"), RenameRequest{});
}

}  // namespace
}  // namespace rackgate::wire
