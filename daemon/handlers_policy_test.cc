// The admin API's boot policy routes (daemon/handlers_policy.cc): what they
// refuse, with which status and reason, and that status and pools show an
// observing pool for what it is.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "attest/ek_cert.h"
#include "core/attestation.h"
#include "core/secrets.h"
#include "daemon/handlers_admin.h"
#include "daemon/http.h"
#include "storage/store.h"
#include "storage/testing/test_store.h"

namespace rackgate::daemon {
namespace {

using nlohmann::json;

class PolicyRoutes : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = storage::testing::BackendUnavailable()) GTEST_SKIP() << *why;
    dir_ = (std::filesystem::temp_directory_path() / "rackgate-policy-XXXXXX").string();
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    auto store = storage::testing::OpenTestStore(dir_ + "/policy.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    ASSERT_TRUE(store_->PutPool(storage::Pool{"workers"}, {"test", ""}, 1800000000).ok());
    service_ = std::make_unique<core::AttestationService>(store_.get(), &anchors_, core::AttestationOptions{},
                                                          nullptr, [] { return int64_t{1800000000}; });
    admin_core_ = std::make_unique<core::AdminCore>(store_.get(), service_.get(), nullptr);
    admin_ = std::make_unique<AdminApi>(admin_core_.get(), std::nullopt);
    admin_->Register(&router_);
  }
  void TearDown() override {
    admin_.reset();
    admin_core_.reset();
    service_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  Response Call(const std::string& method, const std::string& path, const std::string& body = "") {
    Request r;
    r.method = method;
    r.path = path;
    r.body = body;
    r.admin = true;
    r.peer_cred = PeerCred{};  // uid 0
    return router_.Dispatch(r);
  }
  static std::string Reason(const Response& r) {
    auto j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"].value("reason", "") : "";
  }

  std::string dir_;
  std::unique_ptr<storage::Store> store_;
  core::TrustAnchors anchors_{attest::EkTrustStore()};
  std::unique_ptr<core::AttestationService> service_;
  std::unique_ptr<core::AdminCore> admin_core_;
  std::unique_ptr<AdminApi> admin_;
  Router router_;
};

TEST_F(PolicyRoutes, ObservingIsShownByStatusPoolsAndShow) {
  Response st = Call("GET", "/v1/admin/status");
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(json::parse(st.body).at("pools_observing_boot_policy"), json::array());

  Response mode = Call("POST", "/v1/admin/pools/workers/policy/mode", R"({"mode": "observe"})");
  ASSERT_EQ(mode.status, 200) << mode.body;
  EXPECT_EQ(json::parse(mode.body).at("mode"), "observe");

  st = Call("GET", "/v1/admin/status");
  EXPECT_EQ(json::parse(st.body).at("pools_observing_boot_policy"), json::array({"workers"}));
  Response pool = Call("GET", "/v1/admin/pools/workers");
  ASSERT_EQ(pool.status, 200) << pool.body;
  EXPECT_EQ(json::parse(pool.body).at("boot_policy_mode"), "observe");
  Response show = Call("GET", "/v1/admin/pools/workers/policy");
  ASSERT_EQ(show.status, 200) << show.body;
  auto j = json::parse(show.body);
  EXPECT_EQ(j.at("mode"), "observe");
  EXPECT_EQ(j.at("policy"), nullptr);
  EXPECT_EQ(j.at("observed"), 0);
}

TEST_F(PolicyRoutes, Refusals) {
  Response r = Call("POST", "/v1/admin/pools/workers/policy/mode", R"({"mode": "audit"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Reason(r), "field_invalid");
  r = Call("POST", "/v1/admin/pools/workers/policy/mode", "{}");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Reason(r), "field_missing");
  r = Call("POST", "/v1/admin/pools/nosuch/policy/mode", R"({"mode": "observe"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Reason(r), "pool_unknown");
  // Nothing observed: accepting would enforce an empty policy.
  r = Call("POST", "/v1/admin/pools/workers/policy/accept", "{}");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(Reason(r), "nothing_observed");
  r = Call("POST", "/v1/admin/pools/workers/policy/accept", R"({"keep_observing": "yes"})");
  EXPECT_EQ(r.status, 400);
  // A policy's text with a duplicate key is refused: as a string, the
  // parser sees what a JSON object would have lost.
  r = Call("PUT", "/v1/admin/pools/workers/policy",
           R"({"policy": "{\"version\": 1, \"authorities\": {\"allowed\": []}, \"authorities\": {}}"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Reason(r), "policy_malformed");
  r = Call("PUT", "/v1/admin/pools/workers/policy", "{}");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Reason(r), "field_missing");
  EXPECT_FALSE(store_->GetPool("workers")->boot_policy_json.has_value());
}

TEST_F(PolicyRoutes, PutEnforcesUnlessKeptObservingAndShowsTheDiff) {
  ASSERT_EQ(Call("POST", "/v1/admin/pools/workers/policy/mode", R"({"mode": "observe"})").status, 200);
  Response r = Call("PUT", "/v1/admin/pools/workers/policy",
                    R"({"policy": "{\"version\": 1, \"require_separators\": true}", "keep_observing": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j.at("mode"), "observe");
  EXPECT_NE(j.at("diff_text").get<std::string>().find("require_separators"), std::string::npos) << r.body;
  r = Call("PUT", "/v1/admin/pools/workers/policy", R"({"policy": {"version": 1, "require_separators": true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body).at("mode"), "enforce");
  Response proposal = Call("GET", "/v1/admin/pools/workers/policy/proposal");
  ASSERT_EQ(proposal.status, 200) << proposal.body;
  auto p = json::parse(proposal.body);
  EXPECT_EQ(p.at("observed"), 0);
  EXPECT_EQ(p.at("proposal_sha256").get<std::string>().size(), 64u);
}

// Issue 27, item 8: a kernel command line never reaches what is printed,
// returned for printing or audited; its SHA-256 does. Only the document
// itself (policy_text, which the CLI writes to --output FILE) holds it.
TEST_F(PolicyRoutes, Issue27KernelCmdlineIsShownAndAuditedByDigest) {
  const std::string cmdline = "root=/dev/vda1 ro rd.luks.key=s3cret-passphrase";
  const std::string digest = "sha256:" + core::Sha256Hex(cmdline);
  const std::string policy =
      json{{"version", 1}, {"kernel_cmdline", {{"exact", cmdline}, {"forbidden", {"init="}}}}}.dump();
  Response r = Call("PUT", "/v1/admin/pools/workers/policy", json{{"policy", policy}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.find("s3cret"), std::string::npos) << r.body;
  auto j = json::parse(r.body);
  const std::string diff = j.at("diff_text");
  EXPECT_NE(diff.find("+ kernel_cmdline.exact " + digest + "\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+ kernel_cmdline.forbidden init=\n"), std::string::npos) << diff;
  EXPECT_EQ(j.at("policy").at("kernel_cmdline").at("exact_sha256"), digest) << r.body;
  // It is stored as written: it is the rule.
  EXPECT_EQ(store_->GetPool("workers")->boot_policy_json, policy);

  storage::AuditFilter all;
  all.limit = 1000;
  auto audit = store_->ListAudit(all);
  ASSERT_TRUE(audit.ok());
  ASSERT_FALSE(audit->empty());
  EXPECT_EQ(audit->back().action, "pool_policy");
  const std::string& detail = audit->back().detail_json;
  EXPECT_NE(detail.find("+ kernel_cmdline.exact " + digest), std::string::npos) << detail;
  for (const auto& row : *audit) {
    EXPECT_EQ(row.detail_json.find("s3cret"), std::string::npos) << row.detail_json;
    EXPECT_EQ(row.why.find("s3cret"), std::string::npos) << row.why;
  }

  Response show = Call("GET", "/v1/admin/pools/workers/policy");
  ASSERT_EQ(show.status, 200) << show.body;
  auto shown = json::parse(show.body);
  EXPECT_EQ(shown.at("policy").at("kernel_cmdline").at("exact_sha256"), digest) << show.body;
  EXPECT_EQ(shown.at("policy").dump().find("s3cret"), std::string::npos) << show.body;
  EXPECT_EQ(shown.at("policy_text"), policy);
  Response pool = Call("GET", "/v1/admin/pools/workers");
  ASSERT_EQ(pool.status, 200) << pool.body;
  EXPECT_EQ(pool.body.find("s3cret"), std::string::npos) << pool.body;
  EXPECT_EQ(json::parse(pool.body).at("boot_policy").at("kernel_cmdline").at("exact_sha256"), digest);
  Response mode = Call("POST", "/v1/admin/pools/workers/policy/mode", R"({"mode": "observe"})");
  ASSERT_EQ(mode.status, 200) << mode.body;
  EXPECT_EQ(mode.body.find("s3cret"), std::string::npos) << mode.body;
  // The proposal's diff removes it: by digest too.
  Response proposal = Call("GET", "/v1/admin/pools/workers/policy/proposal");
  ASSERT_EQ(proposal.status, 200) << proposal.body;
  auto p = json::parse(proposal.body);
  EXPECT_NE(p.at("diff_text").get<std::string>().find("- kernel_cmdline.exact " + digest + "\n"),
            std::string::npos)
      << proposal.body;
  p.erase("policy_text");
  EXPECT_EQ(p.dump().find("s3cret"), std::string::npos) << proposal.body;
  // Cleared: nothing of it either.
  r = Call("PUT", "/v1/admin/pools/workers/policy", R"({"policy": null})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.find("s3cret"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace rackgate::daemon
