// Tests for the CSRs that wait for an operator: one request per key, bounded,
// decided once, each step one audit row.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::Op;
using testing::StoreTest;

class CsrRequestTest : public StoreTest {
 protected:
  CsrApprovalRequest Request(const Machine& m, const std::string& key, const std::string& kind = "client") {
    CsrApprovalRequest r;
    r.machine_id = m.id;
    r.kind = kind;
    r.public_key_sha256 = B("spki-" + key);
    r.csr_pem = "-----BEGIN CERTIFICATE REQUEST-----\n" + key + "\n-----END CERTIFICATE REQUEST-----\n";
    r.usages = {"digital signature", "client auth"};
    return r;
  }
  Actor Daemon() { return Actor{"rackgated", "CSR waits for an operator"}; }
  CsrQueueLimits limits_;
};

TEST_F(CsrRequestTest, TheSameKeyFindsTheSameRequestWithOneAuditRow) {
  Machine m = Attested("node-1", "a");
  const size_t before = AuditCount();
  auto first = store_->QueueCsrRequest(Request(m, "k1"), limits_, Daemon(), 2000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_GT(first->id, 0);
  EXPECT_EQ(first->state, "waiting");
  EXPECT_EQ(first->hostname, "node-1");
  EXPECT_EQ(first->created_at, 2000);
  EXPECT_EQ(first->usages, (std::vector<std::string>{"digital signature", "client auth"}));
  EXPECT_TRUE(first->current);
  auto again = store_->QueueCsrRequest(Request(m, "k1"), limits_, Daemon(), 2010);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(again->created_at, 2000);
  auto audit = Audit("node-1");
  ASSERT_EQ(AuditCount(), before + 1);
  EXPECT_EQ(audit.back().action, "csr_waiting");
  EXPECT_NE(audit.back().detail_json.find(R"("kind":"client")"), std::string::npos);
  // Another kind with the same key is another request.
  auto serving = store_->QueueCsrRequest(Request(m, "k1", "serving"), limits_, Daemon(), 2020);
  ASSERT_TRUE(serving.ok());
  EXPECT_NE(serving->id, first->id);
  auto list = store_->ListCsrRequests(false);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, first->id);  // oldest first
}

TEST_F(CsrRequestTest, ApproveAndDenyAreDecidedOnceAndAudited) {
  Machine m = Attested("node-1", "a");
  auto a = store_->QueueCsrRequest(Request(m, "k1"), limits_, Daemon(), 2000);
  auto d = store_->QueueCsrRequest(Request(m, "k2"), limits_, Daemon(), 2000);
  ASSERT_TRUE(a.ok() && d.ok());
  const size_t before = AuditCount();

  auto approved = store_->DecideCsrRequest(a->id, true, "", Op("looked at it"), 2100);
  ASSERT_TRUE(approved.ok()) << approved.status().ToString();
  EXPECT_EQ(approved->state, "approved");
  EXPECT_EQ(approved->decided_by, "uid:0(root)");
  EXPECT_EQ(approved->decided_at, 2100);
  auto denied = store_->DecideCsrRequest(d->id, false, "not in the rack plan", Op(), 2200);
  ASSERT_TRUE(denied.ok()) << denied.status().ToString();
  EXPECT_EQ(denied->state, "denied");
  EXPECT_EQ(denied->deny_reason, "not in the rack plan");

  auto audit = Audit("node-1");
  ASSERT_EQ(AuditCount(), before + 2);
  EXPECT_EQ(audit[audit.size() - 2].action, "csr_approved");
  EXPECT_EQ(audit.back().action, "csr_denied");
  EXPECT_NE(audit.back().detail_json.find("not in the rack plan"), std::string::npos);

  // Final: neither decision can be taken back, and asking again with the
  // same key finds the decision.
  ExpectFailure(store_->DecideCsrRequest(d->id, true, "", Op(), 2300).status(), Status::Code::kInvalidArgument,
                "state_conflict");
  ExpectFailure(store_->DecideCsrRequest(a->id, false, "x", Op(), 2300).status(), Status::Code::kInvalidArgument,
                "state_conflict");
  EXPECT_EQ(store_->QueueCsrRequest(Request(m, "k2"), limits_, Daemon(), 2400)->state, "denied");
  EXPECT_EQ(store_->QueueCsrRequest(Request(m, "k1"), limits_, Daemon(), 2400)->state, "approved");
  EXPECT_EQ(AuditCount(), before + 2);
  EXPECT_TRUE(store_->ListCsrRequests(false)->empty());
  EXPECT_EQ(store_->ListCsrRequests(true)->size(), 2u);

  ExpectFailure(store_->DecideCsrRequest(999, true, "", Op(), 2300).status(), Status::Code::kNotFound,
                "csr_request_unknown");
  auto w = store_->QueueCsrRequest(Request(m, "k3"), limits_, Daemon(), 2000);
  ExpectFailure(store_->DecideCsrRequest(w->id, false, "", Op(), 2300).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  ExpectFailure(store_->DecideCsrRequest(w->id, false, "bad\nreason", Op(), 2300).status(),
                Status::Code::kInvalidArgument, "field_invalid");
}

TEST_F(CsrRequestTest, WaitingRequestsAreBoundedPerMachineAndOverall) {
  limits_.max_waiting_per_machine = 2;
  limits_.max_waiting = 3;
  Machine m1 = Attested("node-1", "a");
  Machine m2 = Attested("node-2", "b");
  ASSERT_TRUE(store_->QueueCsrRequest(Request(m1, "k1"), limits_, Daemon(), 2000).ok());
  ASSERT_TRUE(store_->QueueCsrRequest(Request(m1, "k2"), limits_, Daemon(), 2000).ok());
  const size_t before = AuditCount();
  ExpectFailure(store_->QueueCsrRequest(Request(m1, "k3"), limits_, Daemon(), 2000).status(),
                Status::Code::kUnsupported, "csr_flood_machine");
  // A key already queued is still found at the bound.
  EXPECT_TRUE(store_->QueueCsrRequest(Request(m1, "k2"), limits_, Daemon(), 2000).ok());
  ASSERT_TRUE(store_->QueueCsrRequest(Request(m2, "k1"), limits_, Daemon(), 2000).ok());
  ExpectFailure(store_->QueueCsrRequest(Request(m2, "k2"), limits_, Daemon(), 2000).status(),
                Status::Code::kUnsupported, "csr_flood");
  EXPECT_EQ(AuditCount(), before + 1);
  // A decision frees a place.
  auto list = store_->ListCsrRequests(false);
  ASSERT_EQ(list->size(), 3u);
  ASSERT_TRUE(store_->DecideCsrRequest((*list)[0].id, false, "no", Op(), 2100).ok());
  EXPECT_TRUE(store_->QueueCsrRequest(Request(m2, "k2"), limits_, Daemon(), 2200).ok());
}

TEST_F(CsrRequestTest, AResetStartsOver) {
  Machine m = Attested("node-1", "a");
  auto first = store_->QueueCsrRequest(Request(m, "k1"), limits_, Daemon(), 2000);
  ASSERT_TRUE(store_->DecideCsrRequest(first->id, true, "", Op(), 2100).ok());
  ASSERT_TRUE(store_->RecordCertificate(Cert(m, "01"), Op(), 2200).ok());
  ASSERT_TRUE(store_->Reset("node-1", Op(), 2300, false).ok());
  // The old approval does not carry over: the same key waits again.
  auto again = store_->QueueCsrRequest(Request(m, "k1"), limits_, Daemon(), 2400);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->id, first->id);
  EXPECT_EQ(again->state, "waiting");
  auto all = store_->ListCsrRequests(true);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_FALSE((*all)[1].current);
}

TEST_F(CsrRequestTest, RefusesBadInput) {
  Machine m = Attested("node-1", "a");
  auto r = Request(m, "k1", "peer");
  ExpectFailure(store_->QueueCsrRequest(r, limits_, Daemon(), 2000).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  r = Request(m, "k1");
  r.csr_pem.clear();
  ExpectFailure(store_->QueueCsrRequest(r, limits_, Daemon(), 2000).status(), Status::Code::kInvalidArgument,
                "field_invalid");
  r = Request(m, "k1");
  r.machine_id = 9999;
  ExpectFailure(store_->QueueCsrRequest(r, limits_, Daemon(), 2000).status(), Status::Code::kNotFound,
                "machine_unknown");
}

}  // namespace
}  // namespace rackgate::storage
