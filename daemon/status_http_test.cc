// Tests of the one Status->HTTP table (daemon/status_http.h).
#include "daemon/status_http.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "wire/reasons.h"

namespace rackgate::daemon {
namespace {

std::optional<std::string> Header(const Response& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return std::nullopt;
}

Status StatusOf(Status::Code code, std::string_view reason) {
  const std::string r(reason);
  switch (code) {
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(r, "x");
    case Status::Code::kNotFound: return Status::NotFound(r, "x");
    case Status::Code::kCorruption: return Status::Corruption(r, "x");
    case Status::Code::kVerificationFailed: return Status::VerificationFailed(r, "x");
    case Status::Code::kUnsupported: return Status::Unsupported(r, "x");
    case Status::Code::kTpmError: return Status::TpmError(r, "x");
    case Status::Code::kIoError: return Status::IoError(r, "x");
    case Status::Code::kOk: break;
  }
  ADD_FAILURE() << reason << ": a row with code kOk";
  return Status::IoError(r, "x");
}

// Issue 43: every row of the registry (wire/reasons.def) is answered as it
// declares, on both APIs, raised with its code: the status of its column and
// Retry-After when declared (the admin API: on a 503 only, 5 s). A local
// row (HTTP 0) is in neither table.
TEST(StatusHttp, EveryRegistryRowAnswersAsDeclared) {
  using wire::ReasonRetry;
  RetryPolicy retry;
  retry.retry_after_seconds = 30;
  retry.busy_retry_after_seconds = 2;
  for (const wire::ReasonInfo& row : wire::Reasons()) {
    const Status s = StatusOf(row.code, row.name);
    if (row.audience == wire::ReasonAudience::kLocal) {
      EXPECT_EQ(row.machine_status, 0) << row.name;
      EXPECT_EQ(row.admin_status, 0) << row.name;
      EXPECT_FALSE(RuleForReason(row.name).has_value()) << row.name;
      continue;
    }
    if (row.machine_status == 0) continue;  // a Kubernetes denial only
    const Response machine = ErrorResponse(s, retry);
    EXPECT_EQ(machine.status, row.machine_status) << row.name;
    EXPECT_NE(machine.body.find(std::string(row.name)), std::string::npos) << row.name;
    const auto machine_after = Header(machine, "Retry-After");
    switch (row.retry) {
      case ReasonRetry::kNone: EXPECT_FALSE(machine_after) << row.name; break;
      case ReasonRetry::kStandard:
      case ReasonRetry::kMachineOnly: EXPECT_EQ(machine_after, "30") << row.name; break;
      case ReasonRetry::kJittered: {
        const int seconds = std::stoi(machine_after.value_or("-1"));
        EXPECT_GE(seconds, 2) << row.name;
        EXPECT_LE(seconds, 4) << row.name;
        break;
      }
    }
    const Response admin = AdminErrorResponse(s);
    EXPECT_EQ(admin.status, row.admin_status) << row.name;
    const bool admin_waits = row.admin_status == 503 &&
                             (row.retry == ReasonRetry::kStandard || row.retry == ReasonRetry::kJittered);
    EXPECT_EQ(Header(admin, "Retry-After"), admin_waits ? std::optional<std::string>("5") : std::nullopt)
        << row.name;
  }
}

TEST(StatusHttp, TableNamesEachReasonOnce) {
  std::set<std::string_view> seen;
  for (const wire::ReasonInfo& row : wire::Reasons()) {
    EXPECT_TRUE(seen.insert(row.name).second) << row.name;
    const auto rule = RuleForReason(row.name);
    if (row.machine_status == 0) continue;  // local: never crosses the wire
    ASSERT_TRUE(rule.has_value()) << row.name;
    EXPECT_GE(rule->status, 400) << row.name;
    EXPECT_LT(rule->status, 600) << row.name;
  }
}

TEST(StatusHttp, WaitableIsRetryAfterAndFinalIsNot) {
  for (const wire::ReasonInfo& row : wire::Reasons()) {
    const auto rule = RuleForReason(row.name);
    if (!rule) continue;  // local: never crosses the wire
    // Ignition gives up on a 4xx: only 429 (a flood limit) and 5xx may ask
    // the machine to come back.
    if (rule->retry != HttpRule::Retry::kNone) {
      EXPECT_TRUE(rule->status == 503 || rule->status == 429) << row.name;
    } else if (row.name != "internal") {  // a bug: 500, "retry later" (docs/protocol.md)
      EXPECT_LT(rule->status, 500) << row.name;
    }
  }
}

// Issue 13: a CSR whose self-signature fails is a refusal (docs/csr.md: 403),
// not a malformed request (it was answered 400).
TEST(StatusHttp, Issue13CsrSignatureInvalidIs403) {
  const Response r =
      ErrorResponse(Status::VerificationFailed("csr_signature_invalid", "request signature does not verify"), {});
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("csr_signature_invalid"), std::string::npos);
  EXPECT_FALSE(Header(r, "Retry-After"));
  EXPECT_EQ(RuleFor(Status::InvalidArgument("csr_malformed", "x")).status, 400);
}

// Renewal and one nonce, one use (docs/csr.md): final refusals, 403 without
// Retry-After, whatever Status code carries them.
TEST(StatusHttp, RenewalAndCertifyNonceRefusalsAre403) {
  for (const char* reason : {"renewal_not_due", "renewal_proof_invalid", "certify_nonce_used"}) {
    ASSERT_TRUE(RuleForReason(reason)) << reason;
    const Response r = ErrorResponse(Status::InvalidArgument(reason, "x"), {});
    EXPECT_EQ(r.status, 403) << reason;
    EXPECT_NE(r.body.find(reason), std::string::npos) << reason;
    EXPECT_FALSE(Header(r, "Retry-After")) << reason;
  }
}

// Trust (docs/trust.md): an untrusted machine is refused, finally (no
// Retry-After: waiting does not help, attesting well again does).
TEST(StatusHttp, MachineUntrustedIs403WithoutRetryAfter) {
  const Response r = ErrorResponse(
      Status::VerificationFailed("machine_untrusted", "the machine's latest attestation failed"), {});
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("machine_untrusted"), std::string::npos);
  EXPECT_FALSE(Header(r, "Retry-After"));
  // The table, not the code: even as an InvalidArgument it stays 403.
  EXPECT_EQ(RuleFor(Status::InvalidArgument("machine_untrusted", "x")).status, 403);
}

// Issue 27: a request with ambiguous framing is the client's fault, final:
// the server answers it 400 itself, and the table says the same.
TEST(StatusHttp, Issue27BadFramingIs400WithoutRetryAfter) {
  const auto rule = RuleForReason("bad_framing");
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(rule->status, 400);
  EXPECT_EQ(rule->retry, HttpRule::Retry::kNone);
}

TEST(StatusHttp, ReasonWinsOverCode) {
  // token_missing is an InvalidArgument, but 401; pool_unknown is 404;
  // machine_pending is NotFound, but 503 and waitable.
  EXPECT_EQ(RuleFor(Status::InvalidArgument("token_missing", "x")).status, 401);
  EXPECT_EQ(RuleFor(Status::NotFound("token_unknown", "x")).status, 401);
  EXPECT_EQ(RuleFor(Status::VerificationFailed("token_revoked", "x")).status, 403);
  EXPECT_EQ(RuleFor(Status::NotFound("machine_pending", "x")).status, 503);
  EXPECT_EQ(RuleFor(Status::InvalidArgument("eventlog_truncated", "x")).status, 403);
  EXPECT_EQ(RuleFor(Status::InvalidArgument("pcr_values_incomplete", "x")).status, 400);
  EXPECT_EQ(RuleFor(Status::Unsupported("ignition_config_too_new", "x")).status, 406);
  EXPECT_EQ(RuleFor(Status::Unsupported("csr_flood_machine", "x")).status, 429);
}

TEST(StatusHttp, UnknownReasonsMapByCode) {
  EXPECT_EQ(RuleFor(Status::InvalidArgument("some_new_reason", "x")).status, 400);
  EXPECT_EQ(RuleFor(Status::NotFound("some_new_reason", "x")).status, 404);
  EXPECT_EQ(RuleFor(Status::VerificationFailed("some_new_reason", "x")).status, 403);
  EXPECT_EQ(RuleFor(Status::Unsupported("some_new_reason", "x")).status, 403);
  EXPECT_EQ(RuleFor(Status::Corruption("some_new_reason", "x")).status, 403);
  EXPECT_EQ(RuleFor(Status::TpmError("some_new_reason", "x")).status, 403);
  const HttpRule io = RuleFor(Status::IoError("some_new_reason", "x"));
  EXPECT_EQ(io.status, 503);
  EXPECT_EQ(io.retry, HttpRule::Retry::kStandard);
}

TEST(StatusHttp, RetryAfterSeconds) {
  RetryPolicy retry;
  retry.retry_after_seconds = 30;
  retry.busy_retry_after_seconds = 2;
  const Response wait = ErrorResponse(Status::NotFound("machine_not_enrolled", "not yet"), retry);
  EXPECT_EQ(wait.status, 503);
  EXPECT_EQ(Header(wait, "Retry-After"), "30");
  for (int i = 0; i < 50; ++i) {
    const Response busy = ErrorResponse(Status::Unsupported("busy", "come back"), retry);
    EXPECT_EQ(busy.status, 503);
    const int seconds = std::stoi(Header(busy, "Retry-After").value_or("-1"));
    EXPECT_GE(seconds, 2);
    EXPECT_LE(seconds, 4);
  }
  const Response flood = ErrorResponse(Status::Unsupported("csr_flood_machine", "slow down"), retry);
  EXPECT_EQ(flood.status, 429);
  EXPECT_EQ(Header(flood, "Retry-After"), "30");
}

TEST(StatusHttp, AdminMapsByCode) {
  EXPECT_EQ(AdminErrorResponse(Status::NotFound("hostname_unknown", "x")).status, 404);
  EXPECT_EQ(AdminErrorResponse(Status::InvalidArgument("hostname_invalid", "x")).status, 400);
  EXPECT_EQ(AdminErrorResponse(Status::InvalidArgument("state_conflict", "x")).status, 400);
  // A verification failure is refused, 403, on both APIs: the admin API's
  // are an EK (certificate) that does not check out at enrollment.
  EXPECT_EQ(AdminErrorResponse(Status::VerificationFailed("x", "x")).status, 403);
  EXPECT_EQ(AdminErrorResponse(Status::Unsupported("x", "x")).status, 409);
  const Response io = AdminErrorResponse(Status::IoError("db_error", "x"));
  EXPECT_EQ(io.status, 503);
  EXPECT_EQ(Header(io, "Retry-After"), "5");
}

// The admin API's own rows: a peer that may not administer is refused; a
// template validator that could not run is answered at once, without
// Retry-After; a lost database's cause is shown to the operator.
TEST(StatusHttp, AdminRowsOfTheTable) {
  const Response forbidden = AdminErrorResponse(Status::VerificationFailed("admin_forbidden", "not you"));
  EXPECT_EQ(forbidden.status, 403);
  const Response validator = AdminErrorResponse(Status::IoError("validator_failed", "cannot run"));
  EXPECT_EQ(validator.status, 503);
  EXPECT_FALSE(Header(validator, "Retry-After").has_value());
  const Response lost = AdminErrorResponse(Status::IoError("db_unavailable", "host db1: connection refused"));
  EXPECT_EQ(lost.status, 503);
  EXPECT_EQ(Header(lost, "Retry-After"), "5");
  EXPECT_NE(lost.body.find("db1"), std::string::npos);
  // The machines' API hides it.
  EXPECT_EQ(ErrorResponse(Status::IoError("db_unavailable", "host db1"), {}).body.find("db1"), std::string::npos);
}

// inventory: an import's duplicated or unreadable rows are the request's
// fault: 400 by the table and by the admin API's code mapping alike.
TEST(StatusHttp, ImportRefusalsAre400) {
  for (const char* reason : {"import_duplicate", "row_invalid"}) {
    const auto rule = RuleForReason(reason);
    ASSERT_TRUE(rule.has_value()) << reason;
    EXPECT_EQ(rule->status, 400) << reason;
    EXPECT_EQ(AdminErrorResponse(Status::InvalidArgument(reason, "x")).status, 400) << reason;
  }
}

// ledger: delete/rename of an active machine and a broken audit chain are
// 409 on the admin API, whatever their Status code.
TEST(StatusHttp, MachineActiveAndAuditChainBrokenAre409) {
  EXPECT_EQ(AdminErrorResponse(Status::InvalidArgument("machine_active", "revoke it first")).status, 409);
  EXPECT_EQ(AdminErrorResponse(Status::Corruption("audit_chain_broken", "row 5")).status, 409);
  EXPECT_EQ(RuleForReason("machine_active")->status, 409);
  EXPECT_EQ(RuleForReason("audit_chain_broken")->status, 409);
  EXPECT_FALSE(Header(AdminErrorResponse(Status::InvalidArgument("machine_active", "x")), "Retry-After"));
}

// Issue 41: `ek-cert import` of a certificate whose EK no machine has is
// 404, of one for a machine with another certificate on record 409; each
// answer carries its reason for rackgatectl to print.
TEST(StatusHttp, EkCertImportRefusals) {
  const Response unknown = AdminErrorResponse(Status::NotFound("ek_cert_machine_unknown", "enroll it"));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("ek_cert_machine_unknown"), std::string::npos);
  const Response on_record = AdminErrorResponse(Status::InvalidArgument("ek_cert_on_record", "enroll --ek-cert"));
  EXPECT_EQ(on_record.status, 409);
  EXPECT_NE(on_record.body.find("ek_cert_on_record"), std::string::npos);
  EXPECT_EQ(RuleForReason("ek_cert_machine_unknown")->status, 404);
  EXPECT_FALSE(Header(on_record, "Retry-After"));
}

// Issue 32: a reset of a revoked machine without unrevoke is a conflict on
// the admin API (409); a revoked machine on the machines' API stays 403.
TEST(StatusHttp, MachineRevokedIs409ForOperatorsAnd403ForMachines) {
  EXPECT_EQ(AdminErrorResponse(Status::InvalidArgument("machine_revoked", "give --unrevoke")).status, 409);
  EXPECT_EQ(ErrorResponse(Status::VerificationFailed("machine_revoked", "this machine is revoked"), {}).status, 403);
  EXPECT_EQ(RuleForReason("machine_revoked")->status, 403);
}

// Manual CSR approval: a waiting CSR is 503 with Retry-After (the agent keeps
// asking), a denied one 403 with the operator's reason and no Retry-After.
TEST(StatusHttp, CsrApprovalWaitsAndDenialIsFinal) {
  RetryPolicy retry;
  retry.retry_after_seconds = 7;
  const Response wait = ErrorResponse(Status::Unsupported("csr_awaiting_approval", "CSR 3 waits"), retry);
  EXPECT_EQ(wait.status, 503);
  EXPECT_EQ(Header(wait, "Retry-After"), "7");
  EXPECT_NE(wait.body.find("csr_awaiting_approval"), std::string::npos);
  const Response denied =
      ErrorResponse(Status::VerificationFailed("csr_denied", "CSR 3 was denied by an operator: wrong rack"), retry);
  EXPECT_EQ(denied.status, 403);
  EXPECT_FALSE(Header(denied, "Retry-After"));
  EXPECT_NE(denied.body.find("wrong rack"), std::string::npos);
}

// fleet (docs/ha.md): a lost database is waited out, with Retry-After, and
// the client never sees the server's words (hosts, libpq's message).
TEST(StatusHttp, DbUnavailableIs503WithRetryAfterAndAFixedMessage) {
  ASSERT_TRUE(RuleForReason("db_unavailable").has_value());
  const Status lost = Status::IoError("db_unavailable", "connection to 10.0.0.5:5432 refused (user rackgate)");
  RetryPolicy retry;
  retry.busy_retry_after_seconds = 7;
  // Jittered as busy: a rack turned away during a failover does not come
  // back in the same second. Retry-After in [7, 14].
  std::set<int> seen;
  for (int i = 0; i < 64; ++i) {
    const Response r = ErrorResponse(lost, retry);
    EXPECT_EQ(r.status, 503);
    const auto after = Header(r, "Retry-After");
    ASSERT_TRUE(after.has_value());
    seen.insert(std::stoi(*after));
    EXPECT_NE(r.body.find("db_unavailable"), std::string::npos);
    EXPECT_EQ(r.body.find("10.0.0.5"), std::string::npos);
    EXPECT_EQ(r.body.find("rackgate)"), std::string::npos);
  }
  EXPECT_GE(*seen.begin(), 7);
  EXPECT_LE(*seen.rbegin(), 14);
  EXPECT_GT(seen.size(), 1u) << "every answer said the same Retry-After";
  const Response admin = AdminErrorResponse(lost);
  EXPECT_EQ(admin.status, 503);
  EXPECT_TRUE(Header(admin, "Retry-After").has_value());
}

}  // namespace
}  // namespace rackgate::daemon
