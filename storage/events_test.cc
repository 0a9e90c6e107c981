// Tests for the webhook event queue: the triggers that turn audit rows and
// refused attestations into events (atomically with the change), the fan-out
// to webhooks, the deliveries' state, listing and retention.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using nlohmann::json;
using testing::Op;
using testing::StoreTest;

class EventsTest : public StoreTest {
 protected:
  std::vector<Event> Events(bool pending_only = false) {
    EventFilter f;
    f.pending_only = pending_only;
    f.limit = 10000;
    auto e = store_->ListEvents(f);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? *e : std::vector<Event>{};
  }
  int64_t Pending() {
    auto n = store_->CountPendingDeliveries();
    EXPECT_TRUE(n.ok());
    return n.ok() ? *n : -1;
  }
};

TEST_F(EventsTest, EachReportedAuditActionYieldsExactlyOneEvent) {
  Machine m = Enroll("node-1", "1");
  ASSERT_TRUE(Events().empty()) << "enroll and pool_put are no events";
  const std::pair<const char*, const char*> kMap[] = {
      {"untrusted", "machine_untrusted"},     {"trusted", "machine_trusted"},
      {"certificate_issued", "certificate_issued"}, {"certificate_renewed", "certificate_renewed"},
      {"csr_waiting", "csr_waiting"},         {"anonymous_refusals", "anonymous_refusals"},
      {"kubernetes_csr_approved", "kubernetes_csr_approved"}, {"kubernetes_csr_denied", "kubernetes_csr_denied"},
      {"kubernetes_csr_waiting", "kubernetes_csr_waiting"},
  };
  for (const auto& [action, type] : kMap) {
    const size_t before = Events().size();
    ASSERT_TRUE(store_->AuditMachineEvent(m.id, action, R"({"reason":"r1"})", Op(), 2000).ok());
    auto events = Events();
    ASSERT_EQ(events.size(), before + 1) << action;
    const Event& e = events.front();  // newest first
    EXPECT_EQ(e.type, type);
    EXPECT_EQ(e.hostname, "node-1");
    EXPECT_EQ(e.pool, m.pool);
    EXPECT_EQ(e.at, 2000);
    ASSERT_TRUE(e.machine_id.has_value());
    EXPECT_EQ(*e.machine_id, m.id);
    EXPECT_EQ(json::parse(e.detail_json).at("reason"), "r1");
    EXPECT_EQ(e.actor, Op().name);
  }
  // Revoke writes its own audit row (revoke): one event, and a second revoke
  // is a no-op with no row and no event.
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 3000).ok());
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 3001).ok());
  auto events = Events();
  ASSERT_EQ(events.size(), std::size(kMap) + 1);
  EXPECT_EQ(events.front().type, "machine_revoked");
}

TEST_F(EventsTest, OtherAuditActionsYieldNone) {
  Machine m = Attested("node-1", "1");  // enroll, attest
  for (const char* action : {"csr_approved", "csr_denied", "csr_refused", "config_served", "approve", "reset",
                             "untrusted_", "revoked", "kubelet_key_registered", "kubernetes_csr_", "kubernetes_csr"}) {
    ASSERT_TRUE(store_->AuditMachineEvent(m.id, action, "{}", Op(), 2000).ok()) << action;
  }
  ASSERT_TRUE(store_->Reset("node-1", Op(), 2100, false).ok());
  EXPECT_TRUE(Events().empty());
}

// Approver mode (storage/kube_approvals.cc): each recorded decision on a
// Kubernetes CSR is an event of its audit action's name, carrying the audit
// detail; a kubelet key registered is none.
TEST_F(EventsTest, KubeCsrDecisionsYieldOneEventEachAndKeyRegistrationNone) {
  Machine m = Attested("node-1", "1");
  ASSERT_TRUE(store_->SyncWebhooks({{"https://all.example/hook", {}},
                                    {"https://kube.example/hook", {"kubernetes_csr_denied"}}},
                                   1000)
                  .ok());
  Bytes key = testing::B("kubelet-key");
  key.resize(32, 0x5a);
  AttestedKey k;
  k.machine_id = m.id;
  k.kind = "client";
  k.public_key_sha256 = key;
  const Actor rackgate{"rackgate", "approver mode"};
  ASSERT_TRUE(store_->RegisterAttestedKey(k, std::nullopt, rackgate, 1500).ok());
  ASSERT_TRUE(Events().empty()) << "kubelet_key_registered is no event";

  auto csr = [&](const std::string& uid, std::string_view decision, std::string_view purpose) {
    KubeCsrDecision d;
    d.uid = uid;
    d.name = "csr-" + uid;
    d.machine_id = m.id;
    d.kind = "client";
    d.purpose = std::string(purpose);
    d.public_key_sha256 = key;
    d.requester = "system:bootstrap:abcdef";
    d.decision = std::string(decision);
    d.reason = decision == kCsrWaiting ? "" : (decision == kCsrApproved ? "attested_key" : "denied_for_test");
    d.decided_by = decision == kCsrWaiting ? "" : "rackgate";
    return d;
  };
  const struct {
    const char* uid;
    std::string_view decision;
    std::string_view purpose;
    const char* type;
  } kCases[] = {
      {"u-approved", kCsrApproved, kKubePurposeJoin, "kubernetes_csr_approved"},
      {"u-denied", kCsrDenied, kKubePurposeRotation, "kubernetes_csr_denied"},
      {"u-waiting", kCsrWaiting, kKubePurposeRotation, "kubernetes_csr_waiting"},
  };
  int64_t now = 2000;
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.type);
    const size_t before = Events().size();
    auto r = store_->RecordKubeCsr(csr(c.uid, c.decision, c.purpose), rackgate, ++now);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto events = Events();
    ASSERT_EQ(events.size(), before + 1);
    const Event& e = events.front();  // newest first
    EXPECT_EQ(e.type, c.type);
    EXPECT_EQ(e.at, now);
    ASSERT_TRUE(e.machine_id.has_value());
    EXPECT_EQ(*e.machine_id, m.id);
    EXPECT_EQ(e.hostname, "node-1");
    EXPECT_EQ(e.pool, m.pool);
    EXPECT_EQ(e.actor, "rackgate");
    EXPECT_EQ(e.why, "approver mode");
    json detail = json::parse(e.detail_json);
    EXPECT_EQ(detail.at("name"), std::string("csr-") + c.uid);
    EXPECT_EQ(detail.at("uid"), c.uid);
    EXPECT_EQ(detail.at("kind"), "client");
    EXPECT_EQ(detail.at("purpose"), std::string(c.purpose));
    EXPECT_EQ(detail.at("reason"), r->reason);
    EXPECT_EQ(detail.at("public_key_sha256").get<std::string>().size(), 64u);
    EXPECT_EQ(detail.at("requester"), "system:bootstrap:abcdef");
    const bool to_kube = std::string_view(c.type) == "kubernetes_csr_denied";
    ASSERT_EQ(e.deliveries.size(), to_kube ? 2u : 1u) << "the filter takes kubernetes_csr_denied only";
    EXPECT_EQ(e.deliveries[0].webhook, "https://all.example/hook");
  }
  // An operator's decision on the waiting one is an event too.
  ASSERT_TRUE(store_->DecideKubeCsr("u-waiting", false, "not ours", Op(), 2100).ok());
  auto events = Events();
  ASSERT_EQ(events.size(), std::size(kCases) + 1);
  EXPECT_EQ(events.front().type, "kubernetes_csr_denied");
  EXPECT_EQ(events.front().actor, Op().name);
  EXPECT_EQ(json::parse(events.front().detail_json).at("reason"), "not ours");
  EXPECT_EQ(Pending(), static_cast<int64_t>(std::size(kCases) + 1 + 2));
  // The same key again: still no event.
  ASSERT_TRUE(store_->RegisterAttestedKey(k, std::nullopt, rackgate, 2200).ok());
  EXPECT_EQ(Events().size(), std::size(kCases) + 1);
}

TEST_F(EventsTest, RefusedAttestationYieldsAttestationFailed) {
  Machine m = Attested("node-1", "1");
  EXPECT_TRUE(Events().empty()) << "an ok attestation is no event";
  AttestationRecord r = Record(m, 1500);
  r.verdict = "refused";
  r.reason = "pcr_mismatch";
  r.reasons = {"pcr_mismatch", "secure_boot_off"};
  ASSERT_TRUE(store_->RecordAttestationFailure(r).ok());
  auto events = Events();
  // The trusted machine also became untrusted, in the same transaction
  // (docs/trust.md): that is an event of its own.
  ASSERT_EQ(events.size(), 2u);
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.type < b.type; });
  EXPECT_EQ(events[1].type, "machine_untrusted");
  EXPECT_EQ(events[0].type, "attestation_failed");
  EXPECT_EQ(events[0].hostname, "node-1");
  EXPECT_EQ(events[0].pool, m.pool);
  EXPECT_EQ(events[0].at, 1500);
  json detail = json::parse(events[0].detail_json);
  EXPECT_EQ(detail.at("reason"), "pcr_mismatch");
  EXPECT_EQ(detail.at("reasons"), json({"pcr_mismatch", "secure_boot_off"}));
}

TEST_F(EventsTest, AFailedChangeLeavesNoEvent) {
  // The event is written by the statement that writes the audit row: a
  // change that is refused (and rolled back) leaves no event behind.
  ASSERT_FALSE(store_->AuditMachineEvent(9999, "untrusted", "{}", Op(), 2000).ok());
  ASSERT_FALSE(store_->Revoke("nobody", Op(), 2000).ok());
  EXPECT_TRUE(Events().empty());
}

TEST_F(EventsTest, EventsFanOutToMatchingWebhooks) {
  Machine m = Enroll("node-1", "1");
  auto dropped = store_->SyncWebhooks({{"https://a.example/hook", {}},
                                       {"https://b.example/hook", {"machine_revoked"}}},
                                      1000);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(*dropped, 0);
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "untrusted", "{}", Op(), 2000).ok());
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 2001).ok());
  auto events = Events();
  ASSERT_EQ(events.size(), 2u);
  ASSERT_EQ(events[0].type, "machine_revoked");
  ASSERT_EQ(events[0].deliveries.size(), 2u);
  EXPECT_EQ(events[0].deliveries[0].webhook, "https://a.example/hook");
  EXPECT_EQ(events[0].deliveries[1].webhook, "https://b.example/hook");
  ASSERT_EQ(events[1].deliveries.size(), 1u) << "b takes machine_revoked only";
  EXPECT_EQ(events[1].deliveries[0].webhook, "https://a.example/hook");
  EXPECT_EQ(Pending(), 3);

  // Due: oldest first; nothing before its time.
  auto due = store_->DueDeliveries(1999, 100);
  ASSERT_TRUE(due.ok());
  EXPECT_TRUE(due->empty());
  due = store_->DueDeliveries(3000, 100);
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 3u);
  EXPECT_EQ((*due)[0].event.type, "machine_untrusted");
  EXPECT_EQ((*due)[0].event.hostname, "node-1");
}

TEST_F(EventsTest, DeliveryAttemptsRetryThenDeliver) {
  Machine m = Enroll("node-1", "1");
  ASSERT_TRUE(store_->SyncWebhooks({{"https://a.example/hook", {}}}, 1000).ok());
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "untrusted", "{}", Op(), 2000).ok());
  const int64_t id = Events()[0].id;

  ASSERT_TRUE(store_->RecordDeliveryAttempt(id, "https://a.example/hook", false, 2010, "HTTP 500", 2000).ok());
  auto due = store_->DueDeliveries(2005, 10);
  ASSERT_TRUE(due.ok());
  EXPECT_TRUE(due->empty()) << "retried at 2010, not before";
  due = store_->DueDeliveries(2010, 10);
  ASSERT_TRUE(due.ok());
  ASSERT_EQ(due->size(), 1u);
  EXPECT_EQ((*due)[0].delivery.attempts, 1);
  EXPECT_EQ((*due)[0].delivery.last_error, "HTTP 500");

  ASSERT_TRUE(store_->RecordDeliveryAttempt(id, "https://a.example/hook", true, 0, "", 2011).ok());
  EXPECT_EQ(Pending(), 0);
  EXPECT_TRUE(Events(/*pending_only=*/true).empty());
  auto all = Events();
  ASSERT_EQ(all[0].deliveries.size(), 1u);
  EXPECT_EQ(all[0].deliveries[0].attempts, 2);
  ASSERT_TRUE(all[0].deliveries[0].delivered_at.has_value());
  EXPECT_EQ(*all[0].deliveries[0].delivered_at, 2011);

  // A late failure report for a delivered delivery changes nothing.
  ASSERT_TRUE(store_->RecordDeliveryAttempt(id, "https://a.example/hook", false, 9999, "late", 2012).ok());
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(Events()[0].deliveries[0].attempts, 2);
}

TEST_F(EventsTest, NewWebhooksGetNewEventsOnlyAndDroppedOnesLoseTheirQueue) {
  Machine m = Enroll("node-1", "1");
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "untrusted", "{}", Op(), 2000).ok());
  ASSERT_TRUE(store_->SyncWebhooks({{"https://a.example/hook", {}}}, 2100).ok());
  EXPECT_EQ(Pending(), 0) << "the past is not replayed to a new webhook";
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "trusted", "{}", Op(), 2200).ok());
  EXPECT_EQ(Pending(), 1);
  auto dropped = store_->SyncWebhooks({{"https://c.example/hook", {}}}, 2300);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1);
  EXPECT_EQ(Pending(), 0);
  EXPECT_FALSE(store_->SyncWebhooks({{"https://c.example/x", {}}, {"https://c.example/x", {}}}, 2400).ok());
}

TEST_F(EventsTest, PurgeByAgeAndCount) {
  Machine m = Enroll("node-1", "1");
  ASSERT_TRUE(store_->SyncWebhooks({{"https://a.example/hook", {}}}, 1000).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(store_->AuditMachineEvent(m.id, "untrusted", "{}", Op(), 2000 + i).ok());
  }
  auto n = store_->PurgeEvents(2003, 1000);  // at 2000..2002
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3);
  n = store_->PurgeEvents(0, 4);  // keep the newest 4 of 7
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3);
  auto events = Events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events.back().at, 2006);
  EXPECT_EQ(Pending(), 4) << "deliveries go with their events";
}

// Issue 27: a flood of events must not push out one a webhook still waits
// for (a machine_revoked during a receiver's outage) while delivered ones
// are kept. Over the count, delivered events go first, oldest first.
TEST_F(EventsTest, Issue27PurgeByCountTakesDeliveredEventsFirst) {
  Machine m = Enroll("node-1", "1");
  ASSERT_TRUE(store_->SyncWebhooks({{"https://a.example/hook", {}}}, 1000).ok());
  // Event 1, undelivered: the one that matters.
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "revoke", "{}", Op(), 2000).ok());
  // Events 2..9, delivered.
  for (int i = 1; i < 9; ++i) {
    ASSERT_TRUE(store_->AuditMachineEvent(m.id, "untrusted", "{}", Op(), 2000 + i).ok());
  }
  for (const Event& e : Events()) {
    if (e.type == "machine_untrusted") {
      ASSERT_TRUE(store_->RecordDeliveryAttempt(e.id, "https://a.example/hook", true, 0, "", 3000).ok());
    }
  }
  // Event 10, undelivered and newest.
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "untrusted", "{}", Op(), 2100).ok());
  ASSERT_EQ(Pending(), 2);

  auto n = store_->PurgeEvents(0, 4);  // 10 events, keep 4: six delivered go
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 6);
  auto events = Events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events.back().type, "machine_revoked") << "the oldest, undelivered event is kept";
  EXPECT_EQ(Pending(), 2);

  // Only when delivered events cannot make room do undelivered ones go,
  // oldest first.
  n = store_->PurgeEvents(0, 1);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3);
  events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events.front().at, 2100);
  EXPECT_EQ(Pending(), 1);
}

// Delivery claims (docs/ha.md).
// Two Store objects on one database stand for two appliances (on PostgreSQL,
// two connections pools to one server).

TEST_F(EventsTest, AClaimedDeliveryIsNotClaimedAgainUntilItsLeaseEnds) {
  Machine m = Enroll("node-1", "1");
  ASSERT_TRUE(store_->SyncWebhooks({{"https://a.example/hook", {}}, {"https://b.example/hook", {}}}, 1000).ok());
  ASSERT_TRUE(store_->AuditMachineEvent(m.id, "untrusted", "{}", Op(), 2000).ok());
  std::unique_ptr<Store> other = testing::MustOpen(path_, Options());
  ASSERT_NE(other, nullptr);

  auto mine = store_->ClaimDueDeliveries(2000, 10, 60);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].delivery.next_attempt_at, 2060);
  auto theirs = other->ClaimDueDeliveries(2000, 10, 60);
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->empty()) << "claimed by the first appliance";
  EXPECT_TRUE(other->ClaimDueDeliveries(2059, 10, 60)->empty());
  EXPECT_EQ(Pending(), 2) << "a claim is no delivery";

  // The first appliance delivers one and dies before recording the other:
  // the other is the second appliance's once the lease ends.
  const int64_t id = (*mine)[0].event.id;
  ASSERT_TRUE(store_->RecordDeliveryAttempt(id, (*mine)[0].delivery.webhook, true, 0, "", 2001).ok());
  theirs = other->ClaimDueDeliveries(2060, 10, 60);
  ASSERT_TRUE(theirs.ok());
  ASSERT_EQ(theirs->size(), 1u);
  EXPECT_EQ((*theirs)[0].delivery.webhook, (*mine)[1].delivery.webhook);
  EXPECT_EQ((*theirs)[0].delivery.attempts, 0);

  auto refused = store_->ClaimDueDeliveries(2000, 10, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), "field_invalid");
}

TEST_F(EventsTest, TwoAppliancesClaimingAtOnceNeverShareADelivery) {
  Machine m = Enroll("node-1", "1");
  ASSERT_TRUE(store_->SyncWebhooks({{"https://a.example/hook", {}}}, 1000).ok());
  constexpr int kEvents = 40;
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_TRUE(store_->AuditMachineEvent(m.id, i % 2 ? "untrusted" : "trusted", "{}", Op(), 2000).ok());
  }
  std::unique_ptr<Store> other = testing::MustOpen(path_, Options());
  ASSERT_NE(other, nullptr);
  std::vector<int64_t> got[2];
  std::atomic<int> failures{0};
  auto claim = [&](Store* store, std::vector<int64_t>* out) {
    for (;;) {
      auto c = store->ClaimDueDeliveries(2100, 3, 600);
      if (!c.ok()) {
        if (++failures > 100) return;
        continue;
      }
      if (c->empty()) return;
      for (const DueDelivery& d : *c) out->push_back(d.event.id);
    }
  };
  std::thread a(claim, store_.get(), &got[0]);
  std::thread b(claim, other.get(), &got[1]);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<int64_t> all = got[0];
  all.insert(all.end(), got[1].begin(), got[1].end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kEvents));
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "a delivery was claimed twice";
}

}  // namespace
}  // namespace rackgate::storage
