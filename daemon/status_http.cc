// The one table from the core's reason codes to HTTP status and Retry-After.
#include "daemon/status_http.h"

#include <unordered_map>

#include "core/secrets.h"

namespace rackgate::daemon {

namespace {

using Retry = HttpRule::Retry;

constexpr HttpRule kMalformed{400, Retry::kNone};
constexpr HttpRule kUnauthenticated{401, Retry::kNone};
constexpr HttpRule kRefused{403, Retry::kNone};
constexpr HttpRule kUnknown{404, Retry::kNone};
constexpr HttpRule kUnacceptable{406, Retry::kNone};
constexpr HttpRule kWait{503, Retry::kStandard};
constexpr HttpRule kBusy{503, Retry::kJittered};
constexpr HttpRule kConflict{409, Retry::kNone};
constexpr HttpRule kAdminUnavailable{503, Retry::kNone};

}  // namespace

const std::vector<ReasonRule>& ReasonTable() {
  static const std::vector<ReasonRule> table = {
      // Requests that do not decode (wire/protocol.h, the CSR body, Accept).
      {"bad_json", kMalformed},
      {"field_missing", kMalformed},
      {"field_invalid", kMalformed},
      {"signer_unknown", kMalformed},
      {"csr_malformed", kMalformed},
      {"pcr_values_incomplete", kMalformed},
      {"accept_malformed", kMalformed},
      // Not the core's: the server answers it itself (daemon/http_server.cc,
      // daemon/http_framing.h), before any handler, for a request whose
      // body length is ambiguous, and closes the connection; named here
      // with the status it answers, as docs/protocol.md names it.
      {"bad_framing", kMalformed},

      // Bearer tokens (attestation tokens; provisioning tokens).
      {"token_missing", kUnauthenticated},
      {"token_unknown", kUnauthenticated},
      {"token_expired", kUnauthenticated},
      {"token_revoked", kRefused},
      {"token_invalid", kRefused},

      // What a machine waits out: 503 and Retry-After.
      {"busy", kBusy},
      {"busy_client", kBusy},
      {"machine_not_enrolled", kWait},
      {"machine_pending", kWait},
      {"policy_invalid", kWait},
      {"boot_policy_observing", kWait},
      {"config_unavailable", kWait},
      {"template_value_missing", kWait},
      {"template_value_invalid", kWait},
      {"settings_invalid", kWait},
      {"signer_unavailable", kWait},
      {"csr_flood", kWait},
      {"csr_flood_machine", {429, Retry::kStandard}},

      // Config serving.
      {"pool_unknown", kUnknown},
      // The agent bundle (docs/nodes.md): this appliance serves none
      // (agent_bundle is ""), or its file is not installed (yet): a node
      // can wait for the operator to install the package.
      {"agent_bundle_not_configured", kUnknown},
      {"agent_bundle_unavailable", kWait},
      {"ignition_version_unsupported", kUnacceptable},
      {"ignition_config_too_new", kUnacceptable},
      {"ignition_config_invalid", kUnacceptable},

      // The machine and its session.
      // On the admin API: a reset of a revoked machine without unrevoke
      // (issue 32), a conflict with the machine's state, 409.
      {"machine_revoked", kRefused, kConflict},
      {"machine_unknown", kRefused},
      {"state_conflict", kRefused},
      {"session_unknown", kRefused},
      {"session_expired", kRefused},
      {"session_used", kRefused},

      // Trust (docs/trust.md): final until the machine attests well again.
      {"machine_untrusted", kRefused},

      // The EK certificate (attest/ek_cert.h) and the AK (CheckAkPolicy).
      {"ek_cert_missing", kRefused},
      {"ek_cert_malformed", kRefused},
      {"ek_cert_untrusted", kRefused},
      {"ek_cert_missing_intermediate", kRefused},
      {"ek_cert_expired", kRefused},
      {"ek_cert_not_yet_valid", kRefused},
      {"ek_cert_signature_invalid", kRefused},
      {"ek_cert_bad_basic_constraints", kRefused},
      {"ek_cert_weak_crypto", kRefused},
      {"ek_cert_unhandled_critical_extension", kRefused},
      {"ek_cert_not_ek", kRefused},
      {"ek_key_unsupported", kRefused},
      {"ek_public_mismatch", kRefused},
      // `rackgatectl ek-cert import` (core/ek_cert_service.h): no machine has
      // the certificate's EK (the message says to enroll it with the
      // certificate); the machine has another certificate on record (enroll
      // --ek-cert replaces it), a conflict on the admin API.
      {"ek_cert_machine_unknown", kUnknown},
      {"ek_cert_on_record", kRefused, kConflict},
      {"ek_unsupported", kRefused},
      {"ak_curve_unsupported", kRefused},
      {"ak_decrypt_key", kRefused},
      {"ak_key_too_weak", kRefused},
      {"ak_name_alg_weak", kRefused},
      {"ak_not_fixed_parent", kRefused},
      {"ak_not_fixed_tpm", kRefused},
      {"ak_not_restricted_signing", kRefused},
      {"ak_not_sensitive_data_origin", kRefused},
      {"key_curve_unsupported", kRefused},
      {"key_invalid", kRefused},
      {"key_type_unsupported", kRefused},
      {"object_name_malformed", kRefused},
      {"credential_secret_size", kRefused},

      // The evidence: activation, quote, counters, event log, policy.
      {"activation_failed", kRefused},
      {"attest_malformed", kRefused},
      {"quote_magic_invalid", kRefused},
      {"quote_type_invalid", kRefused},
      {"quote_nonce_mismatch", kRefused},
      {"quote_pcr_digest_mismatch", kRefused},
      {"quote_pcr_not_selected", kRefused},
      {"signature_invalid", kRefused},
      {"signature_malformed", kRefused},
      {"signature_scheme_mismatch", kRefused},
      {"signature_scheme_unsupported", kRefused},
      {"hash_unsupported", kRefused},
      {"reset_count_regressed", kRefused},
      {"restart_count_regressed", kRefused},
      {"clock_regressed", kRefused},
      {"eventlog_empty", kRefused},
      {"eventlog_too_large", kRefused},
      {"eventlog_too_many_events", kRefused},
      {"eventlog_truncated", kRefused},
      {"eventlog_event_too_large", kRefused},
      {"eventlog_bad_spec_id", kRefused},
      {"eventlog_bad_digest_count", kRefused},
      {"eventlog_unknown_digest_alg", kRefused},
      {"eventlog_duplicate_digest_alg", kRefused},
      {"eventlog_bad_pcr_index", kRefused},
      {"eventlog_bad_startup_locality", kRefused},
      {"eventlog_bank_missing", kRefused},
      {"eventlog_pcr_mismatch", kRefused},
      {"boot_policy_violation", kRefused},

      // CSRs (docs/csr.md): a self-signature that does not verify is a
      // refusal, not a malformed request.
      {"csr_signature_invalid", kRefused},
      {"csr_tpm_key_unprovable", kRefused},
      {"csr_tpm_key_mismatch", kRefused},
      {"csr_tpm_nonce_missing", kRefused},
      {"certify_name_mismatch", kRefused},
      {"certify_nonce_mismatch", kRefused},
      {"certify_type_invalid", kRefused},
      {"csr_subject_organization", kRefused},
      {"csr_subject_common_name", kRefused},
      {"csr_subject_extra", kRefused},
      {"csr_key_unsupported", kRefused},
      {"csr_usages", kRefused},
      {"csr_state", kRefused},
      {"csr_client_has_sans", kRefused},
      {"csr_window_expired", kRefused},
      {"client_cert_already_issued", kRefused},
      {"csr_serving_no_sans", kRefused},
      {"csr_san_not_enrolled", kRefused},
      {"csr_serving_san_kind", kRefused},
      {"csr_tpm_key_required", kRefused},
      // Approver mode (docs/kubernetes.md): the pool's kubelet_certificates
      // says which of the two endpoints a machine uses.
      {"csr_approver_mode", kRefused},
      {"kubelet_key_signer_mode", kRefused},
      {"kubelet_key_limit", kRefused},

      // Manual CSR approval (docs/csr.md, "Manual approval"): waiting for
      // an operator is waited out; a denial is final.
      {"csr_awaiting_approval", kWait},
      {"csr_issuing", kWait},  // an issuer that issues later (core/issuer.h)
      {"csr_denied", kRefused},
      // renew: renewal and one nonce, one use (docs/csr.md).
      {"renewal_not_due", kRefused},
      {"renewal_proof_invalid", kRefused},
      {"certify_nonce_used", kRefused},
      // inventory: an import's rows (docs/inventory.md); the admin API
      // answers them by code (RuleFor), 400 either way.
      {"import_duplicate", kMalformed},
      {"row_invalid", kMalformed},
      // ledger: admin refusals whose answer is 409 whatever their Status
      // code (docs/lifecycle.md, docs/audit.md).
      {"machine_active", kConflict},
      // `csr approve NAME` of a kubelet CSR name that two waiting API
      // objects carry (docs/kubernetes.md): name one by its uid.
      {"csr_name_ambiguous", kConflict},
      {"audit_chain_broken", kConflict},
      // policy accept (docs/policy.md, "From observation to enforcement").
      {"proposal_changed", kConflict},
      {"nothing_observed", kConflict},
      {"proposal_invalid", kConflict},
      // fleet: the database does not answer (a PostgreSQL failover):
      // waitable, another appliance or the new primary answers soon
      // (docs/ha.md). Jittered as busy is: every machine that was turned
      // away during the outage would otherwise come back in the same second.
      {"db_unavailable", kBusy},

      // admin: the admin API's own refusals (daemon/handlers_admin.cc).
      // The peer may not administer (its credentials, or not the admin
      // socket).
      {"admin_forbidden", kRefused, kRefused},
      // A template's validator could not run: answered at once, the
      // operator sees why (no Retry-After; docs/ignition.md). Only the admin
      // API checks templates; a machine would be told to wait.
      {"validator_failed", kWait, kAdminUnavailable},
  };
  return table;
}

namespace {

// The table's row for `reason`, or null.
const ReasonRule* RowFor(std::string_view reason) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string_view, const ReasonRule*>;
    for (const auto& row : ReasonTable()) m->emplace(row.reason, &row);
    return m;
  }();
  auto it = index->find(reason);
  return it == index->end() ? nullptr : it->second;
}

}  // namespace

std::optional<HttpRule> RuleForReason(std::string_view reason) {
  const ReasonRule* row = RowFor(reason);
  if (row == nullptr) return std::nullopt;
  return row->rule;
}

HttpRule RuleFor(const Status& s, Api api) {
  const ReasonRule* row = RowFor(s.reason());
  if (api == Api::kMachine) {
    if (row != nullptr) return row->rule;
    switch (s.code()) {
      case Status::Code::kInvalidArgument: return kMalformed;
      case Status::Code::kNotFound: return kUnknown;
      case Status::Code::kIoError: return kWait;
      default: return kRefused;
    }
  }
  if (row != nullptr && row->admin) return *row->admin;
  if (row != nullptr && row->rule.status == 409) return kConflict;
  switch (s.code()) {
    case Status::Code::kNotFound: return kUnknown;
    case Status::Code::kInvalidArgument: return kMalformed;
    case Status::Code::kIoError: return kWait;
    case Status::Code::kVerificationFailed: return kRefused;
    default: return kConflict;
  }
}

Response ErrorResponse(const Status& s, const RetryPolicy& retry, Api api) {
  const HttpRule rule = RuleFor(s, api);
  // fleet: SECURITY: a lost database's message names the server (hosts,
  // libpq's words); a machine learns only that it may retry. An operator
  // on the admin socket is shown the cause.
  const std::string message = api == Api::kMachine && s.reason() == "db_unavailable"
                                  ? "the appliance's database is unavailable; retry"
                                  : s.message();
  switch (rule.retry) {
    case Retry::kNone: return Response::Error(rule.status, s.reason(), message);
    case Retry::kStandard: return Response::Error(rule.status, s.reason(), message, retry.retry_after_seconds);
    case Retry::kJittered: {
      const int base = retry.busy_retry_after_seconds;
      const int wait = base + static_cast<int>(core::RandomBytes(1)[0] % static_cast<unsigned>(base + 1));
      return Response::Error(rule.status, s.reason(), message, wait);
    }
  }
  return Response::Error(500, "internal", "internal error");
}

Response AdminErrorResponse(const Status& s) { return ErrorResponse(s, kAdminRetry, Api::kAdmin); }

}  // namespace rackgate::daemon
