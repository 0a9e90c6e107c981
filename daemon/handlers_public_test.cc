// Tests of the public API's handlers (daemon/handlers_public.h): what they
// decode and how refusals reach HTTP. The decisions are core/'s tests.
#include "daemon/handlers_public.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/ignition_service.h"
#include "core/report_service.h"
#include "core/secrets.h"
#include "daemon/handlers_admin.h"
#include "storage/store.h"
#include "storage/testing/test_store.h"

namespace rackgate::daemon {
namespace {

// A challenge that waited longer than busy_queue_delay_ms for a handler
// thread is put off (503 busy, jittered Retry-After) before its body is even
// parsed; one that did not wait is handled (here: refused as malformed).
TEST(QueueDelay, AChallengeThatWaitedTooLongIsPutOff) {
  std::string dir = (std::filesystem::temp_directory_path() / "rackgate-queue-XXXXXX").string();
  if (auto why = storage::testing::BackendUnavailable()) GTEST_SKIP() << *why;
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto store = storage::testing::OpenTestStore(dir + "/queue.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  core::TrustAnchors anchors{attest::EkTrustStore()};
  for (const int limit_ms : {50, 0}) {
    core::AttestationOptions o;
    o.busy_queue_delay_ms = limit_ms;
    core::AttestationService service(store->get(), &anchors, o, nullptr);
    RetryPolicy retry;
    retry.busy_retry_after_seconds = 2;
    PublicHandlers handlers(&service, nullptr, nullptr, retry);
    Request r;
    r.method = "POST";
    r.path = "/v1/attest/challenge";
    r.body = "not json";
    r.peer_address = "10.0.0.1:4711";
    r.queued = std::chrono::milliseconds(60);
    Response late = handlers.Challenge(r);
    r.queued = std::chrono::milliseconds(10);
    Response prompt = handlers.Challenge(r);
    EXPECT_EQ(prompt.status, 400) << limit_ms;
    if (limit_ms == 0) {
      EXPECT_EQ(late.status, 400) << "off: the delay is not looked at";
      continue;
    }
    ASSERT_EQ(late.status, 503);
    EXPECT_EQ(nlohmann::json::parse(late.body).at("error").at("reason"), "busy");
    int retry_after = 0;
    for (const auto& [name, value] : late.headers) {
      if (name == "Retry-After") retry_after = std::stoi(value);
    }
    EXPECT_GE(retry_after, 2);
    EXPECT_LE(retry_after, 4);
  }
  store->reset();
  std::filesystem::remove_all(dir);
}

// Provisioning reports and trust end to end through the handlers
// (docs/trust.md): POST /v1/machine/report with the attestation token, then
// the admin API's machine JSON carries trust and the last report.
TEST(Reports, RecordedAndShownByTheAdminApi) {
  std::string dir = (std::filesystem::temp_directory_path() / "rackgate-report-XXXXXX").string();
  if (auto why = storage::testing::BackendUnavailable()) GTEST_SKIP() << *why;
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  {
    auto store = storage::testing::OpenTestStore(dir + "/report.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    storage::Store* db = store->get();
    const int64_t now = 1800000000;
    ASSERT_TRUE(db->PutPool(storage::Pool{"workers"}, {"test", ""}, now).ok());
    storage::Enrollment e;
    e.hostname = "node-1";
    e.pool = "workers";
    e.ek_public = {1, 2, 3};
    e.ek_hash = {4, 5, 6};
    auto m = db->Enroll(e, {"test", ""}, false, now);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    storage::AttestationRecord rec;
    rec.machine_id = m->id;
    rec.session_id = "s";
    rec.at = now;
    storage::Token token{core::TokenHash("the-token"), m->id, "s", now, now + 900};
    ASSERT_TRUE(db->RecordAttestationSuccess(rec, token, std::nullopt).ok());

    core::TrustAnchors anchors{attest::EkTrustStore()};
    core::AttestationService service(db, &anchors, {}, nullptr, [now] { return now + 5; });
    core::ReportService reports(db, &service);
    Router router;
    PublicHandlers handlers(&service, nullptr, nullptr, RetryPolicy{});
    handlers.SetReports(&reports);
    handlers.Register(&router);
    core::AdminCore admin_core(db, &service, nullptr);
    AdminApi admin(&admin_core, std::nullopt);
    admin.Register(&router);

    Request post;
    post.method = "POST";
    post.path = "/v1/machine/report";
    post.peer_address = "10.0.0.1:4711";
    post.body = R"({"outcome":"failed","step":"config","reason":"config_unavailable",)"
                R"("message":"no config yet","exit_status":4,"done":["attested"]})";
    EXPECT_EQ(router.Dispatch(post).status, 401);  // no token
    post.headers["Authorization"] = "Bearer the-token";
    Request bad = post;
    bad.body = R"({"outcome":"maybe","step":"config"})";
    EXPECT_EQ(router.Dispatch(bad).status, 400);
    Response ok = router.Dispatch(post);
    ASSERT_EQ(ok.status, 200) << ok.body;
    EXPECT_EQ(nlohmann::json::parse(ok.body), nlohmann::json({{"recorded", true}}));

    Request show;
    show.method = "GET";
    show.path = "/v1/admin/machines/node-1";
    show.admin = true;
    show.peer_cred = PeerCred{};  // uid 0
    Response shown = router.Dispatch(show);
    ASSERT_EQ(shown.status, 200) << shown.body;
    auto j = nlohmann::json::parse(shown.body);
    EXPECT_EQ(j.at("trust"), "trusted");
    EXPECT_EQ(j.at("trust_reason"), "");
    EXPECT_EQ(j.at("trust_changed_at"), now);
    EXPECT_EQ(j.at("last_attested_at"), now);
    EXPECT_EQ(j.at("last_report").at("outcome"), "failed");
    EXPECT_EQ(j.at("last_report").at("step"), "config");
    EXPECT_EQ(j.at("last_report").at("message"), "no config yet");
    EXPECT_EQ(j.at("last_report").at("exit_status"), 4);
    EXPECT_EQ(j.at("last_report").at("at"), now + 5);
    EXPECT_EQ(j.at("last_report").at("done"), nlohmann::json::array({"attested"}));

    // A failed attestation: untrusted in list and status.
    rec.verdict = "refused";
    rec.reason = "boot_policy_violation";
    rec.at = now + 10;
    ASSERT_TRUE(db->RecordAttestationFailure(rec).ok());
    Request list = show;
    list.path = "/v1/admin/machines";
    Response listed = router.Dispatch(list);
    ASSERT_EQ(listed.status, 200) << listed.body;
    auto machines = nlohmann::json::parse(listed.body).at("machines");
    ASSERT_EQ(machines.size(), 1u);
    EXPECT_EQ(machines[0].at("trust"), "untrusted");
    EXPECT_EQ(machines[0].at("trust_reason"), "attestation_failed:boot_policy_violation");
    EXPECT_EQ(machines[0].at("last_report").at("outcome"), "failed");
    Request status = show;
    status.path = "/v1/admin/status";
    Response st = router.Dispatch(status);
    ASSERT_EQ(st.status, 200) << st.body;
    EXPECT_EQ(nlohmann::json::parse(st.body).at("machines_untrusted"), 1);
  }
  std::filesystem::remove_all(dir);
}

TEST(DecodeCsrSubmission, RequiredOptionalAndMalformedFields) {
  EXPECT_EQ(DecodeCsrSubmission("[1]").status().reason(), "bad_json");
  EXPECT_EQ(DecodeCsrSubmission("not json").status().reason(), "bad_json");
  EXPECT_EQ(DecodeCsrSubmission("{\"csr\": \"x\"}").status().reason(), "field_missing");
  EXPECT_EQ(DecodeCsrSubmission("{\"signer\": 1, \"csr\": \"x\"}").status().reason(), "field_missing");
  EXPECT_EQ(DecodeCsrSubmission("{\"signer\": \"s\", \"csr\": \"x\", \"usages\": \"a\"}").status().reason(),
            "field_invalid");
  EXPECT_EQ(DecodeCsrSubmission("{\"signer\": \"s\", \"csr\": \"x\", \"usages\": [1]}").status().reason(),
            "field_invalid");
  auto plain = DecodeCsrSubmission("{\"signer\": \"s\", \"csr\": \"pem\"}");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->signer, "s");
  EXPECT_EQ(plain->csr_pem, "pem");
  EXPECT_FALSE(plain->usages);
  EXPECT_FALSE(plain->tpm_key);
  auto full = DecodeCsrSubmission(
      "{\"signer\": \"s\", \"csr\": \"pem\", \"usages\": [\"client auth\"],"
      " \"tpm_key\": {\"public\": \"AAE=\", \"certify_info\": \"AAI=\", \"certify_signature\": \"AAM=\"},"
      " \"renewal\": {\"certificate\": \"CERT\", \"signature\": \"AAQ=\"}}");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(*full->usages, std::vector<std::string>{"client auth"});
  ASSERT_TRUE(full->tpm_key);
  EXPECT_EQ(*full->tpm_key->public_area, (attest::Bytes{0x00, 0x01}));
  EXPECT_EQ(*full->tpm_key->certify_info, (attest::Bytes{0x00, 0x02}));
  EXPECT_EQ(*full->tpm_key->certify_signature, (attest::Bytes{0x00, 0x03}));
  // The renewal proof reaches the core (docs/csr.md, "Renewal").
  ASSERT_TRUE(full->renewal);
  EXPECT_EQ(full->renewal->certificate_pem, "CERT");
  EXPECT_EQ(full->renewal->signature, (attest::Bytes{0x00, 0x04}));
  EXPECT_FALSE(plain->renewal);
  // A proof that is not base64 or misses a member is field_invalid (the
  // wire module's decoding, shared with the agent).
  EXPECT_EQ(DecodeCsrSubmission("{\"signer\": \"s\", \"csr\": \"pem\", \"tpm_key\": {\"public\": \"AAE=\", "
                                "\"certify_info\": \"!\"}}")
                .status()
                .reason(),
            "field_invalid");
  EXPECT_EQ(DecodeCsrSubmission("{\"signer\": \"s\", \"csr\": \"pem\", \"renewal\": {\"certificate\": \"C\"}}")
                .status()
                .reason(),
            "field_invalid");
}

// The provisioning token's two forms (docs/protocol.md): the header wins, the
// URL parameter serves an Ignition of spec 3.0, an empty one is none.
TEST(ProvisioningToken, HeaderFirstThenTheUrlParameter) {
  Request r;
  EXPECT_FALSE(ProvisioningToken(r).has_value());
  r.query["token"] = "";
  EXPECT_FALSE(ProvisioningToken(r).has_value());
  r.query["token"] = "from-url";
  EXPECT_EQ(ProvisioningToken(r), "from-url");
  r.headers["Authorization"] = "Bearer from-header";
  EXPECT_EQ(ProvisioningToken(r), "from-header");
}

// Every row of every table, as text: what "the database is unchanged" means.
std::string DumpDatabase(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return "cannot open " + path;
  }
  std::vector<std::string> tables;
  std::string out;
  auto rows = [&](const std::string& sql, const std::function<void(sqlite3_stmt*)>& each) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      out += "cannot prepare " + sql + "\n";
      return;
    }
    while (sqlite3_step(st) == SQLITE_ROW) each(st);
    sqlite3_finalize(st);
  };
  rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", [&](sqlite3_stmt* st) {
    tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  });
  for (const auto& t : tables) {
    out += "== " + t + "\n";
    rows("SELECT * FROM \"" + t + "\"", [&](sqlite3_stmt* st) {
      for (int i = 0; i < sqlite3_column_count(st); ++i) {
        const unsigned char* v = sqlite3_column_text(st, i);
        out += v != nullptr ? std::string(reinterpret_cast<const char*>(v), sqlite3_column_bytes(st, i)) : "NULL";
        out += "|";
      }
      out += "\n";
    });
  }
  sqlite3_close(db);
  return out;
}

// Issue 15: `pool put` with a good public and a bad attested template stored
// the pool, its public template and a provisioning token nobody was shown.
// Now the refusal names the template, and no table changes; the good put
// then stores all of it and shows the token it made.
TEST(PoolPut, Issue15RefusedPutLeavesTheDatabaseUnchanged) {
  // The check reads the SQLite file table by table; on PostgreSQL the same
  // one-transaction store (storage/pools.cc) runs in the storage tests.
  if (storage::testing::TestingPostgres()) GTEST_SKIP() << "SQLite only: it dumps the SQLite file";
  std::string dir = (std::filesystem::temp_directory_path() / "rackgate-poolput-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/pools.db";
  {
    auto store = storage::Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    storage::Store* db = store->get();
    const int64_t now = 1800000000;
    core::TrustAnchors anchors{attest::EkTrustStore()};
    core::AttestationService service(db, &anchors, {}, nullptr, [now] { return now; });
    core::IgnitionOptions o;
    o.appliance_url = "https://appliance.example:22623";
    o.appliance_ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    core::IgnitionService ignition(db, &service, o, nullptr);
    Router router;
    core::AdminCore admin_core(db, &service, &ignition);
    AdminApi admin(&admin_core, std::nullopt);
    admin.Register(&router);
    const nlohmann::json kPublic = nlohmann::json::parse(
        R"({"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/rackgate/url","mode":420,)"
        R"("contents":{"source":"data:,{{appliance.url}}"}}]}})");
    // docs/ignition.md's example once had "data:;base64,..." here: not
    // base64, which ignition-validate refuses too.
    nlohmann::json attested = nlohmann::json::parse(
        R"({"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/kubernetes/kubeconfig","mode":384,)"
        R"("contents":{"source":"data:;base64,..."}}]}})");
    Request put;
    put.method = "PUT";
    put.path = "/v1/admin/pools/workers";
    put.admin = true;
    put.peer_cred = PeerCred{};  // uid 0
    put.body = nlohmann::json{{"templates", {{"public", kPublic}, {"attested", attested}}}}.dump();

    const std::string before = DumpDatabase(path);
    ASSERT_NE(before.find("== pools"), std::string::npos) << before;
    Response refused = router.Dispatch(put);
    ASSERT_EQ(refused.status, 400) << refused.body;
    const auto error = nlohmann::json::parse(refused.body).at("error");
    EXPECT_EQ(error.at("reason"), "template_invalid");
    EXPECT_EQ(error.at("message").get<std::string>().rfind("attested template: ", 0), 0u) << error;
    EXPECT_EQ(DumpDatabase(path), before);
    // Settings that do not parse: refused the same way.
    Request bad_settings = put;
    bad_settings.body = nlohmann::json{{"settings", {{"no_such_setting", 1}}}}.dump();
    EXPECT_EQ(router.Dispatch(bad_settings).status, 400);
    EXPECT_EQ(DumpDatabase(path), before);

    attested["storage"]["files"][0]["contents"]["source"] = "data:;base64,YXBpVmVyc2lvbjogdjEK";
    put.body = nlohmann::json{{"templates", {{"public", kPublic}, {"attested", attested}}}}.dump();
    Response created = router.Dispatch(put);
    ASSERT_EQ(created.status, 201) << created.body;
    const auto pool = nlohmann::json::parse(created.body);
    ASSERT_TRUE(pool.contains("provisioning_token")) << pool;
    EXPECT_TRUE(pool.at("templates").contains("public"));
    EXPECT_TRUE(pool.at("templates").contains("attested"));
    // The token shown is the one stored.
    auto tokens = db->ValidPoolTokens("workers", now);
    ASSERT_TRUE(tokens.ok());
    ASSERT_EQ(tokens->size(), 1u);
    EXPECT_EQ((*tokens)[0].hash, core::TokenHash(pool.at("provisioning_token").get<std::string>()));
    // Put again: no new token, none shown.
    Response again = router.Dispatch(put);
    ASSERT_EQ(again.status, 200) << again.body;
    EXPECT_FALSE(nlohmann::json::parse(again.body).contains("provisioning_token"));
    EXPECT_EQ(db->ValidPoolTokens("workers", now)->size(), 1u);
    // Served with the token in the URL, and with the header.
    auto via_url = ignition.PublicConfig({"workers", pool.at("provisioning_token").get<std::string>(), {}, "x"});
    EXPECT_TRUE(via_url.ok()) << via_url.status().ToString();

    // token rotate needs an explicit grace.
    Request rotate;
    rotate.method = "POST";
    rotate.path = "/v1/admin/pools/workers/token/rotate";
    rotate.admin = true;
    rotate.peer_cred = PeerCred{};
    rotate.body = "{}";
    Response no_grace = router.Dispatch(rotate);
    EXPECT_EQ(no_grace.status, 400);
    EXPECT_EQ(nlohmann::json::parse(no_grace.body).at("error").at("reason"), "field_missing");
    rotate.body = R"({"grace_seconds":0})";
    EXPECT_EQ(router.Dispatch(rotate).status, 200);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rackgate::daemon

namespace rackgate::daemon {
namespace {

// The agent bundle's routes (docs/nodes.md): no token, the bytes with their
// SHA-256 as ETag, the digest as sha256sum prints it; 404 when this
// appliance serves none, 503 with Retry-After when it is not installed.
TEST(AgentBundle, ServedWithoutATokenWithItsDigest) {
  std::string dir = (std::filesystem::temp_directory_path() / "rackgate-bundle-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/agent-initramfs.cpio.zst";
  const std::string bytes("070701\0\x01\xff fragment", 17);
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  const std::string digest = core::Sha256Hex(bytes);
  RetryPolicy retry;
  retry.retry_after_seconds = 7;
  auto serve = [&](core::AgentBundle* bundle, const std::string& method, const std::string& target) {
    PublicHandlers handlers(nullptr, nullptr, nullptr, retry);
    handlers.SetAgentBundle(bundle);
    Router router;
    handlers.Register(&router);
    Request r;
    r.method = method;
    r.path = target;
    r.peer_address = "10.0.0.9:5000";
    return router.Dispatch(r);
  };
  auto header = [](const Response& r, const std::string& name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return std::string();
  };
  auto reason = [](const Response& r) { return nlohmann::json::parse(r.body).at("error").at("reason"); };

  core::AgentBundle installed(path);
  Response got = serve(&installed, "GET", "/v1/agent/initramfs");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.Body(), bytes);
  EXPECT_EQ(got.content_type, "application/octet-stream");
  // issue 40: the answer holds the cache's own buffer, never a copy of it.
  auto cached = installed.Get();
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(got.shared_body.get(), cached->bytes.get());
  EXPECT_EQ(serve(&installed, "GET", "/v1/agent/initramfs").shared_body.get(), cached->bytes.get());
  EXPECT_EQ(header(got, "ETag"), "\"" + digest + "\"");
  Response sum = serve(&installed, "GET", "/v1/agent/initramfs.sha256");
  EXPECT_EQ(sum.status, 200);
  EXPECT_EQ(sum.body, digest + "  agent-initramfs.cpio.zst\n");
  EXPECT_EQ(serve(&installed, "POST", "/v1/agent/initramfs").status, 405);

  core::AgentBundle none("");
  Response off = serve(&none, "GET", "/v1/agent/initramfs");
  EXPECT_EQ(off.status, 404);
  EXPECT_EQ(reason(off), "agent_bundle_not_configured");
  EXPECT_EQ(header(off, "Retry-After"), "");

  core::AgentBundle missing(dir + "/not-installed.cpio.zst");
  for (const char* target : {"/v1/agent/initramfs", "/v1/agent/initramfs.sha256"}) {
    Response wait = serve(&missing, "GET", target);
    EXPECT_EQ(wait.status, 503) << target;
    EXPECT_EQ(reason(wait), "agent_bundle_unavailable") << target;
    EXPECT_EQ(header(wait, "Retry-After"), "7") << target;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rackgate::daemon
