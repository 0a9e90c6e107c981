// A machine's trust, changed with its audit row.
#include "storage/trust.h"

#include "storage/audit.h"
#include "storage/rows.h"

namespace rackgate::storage {

bool ApplyTrust(Connection& c, const Machine& m, std::string_view trust, const std::string& reason,
                const Actor& actor, int64_t now) {
  if (m.trust == trust) {
    if (trust == kTrustUntrusted && m.trust_reason != reason) {
      Stmt s = c.Prepare("UPDATE machines SET trust_reason = ?2 WHERE id = ?1");
      s.BindInt(1, m.id).BindText(2, reason).Run();
    }
    return false;
  }
  {
    Stmt s = c.Prepare("UPDATE machines SET trust = ?2, trust_reason = ?3, trust_changed_at = ?4 WHERE id = ?1");
    s.BindInt(1, m.id).BindText(2, trust).BindText(3, reason).BindInt(4, now).Run();
  }
  AuditTrustChange(c, m, trust, reason, actor, now);
  return true;
}

void AuditTrustChange(Connection& c, const Machine& m, std::string_view trust, const std::string& reason,
                      const Actor& actor, int64_t now) {
  // A first good attestation is not "trusted again": the attest row records
  // it, and the events built on `trusted` mean a recovery.
  if (!(m.trust.empty() && trust == kTrustTrusted)) {
    const std::string action(trust);
    WriteAudit(c, actor, now,
               // from and to: the unchanged state, as for every audit row
               // about a machine that changes no state.
               {action, &m, m.state, m.state,
                json{{"reason", trust == kTrustTrusted ? std::string("attestation_ok") : reason}}});
  }
}

}  // namespace rackgate::storage
