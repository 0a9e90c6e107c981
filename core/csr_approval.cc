// Manual CSR approval: whether a CSR waits, and for whom.
#include "core/csr_approval.h"

#include "attest/tpm.h"
#include "base/log.h"
#include "base/hex.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("csr");
  return log;
}

}  // namespace

bool NeedsApproval(const PoolSettings& settings, const CsrForApproval& csr) {
  // A renewal proves the key of a certificate an operator (or the pool's
  // automatic approval) already let through, and comes with a fresh good
  // attestation: it waits only when the pool asks for that explicitly.
  if (csr.renewal) return settings.renewal_csr_manual;
  return csr.kind == storage::kCertClient ? settings.client_csr_manual : settings.serving_csr_manual;
}

Status CheckCsrApproval(storage::CsrStore* store, const PoolSettings& settings, const CsrForApproval& csr,
                        int64_t now, const storage::CsrQueueLimits& limits) {
  if (!NeedsApproval(settings, csr)) return Status::Ok();
  const storage::Machine& m = *csr.machine;
  storage::CsrApprovalRequest r;
  r.machine_id = m.id;
  r.kind = csr.kind;
  r.public_key_sha256 = csr.public_key_sha256;
  r.csr_pem = csr.csr_pem;
  r.usages = csr.usages;
  r.tpm_resident = csr.tpm_resident;
  auto queued = store->QueueCsrRequest(r, limits, storage::Actor{"rackgated", "CSR waits for an operator"}, now);
  if (!queued.ok()) return queued.status();
  const std::string id = std::to_string(queued->id);
  if (queued->state == storage::kCsrApproved) {
    Log()->info("{} CSR {} of {} approved by {}; signing", csr.kind, id, m.hostname, queued->decided_by);
    return Status::Ok();
  }
  if (queued->state == storage::kCsrDenied) {
    // SECURITY: denied is final for this key. The operator's reason was
    // checked printable when it was stored, and goes back to the machine.
    return Status::VerificationFailed("csr_denied",
                                      "CSR " + id + " was denied by an operator: " + queued->deny_reason);
  }
  if (queued->created_at == now) {
    Log()->info("{} CSR {} of {} (key {}) waits for an operator: rackgatectl csr approve {}", csr.kind, id,
                m.hostname, hex::Encode(csr.public_key_sha256).substr(0, 16), id);
  }
  return Status::Unsupported("csr_awaiting_approval",
                             "CSR " + id + " waits for an operator (rackgatectl csr approve " + id + ")");
}

}  // namespace rackgate::core
