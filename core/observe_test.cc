// Observe mode (docs/policy.md, "Observe"): a pool that observes boot
// policy keeps every identity-verified machine's boot, judges it against the
// policy in force without enforcing a refusal, releases nothing the policy
// would not release, and can never pass for an enforcing pool: its
// machines wait with their own reason, the log says OBSERVE on every
// machine, and the metrics count its observations by pool.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include <spdlog/sinks/ringbuffer_sink.h>

#include "attest/boot_policy.h"
#include "attest/eventlog.h"
#include "attest/testing/test_util.h"
#include "base/log.h"
#include "base/metrics.h"
#include "core/attestation.h"
#include "core/csr_service.h"
#include "core/ignition_service.h"
#include "core/secrets.h"
#include "core/signer.h"
#include "core/policy_service.h"
#include "core/testing/core_fixture.h"
#include "core/testing/csr_test_util.h"
#include "base/hex.h"

namespace rackgate::core::testing {
namespace {

std::string Hex32(uint8_t b) { return hex::Encode(Bytes(32, b)); }

class ObserveTest : public CoreTest {
 protected:
  void SetUp() override {
    CoreTest::SetUp();
    if (skip_) return;
    attestation_ = std::make_unique<AttestationService>(store_.get(), &anchors_, options_, &metrics_,
                                                        [this] { return now_; });
    ring_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    Logger("protocol")->sinks().push_back(ring_);
    policy_log_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    Logger("policy")->sinks().push_back(policy_log_);
  }
  void TearDown() override {
    auto& sinks = Logger("protocol")->sinks();
    std::erase(sinks, ring_);
    std::erase(Logger("policy")->sinks(), policy_log_);
  }

  void SetPool(const std::optional<std::string>& policy, const std::string& mode) {
    storage::PoolPolicyChange c;
    c.pool = "workers";
    c.boot_policy_json = policy;
    c.mode = mode;
    auto p = store_->SetPoolBootPolicy(c, storage::Actor{"test", ""}, now_);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
  }

  // A machine that booted as a real log says: its sha256 PCRs are the log's
  // replay, and it sends the log with its evidence.
  void Boot(SoftMachine* m, const std::string& log_name) {
    Bytes log = rackgate::testing::ReadEventLog(log_name);
    auto parsed = attest::ParseEventLog(log);
    ASSERT_TRUE(parsed.ok());
    auto replayed = attest::Replay(*parsed);
    ASSERT_TRUE(replayed.ok());
    // A PCR the log never extends holds zeros.
    for (auto& [pcr, value] : m->pcrs[attest::kAlgSha256]) value = Bytes(32, 0);
    for (const auto& [pcr, value] : replayed->at(attest::kAlgSha256)) m->pcrs[attest::kAlgSha256][pcr] = value;
    logs_[m] = std::move(log);
  }

  Result<EvidenceResult> Try(const SoftMachine& m) {
    auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
    if (!challenge.ok()) return challenge.status();
    auto evidence = m.Answer(*challenge);
    if (auto it = logs_.find(&m); it != logs_.end()) evidence.event_log = it->second;
    return attestation_->Evidence(evidence, caller_);
  }

  std::string Logged() {
    std::string all;
    for (const auto& line : ring_->last_formatted()) all += line;
    return all;
  }

  std::map<const SoftMachine*, Bytes> logs_;
  Metrics metrics_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> ring_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> policy_log_;  // the "policy" logger's lines
};

constexpr char kGce[] = "tpm2-tools_event-gce-ubuntu-2104-log.bin";
constexpr char kSdBoot[] = "tpm2-tools_event-sd-boot-fedora37.bin";
// Golden PCR 0 of the GCE boot: the sd-boot machine's firmware differs.
std::string PassingPolicy() {
  auto log = attest::ParseEventLog(rackgate::testing::ReadEventLog(kGce));
  auto replayed = attest::Replay(*log);
  return R"({"version": 1, "require_separators": true, "pcrs": {"sha256": {"0": ")" +
         hex::Encode(replayed->at(attest::kAlgSha256).at(0)) + "\"}}}";
}
std::string FailingPolicy() { return R"({"version": 1, "pcrs": {"sha256": {"1": ")" + Hex32(0xee) + "\"}}}"; }

TEST_F(ObserveTest, ObservingPoolAsksForTheBootsPcrs) {
  SoftMachine m;
  Enroll(m, "node-1");
  Boot(&m, kGce);
  SetPool(std::nullopt, storage::kPolicyModeObserve);
  auto c = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(attest::FormatPcrSelectionList(c->pcr_selection), "sha256:0,1,2,3,4,5,6,7,8,9,11,12,14");
}

// Without a policy in force an observing pool releases nothing: the machine
// proved who it is, its boot is kept, and it waits for an accepted policy.
TEST_F(ObserveTest, NoPolicyKeepsTheBootAndWaits) {
  SoftMachine m;
  const storage::Machine enrolled = Enroll(m, "node-1");
  Boot(&m, kGce);
  SetPool(std::nullopt, storage::kPolicyModeObserve);
  auto r = Try(m);
  EXPECT_EQ(ReasonOf(r), "boot_policy_observing");
  EXPECT_EQ(r.status().code(), Status::Code::kUnsupported);
  // No token was issued and nothing is held against the machine.
  EXPECT_FALSE(store_->LastSuccessfulAttestation(enrolled.id).ok());
  EXPECT_TRUE(store_->RecentFailures(10)->empty());
  auto observed = store_->ListBootObservations("workers");
  ASSERT_TRUE(observed.ok());
  ASSERT_EQ(observed->size(), 1u);
  EXPECT_EQ((*observed)[0].hostname, "node-1");
  EXPECT_EQ((*observed)[0].verdict, "none");
  EXPECT_NE((*observed)[0].pcrs_json.find("\"12\""), std::string::npos) << (*observed)[0].pcrs_json;
  EXPECT_NE(Logged().find("OBSERVE pool workers: boot policy NOT ENFORCED for node-1"), std::string::npos)
      << Logged();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("rackgate_boot_policy_observations_total{pool=\"workers\",verdict=\"none\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("reason=\"boot_policy_observing\""), std::string::npos);
}

TEST_F(ObserveTest, AFailingBootIsRecordedWithItsRulesAndWaits) {
  SoftMachine m;
  Enroll(m, "node-1");
  Boot(&m, kGce);
  SetPool(FailingPolicy(), storage::kPolicyModeObserve);
  EXPECT_EQ(ReasonOf(Try(m)), "boot_policy_observing");
  auto observed = store_->ListBootObservations("workers");
  ASSERT_EQ(observed->size(), 1u);
  EXPECT_EQ((*observed)[0].verdict, "fail");
  EXPECT_EQ((*observed)[0].violations, std::vector<std::string>{"pcrs:pcr_mismatch"});
  EXPECT_NE(Logged().find("verdict fail: pcrs:pcr_mismatch"), std::string::npos) << Logged();
  // For what it releases, the machine is judged as an enforcing pool would
  // judge it (issue 27): its refused attestation is its own, and untrusted.
  auto failures = store_->RecentFailures(10);
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ(failures->front().reason, "boot_policy_violation");
  EXPECT_EQ(failures->front().reasons, std::vector<std::string>{"pcrs:pcr_mismatch"});
  EXPECT_EQ(store_->GetMachine("node-1")->trust, "untrusted");
}

// Issue 27, item 3: observing never releases more than enforcing would. For
// each verdict of a second boot (the policy passes it, refuses it, or there
// is none), after a first good boot whose token the machine keeps: what an
// observing pool releases is a subset of what an enforcing pool releases
// (a new token; the attested config and a client CSR for the earlier token).
TEST_F(ObserveTest, Issue27ObserveReleasesNoMoreThanEnforceForEveryVerdict) {
  CsrOptions csr_options;
  csr_options.cluster_ca_certificate = dir_.File("ca.crt");
  csr_options.cluster_ca_key = dir_.File("ca.key");
  ASSERT_TRUE(csr::GenerateClusterCa("test cluster CA", 3650, csr_options.cluster_ca_certificate,
                                     csr_options.cluster_ca_key)
                  .ok());
  CsrService csrs(store_.get(), attestation_.get(), csr_options, nullptr);
  IgnitionOptions io;
  io.appliance_url = "https://appliance.example:22623";
  io.appliance_ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
  IgnitionService ignition(store_.get(), attestation_.get(), io, nullptr);
  const std::string kTemplate = R"({"ignition": {"version": "3.2.0"}})";
  ASSERT_TRUE(store_->SetPoolTemplate("workers", "public", kTemplate, Sha256Hex(kTemplate), storage::Actor{"t", ""},
                                      now_)
                  .ok());
  ignition.Invalidate("workers");

  enum Release { kNewToken = 1, kConfig = 2, kCsr = 4 };
  int n = 0;
  // What a machine gets at its second boot under `policy` in `mode`.
  auto releases = [&](const std::optional<std::string>& policy, const std::string& mode) -> int {
    SoftMachine m;
    const std::string hostname = "node-" + std::to_string(++n);
    Enroll(m, hostname);
    Boot(&m, kGce);
    SetPool(std::nullopt, storage::kPolicyModeEnforce);
    auto first = Try(m);
    if (!first.ok()) throw std::runtime_error("first boot: " + first.status().ToString());
    SetPool(policy, mode);
    int got = 0;
    if (Try(m).ok()) got |= kNewToken;
    if (ignition.AttestedConfig(AttestedConfigRequest{first->token, std::nullopt, "192.0.2.9:1"}).ok()) {
      got |= kConfig;
    }
    CsrSubmission client;
    client.signer = "kubernetes.io/kube-apiserver-client-kubelet";
    auto key = csr::test_util::NewKey("EC", "P-256");
    csr::test_util::CsrSpec spec;
    spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:" + hostname}};
    client.csr_pem = csr::test_util::MakeCsr(key.get(), spec);
    if (csrs.Submit(first->token, client).ok()) got |= kCsr;
    return got;
  };
  const struct {
    const char* verdict;
    std::optional<std::string> policy;
  } verdicts[] = {{"pass", PassingPolicy()}, {"fail", FailingPolicy()}, {"none", std::nullopt}};
  for (const auto& v : verdicts) {
    SCOPED_TRACE(v.verdict);
    const int enforce = releases(v.policy, storage::kPolicyModeEnforce);
    const int observe = releases(v.policy, storage::kPolicyModeObserve);
    EXPECT_EQ(observe & ~enforce, 0) << "observe releases " << observe << ", enforce " << enforce;
    if (std::string(v.verdict) == "fail") {
      EXPECT_EQ(enforce, 0);
    } else {
      EXPECT_EQ(enforce, kNewToken | kConfig | kCsr);
    }
  }
}

// Observing never releases less than the policy in force allows either: a
// boot that passes it gets its token, and is kept.
TEST_F(ObserveTest, APassingBootGoesOnAndIsKept) {
  SoftMachine m;
  Enroll(m, "node-1");
  Boot(&m, kGce);
  SetPool(PassingPolicy(), storage::kPolicyModeObserve);
  auto r = Try(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->token.empty());
  EXPECT_EQ((*store_->ListBootObservations("workers"))[0].verdict, "pass");
  EXPECT_NE(metrics_.Render().find("verdict=\"pass\"} 1"), std::string::npos);
}

// Identity is enforced as always: a wrong activation is refused (403), not
// observed.
TEST_F(ObserveTest, IdentityRefusalsAreFinalAndNotObserved) {
  SoftMachine m;
  Enroll(m, "node-1");
  Boot(&m, kGce);
  SetPool(std::nullopt, storage::kPolicyModeObserve);
  auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
  ASSERT_TRUE(challenge.ok());
  auto evidence = m.Answer(*challenge);
  evidence.secret[0] ^= 1;
  EXPECT_EQ(ReasonOf(attestation_->Evidence(evidence, caller_)), "activation_failed");
  EXPECT_TRUE(store_->ListBootObservations("workers")->empty());
}

// An enforcing pool (the default) never observes: a failing boot is
// refused for good, nothing is kept, and nothing says OBSERVE.
TEST_F(ObserveTest, EnforcingPoolRefusesAndKeepsNothing) {
  SoftMachine m;
  Enroll(m, "node-1");
  Boot(&m, kGce);
  SetPool(FailingPolicy(), storage::kPolicyModeEnforce);
  EXPECT_EQ(ReasonOf(Try(m)), "boot_policy_violation");
  EXPECT_TRUE(store_->ListBootObservations("workers")->empty());
  EXPECT_EQ(Logged().find("OBSERVE"), std::string::npos) << Logged();
  EXPECT_EQ(metrics_.Render().find("rackgate_boot_policy_observations_total"), std::string::npos);
}

// After accept (policy stored, pool enforcing) the machine that waited is
// judged at its next attestation: passes, or is refused with the rule.
TEST_F(ObserveTest, AcceptedPolicyJudgesTheNextAttestation) {
  SoftMachine good, odd;
  Enroll(good, "node-good");
  Enroll(odd, "node-odd");
  Boot(&good, kGce);
  Boot(&odd, kSdBoot);
  SetPool(std::nullopt, storage::kPolicyModeObserve);
  EXPECT_EQ(ReasonOf(Try(good)), "boot_policy_observing");
  EXPECT_EQ(ReasonOf(Try(odd)), "boot_policy_observing");
  SetPool(PassingPolicy(), storage::kPolicyModeEnforce);
  EXPECT_TRUE(Try(good).ok());
  EXPECT_EQ(ReasonOf(Try(odd)), "boot_policy_violation");
  auto failures = store_->RecentFailures(10);
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ(failures->front().reasons, std::vector<std::string>{"pcrs:pcr_mismatch"});
}

// The workflow through the core, on real logs: a pool observes three
// machines (two alike, one booted from another log); the proposal names the
// odd one; accepting it enforces a policy that passes the two and refuses
// the odd one with the rule it breaks.
TEST_F(ObserveTest, ObserveProposeAcceptOnRealLogs) {
  SoftMachine a, b, odd;
  Enroll(a, "node-a");
  Enroll(b, "node-b");
  Enroll(odd, "node-odd");
  Boot(&a, kGce);
  Boot(&b, kGce);
  Boot(&odd, kSdBoot);
  PolicyService policies(store_.get(), [this] { return now_; });
  const storage::Actor op{"uid:0(root)", ""};

  EXPECT_EQ(ReasonOf(policies.Accept("workers", {}, op)), "nothing_observed");
  ASSERT_TRUE(policies.SetMode("workers", {storage::kPolicyModeObserve, ""}, op).ok());
  for (const SoftMachine* m : {&a, &b, &odd}) EXPECT_EQ(ReasonOf(Try(*m)), "boot_policy_observing");

  auto report = policies.Propose("workers");
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->observed, 3u);
  ASSERT_EQ(report->proposal.odd.size(), 1u);
  EXPECT_EQ(report->proposal.odd[0].hostname, "node-odd");
  EXPECT_FALSE(report->proposal.odd[0].differences.empty());
  EXPECT_FALSE(report->proposal.odd[0].violations.empty());
  EXPECT_FALSE(report->diff.had_current);

  // A pinned proposal that is no longer the current one is refused.
  EXPECT_EQ(ReasonOf(policies.Accept("workers", {std::string(64, '0'), false, ""}, op)), "proposal_changed");
  EXPECT_EQ(store_->GetPool("workers")->boot_policy_mode, storage::kPolicyModeObserve);

  const size_t audit_before = store_->ListAudit(storage::AuditFilter{})->size();
  auto accepted = policies.Accept("workers", {report->proposal_sha256, false, ""}, op);
  ASSERT_TRUE(accepted.ok()) << accepted.status().ToString();
  EXPECT_EQ(accepted->mode, storage::kPolicyModeEnforce);
  const std::optional<std::string> stored_text = store_->GetPool("workers")->boot_policy_json;
  EXPECT_EQ(stored_text, report->proposal.policy_json);
  storage::AuditFilter all;
  all.limit = 1000;
  auto audit = store_->ListAudit(all);
  ASSERT_EQ(audit->size(), audit_before + 1);
  EXPECT_EQ(audit->back().action, "pool_policy");
  EXPECT_NE(audit->back().detail_json.find("\"odd\":[\"node-odd\"]"), std::string::npos) << audit->back().detail_json;
  EXPECT_NE(audit->back().detail_json.find("\"diff\":[\"+ "), std::string::npos) << audit->back().detail_json;
  {
    // The row byte for byte (the hash chain covers it); the diff and the
    // policy digests are read from it, the rest is the proposal's.
    const std::string row = audit->back().detail_json;
    const nlohmann::json d = nlohmann::json::parse(row);
    EXPECT_EQ(row, R"({"diff":)" + d.at("diff").dump() + R"(,"machines":)" +
                       std::to_string(report->proposal.machines.size()) +
                       R"(,"mode_from":"observe","mode_to":"enforce","odd":["node-odd"],"policy_from_sha256":)" +
                       d.at("policy_from_sha256").dump() + R"(,"policy_to_sha256":)" +
                       d.at("policy_to_sha256").dump() + R"(,"pool":"workers","proposal_sha256":")" +
                       report->proposal_sha256 + R"(","source":"proposal"})");
  }
  // Issue 27, item 8: the two alike booted grub with one command line,
  // which the policy pins; the audit row has its digest (the one the
  // proposal shows) and never its text, nor has the log.
  const nlohmann::json stored = nlohmann::json::parse(*stored_text);
  ASSERT_TRUE(stored.contains("kernel_cmdline")) << stored.dump(2);
  const std::string cmdline = stored.at("kernel_cmdline").at("exact");
  ASSERT_NE(cmdline.find("vmlinuz"), std::string::npos) << cmdline;
  std::string shown;  // "kernel command line sha256:<hex>"
  for (const RuleOutcome& r : report->proposal.rules) {
    if (r.rule == "kernel_cmdline.exact" && r.proposed) shown = r.values.front().items.front();
  }
  ASSERT_EQ(shown.rfind("kernel command line sha256:", 0), 0u) << shown;
  const std::string& detail = audit->back().detail_json;
  EXPECT_NE(detail.find("+ kernel_cmdline.exact " + shown.substr(shown.find("sha256:"))), std::string::npos)
      << detail;
  const std::string escaped = nlohmann::json(cmdline).dump();  // as it would sit in the JSON detail
  EXPECT_EQ(detail.find(escaped.substr(1, escaped.size() - 2)), std::string::npos) << detail;
  EXPECT_EQ(detail.find("vmlinuz"), std::string::npos) << detail;
  EXPECT_NE(policy_log_->last_formatted().size(), 0u);
  for (const auto& line : policy_log_->last_formatted()) EXPECT_EQ(line.find("vmlinuz"), std::string::npos) << line;

  EXPECT_TRUE(Try(a).ok());
  EXPECT_TRUE(Try(b).ok());
  auto refused = Try(odd);
  EXPECT_EQ(ReasonOf(refused), "boot_policy_violation");
  auto failures = store_->RecentFailures(10);
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ(failures->front().hostname, "node-odd");
  EXPECT_FALSE(failures->front().reasons.empty());
  for (const auto& r : failures->front().reasons) {
    EXPECT_TRUE(r.rfind("pcrs:", 0) == 0 || r.rfind("boot_applications:", 0) == 0 ||
                r.rfind("authorities:", 0) == 0 || r.rfind("boot_files:", 0) == 0 || r.rfind("secure_boot:", 0) == 0 ||
                r.rfind("separators:", 0) == 0 || r.rfind("kernel_cmdline:", 0) == 0 || r.rfind("db", 0) == 0)
        << r;
  }
  // Judging the machines logged their verdicts, never the command line.
  EXPECT_EQ(Logged().find("vmlinuz"), std::string::npos) << Logged();
}

TEST_F(ObserveTest, PutRefusesAMalformedPolicyAndModeIsStrict) {
  PolicyService policies(store_.get(), [this] { return now_; });
  const storage::Actor op{"uid:0(root)", ""};
  EXPECT_EQ(ReasonOf(policies.Put("workers", {std::string(R"({"version": 1, "require_secureboot": true})"), false, ""}, op)),
            "policy_malformed");
  EXPECT_EQ(ReasonOf(policies.SetMode("workers", {"audit", ""}, op)), "field_invalid");
  EXPECT_EQ(ReasonOf(policies.SetMode("nosuch", {storage::kPolicyModeObserve, ""}, op)), "pool_unknown");
  auto put = policies.Put("workers", {std::string(R"({"version": 1, "require_separators": true})"), true, ""}, op);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->mode, storage::kPolicyModeObserve);
  bool separators = false;
  for (const auto& c : put->diff.changes) separators |= c.rule == "require_separators" && c.kind == "added";
  EXPECT_TRUE(separators) << put->diff_text;
}

}  // namespace
}  // namespace rackgate::core::testing
