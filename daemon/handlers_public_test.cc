// Tests of the public API's handlers (daemon/handlers_public.h): what they
// decode and how refusals reach HTTP. The decisions are core/'s tests.
#include "daemon/handlers_public.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/report_service.h"
#include "core/secrets.h"
#include "daemon/handlers_admin.h"
#include "storage/store.h"

namespace rackgate::daemon {
namespace {

// A challenge that waited longer than busy_queue_delay_ms for a handler
// thread is put off (503 busy, jittered Retry-After) before its body is even
// parsed; one that did not wait is handled (here: refused as malformed).
TEST(QueueDelay, AChallengeThatWaitedTooLongIsPutOff) {
  std::string dir = (std::filesystem::temp_directory_path() / "rackgate-queue-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  auto store = storage::Store::Open(dir + "/queue.db");
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
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  {
    auto store = storage::Store::Open(dir + "/report.db");
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
    AdminApi admin(db, &service, nullptr, std::nullopt);
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

}  // namespace
}  // namespace rackgate::daemon
