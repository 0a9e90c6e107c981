// Tests of WriteDecision (kube/approval.h) on a fake API: a decision reaches
// the object it was made for and no other (issue 40, item 2). The real API
// server's side (the 409 for a swapped object) is in k8s-tests/approver.sh.
#include "kube/approval.h"

#include <gtest/gtest.h>

#include <deque>
#include <vector>

namespace rackgate::kube {
namespace {

Csr Object(const std::string& uid, const std::string& rv) {
  Csr c;
  c.name = "node-csr-abc";
  c.uid = uid;
  c.resource_version = rv;
  return c;
}

// Answers UpdateApproval from a script; GetCsr returns `current`.
class FakeApi : public CsrApprovalWriter {
 public:
  Result<Csr> GetCsr(std::string_view name) override {
    gets.emplace_back(name);
    return current;
  }
  Status UpdateApproval(const Csr& csr, bool approve, std::string_view reason, std::string_view) override {
    writes.push_back({csr.uid, csr.resource_version, approve, std::string(reason)});
    if (answers.empty()) return Status::Ok();
    Status s = answers.front();
    answers.pop_front();
    return s;
  }
  struct Write {
    std::string uid, rv;
    bool approve;
    std::string reason;
  };
  Result<Csr> current = Status::NotFound("kube_not_found", "gone");
  std::deque<Status> answers;
  std::vector<std::string> gets;
  std::vector<Write> writes;
};

Status Conflict() { return Status::InvalidArgument("kube_conflict", "409"); }

ApprovalDecision Approve() { return {true, "RackgateAttestedJoin", "attested"}; }

TEST(WriteDecision, WritesToTheObjectAsRead) {
  FakeApi api;
  int asked = 0;
  Status s = WriteDecision(&api, Object("u1", "5"), Approve(), [&](const Csr&) {
    ++asked;
    return std::optional<ApprovalDecision>(Approve());
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(api.writes.size(), 1u);
  EXPECT_EQ(api.writes[0].uid, "u1");
  EXPECT_EQ(api.writes[0].rv, "5");
  EXPECT_EQ(asked, 0);
  EXPECT_TRUE(api.gets.empty());
}

// Issue 40, item 2: the CSR was deleted and re-created under its name (a
// key nobody attested) while the decision was written: the API server's
// 409, and the new object gets nothing.
TEST(WriteDecision, Issue40NeverWritesToACsrReCreatedUnderTheName) {
  FakeApi api;
  api.answers = {Conflict()};
  api.current = Object("u2-swapped", "9");
  int asked = 0;
  Status s = WriteDecision(&api, Object("u1", "5"), Approve(), [&](const Csr&) {
    ++asked;
    return std::optional<ApprovalDecision>(Approve());
  });
  EXPECT_EQ(s.reason(), "kube_csr_replaced") << s.ToString();
  EXPECT_NE(s.message().find("u2-swapped"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("u1"), std::string::npos) << s.message();
  ASSERT_EQ(api.writes.size(), 1u);  // the first attempt only, on u1
  EXPECT_EQ(api.writes[0].uid, "u1");
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(api.gets, std::vector<std::string>{"node-csr-abc"});
}

TEST(WriteDecision, TheSameObjectChangedIsDecidedAgainAndWrittenOnce) {
  FakeApi api;
  api.answers = {Conflict(), Conflict()};
  api.current = Object("u1", "6");
  std::vector<std::string> asked_for;
  Status s = WriteDecision(&api, Object("u1", "5"), Approve(), [&](const Csr& fresh) {
    asked_for.push_back(fresh.uid + "@" + fresh.resource_version);
    return std::optional<ApprovalDecision>(ApprovalDecision{false, "machine_untrusted", "x"});
  });
  EXPECT_EQ(s.reason(), "kube_conflict");  // the second 409: the next resync tries again
  EXPECT_EQ(asked_for, std::vector<std::string>{"u1@6"});
  ASSERT_EQ(api.writes.size(), 2u);
  EXPECT_EQ(api.writes[1].uid, "u1");
  EXPECT_EQ(api.writes[1].rv, "6");
  EXPECT_FALSE(api.writes[1].approve);
  EXPECT_EQ(api.writes[1].reason, "machine_untrusted");
}

TEST(WriteDecision, NothingToWriteAfterTheConflict) {
  FakeApi api;
  api.answers = {Conflict()};
  api.current = Object("u1", "6");
  Status s = WriteDecision(&api, Object("u1", "5"), Approve(), [](const Csr&) { return std::nullopt; });
  EXPECT_EQ(s.reason(), "kube_not_written");
  EXPECT_EQ(api.writes.size(), 1u);
  // Decided in the API meanwhile: left as it is, not asked.
  FakeApi decided;
  decided.answers = {Conflict()};
  decided.current = Object("u1", "6");
  decided.current->conditions.push_back({"Denied", "True", "other", ""});
  int asked = 0;
  s = WriteDecision(&decided, Object("u1", "5"), Approve(), [&](const Csr&) {
    ++asked;
    return std::optional<ApprovalDecision>(Approve());
  });
  EXPECT_EQ(s.reason(), "kube_already_decided");
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(decided.writes.size(), 1u);
}

TEST(WriteDecision, ACsrGoneAfterTheConflictIsNotFound) {
  FakeApi api;
  api.answers = {Conflict()};
  Status s = WriteDecision(&api, Object("u1", "5"), Approve(), [](const Csr&) {
    return std::optional<ApprovalDecision>(Approve());
  });
  EXPECT_EQ(s.reason(), "kube_not_found");
  EXPECT_EQ(api.writes.size(), 1u);
  // Other failures are returned as they are, without a read.
  FakeApi down;
  down.answers = {Status::IoError("kube_unavailable", "x")};
  EXPECT_EQ(WriteDecision(&down, Object("u1", "5"), Approve(), [](const Csr&) { return std::nullopt; }).reason(),
            "kube_unavailable");
  EXPECT_TRUE(down.gets.empty());
}

}  // namespace
}  // namespace rackgate::kube
