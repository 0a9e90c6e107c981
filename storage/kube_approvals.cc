// Approver mode: the kubelet keys machines proved, and rackgate's decisions
// on certificates.k8s.io CSRs (storage/roles.h, KubeApprovalStore).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"
#include "base/hex.h"

namespace rackgate::storage {

namespace {

// `current` is whether the row's epoch is still its machine's.
constexpr char kAttestedKeySelect[] =
    "SELECT k.machine_id, m.hostname, k.kind, k.public_key_sha256, k.tpm_resident, k.registered_at, "
    "k.used_by_uid, k.attest_epoch = m.attest_epoch "
    "FROM attested_keys k JOIN machines m ON m.id = k.machine_id ";

constexpr char kKubeCsrSelect[] =
    "SELECT r.uid, r.name, r.machine_id, m.hostname, r.kind, r.purpose, r.public_key_sha256, r.requester, "
    "r.decision, r.reason, r.message, r.decided_by, r.created_at, r.decided_at "
    "FROM kube_csrs r JOIN machines m ON m.id = r.machine_id ";

AttestedKey ReadAttestedKey(const Stmt& s) {
  AttestedKey k;
  k.machine_id = s.Int(0);
  k.hostname = s.Text(1);
  k.kind = s.Text(2);
  k.public_key_sha256 = s.Blob(3);
  k.tpm_resident = s.Int(4) != 0;
  k.registered_at = s.Int(5);
  k.used_by_uid = s.Text(6);
  k.current = s.Int(7) != 0;
  return k;
}

KubeCsrDecision ReadKubeCsr(const Stmt& s) {
  KubeCsrDecision d;
  d.uid = s.Text(0);
  d.name = s.Text(1);
  d.machine_id = s.Int(2);
  d.hostname = s.Text(3);
  d.kind = s.Text(4);
  d.purpose = s.Text(5);
  d.public_key_sha256 = s.Blob(6);
  d.requester = s.Text(7);
  d.decision = s.Text(8);
  d.reason = s.Text(9);
  d.message = s.Text(10);
  d.decided_by = s.Text(11);
  d.created_at = s.Int(12);
  d.decided_at = s.OptInt(13);
  return d;
}

// The registration of (machine, kind, key) in the machine's current epoch.
std::optional<AttestedKey> CurrentKey(Connection& c, int64_t machine_id, const std::string& kind,
                                      const Bytes& public_key_sha256) {
  Stmt s = c.Prepare(std::string(kAttestedKeySelect) +
                     "WHERE k.machine_id = ?1 AND k.attest_epoch = m.attest_epoch AND k.kind = ?2 AND "
                     "k.public_key_sha256 = ?3");
  s.BindInt(1, machine_id).BindText(2, kind).BindBlob(3, public_key_sha256);
  if (!s.Step()) return std::nullopt;
  return ReadAttestedKey(s);
}

std::optional<KubeCsrDecision> KubeCsrByUid(Connection& c, const std::string& uid) {
  Stmt s = c.Prepare(std::string(kKubeCsrSelect) + "WHERE r.uid = ?1");
  s.BindText(1, uid);
  if (!s.Step()) return std::nullopt;
  return ReadKubeCsr(s);
}

json KeyDetail(const AttestedKey& k) {
  return json{{"kind", k.kind},
              {"public_key_sha256", hex::Encode(k.public_key_sha256)},
              {"tpm_resident", k.tpm_resident}};
}

json CsrDetail(const KubeCsrDecision& d) {
  return json{{"name", d.name},
              {"uid", d.uid},
              {"kind", d.kind},
              {"purpose", d.purpose},
              {"reason", d.reason},
              {"public_key_sha256", hex::Encode(d.public_key_sha256)},
              {"requester", d.requester}};
}

std::string CsrAction(std::string_view decision) {
  return "kubernetes_csr_" + std::string(decision);
}

// The checks of an approved join, and its effects, inside the caller's write
// transaction: the key registered for this machine and kind in its current
// epoch and unused (then used by `uid`); the client-certificate mark unset
// (then set); attested/provisioned -> joined, joined stays. Returns the
// machine as it is after.
Machine ApplyApprovedJoin(Connection& c, const Machine& m, const KubeCsrDecision& d, int64_t now) {
  // SECURITY: the key in the CSR must be one this machine proved to
  // rackgate through an attested session since its last reset, and a key
  // joins once: a stolen bootstrap token alone, or a replayed CSR, cannot
  // make a node.
  std::optional<AttestedKey> key = CurrentKey(c, m.id, d.kind, d.public_key_sha256);
  if (!key || !key->used_by_uid.empty()) {
    Fail(Status::VerificationFailed("key_not_attested",
                                    "the CSR's key was not proven by '" + m.hostname +
                                        "' through an attested session since its last reset, or was used"));
  }
  if (m.client_cert_issued_at) {
    Fail(Status::VerificationFailed("client_cert_already_issued", "a client certificate was already issued to '" +
                                                                   m.hostname + "' since its last reset"));
  }
  if (m.state != MachineState::kAttested && m.state != MachineState::kProvisioned &&
      m.state != MachineState::kJoined) {
    Fail(Status::InvalidArgument("state_conflict", MachineIs(m) + "; a node joins from attested or provisioned"));
  }
  {
    Stmt s = c.Prepare(
        "UPDATE attested_keys SET used_by_uid = ?5 WHERE machine_id = ?1 AND attest_epoch = ?2 AND kind = ?3 AND "
        "public_key_sha256 = ?4 AND used_by_uid = ''");
    s.BindInt(1, m.id).BindInt(2, m.attest_epoch).BindText(3, d.kind).BindBlob(4, d.public_key_sha256);
    s.BindText(5, d.uid).Run();
    if (c.Changes() != 1) Fail(Status::VerificationFailed("key_not_attested", "the CSR's key was used"));
  }
  Machine after = m;
  after.state = MachineState::kJoined;
  after.client_cert_issued_at = now;
  after.updated_at = now;
  Stmt s = c.Prepare("UPDATE machines SET state = ?2, client_cert_issued_at = ?3, updated_at = ?3 WHERE id = ?1");
  s.BindInt(1, m.id).BindText(2, StateName(after.state)).BindInt(3, now).Run();
  return after;
}

// An approved rotation or serving certificate is the successor or sibling
// of the client certificate the machine joined with in its current epoch:
// after a reset (or a new EK) nothing but a new join is approved until the
// machine joined again, so the old owner's certificate cannot renew itself.
void CheckJoinedInEpoch(const Machine& m, const KubeCsrDecision& d) {
  if (d.purpose == kKubePurposeJoin) return;
  if (m.state != MachineState::kJoined || !m.client_cert_issued_at) {
    Fail(Status::InvalidArgument(std::string(kKubeReasonNotJoined),
                                 MachineIs(m) + " and has not joined since its last reset: a " + d.purpose +
                                     " certificate is approved only for a machine that joined in its current epoch"));
  }
}

void InsertKubeCsr(Connection& c, const KubeCsrDecision& d, int64_t now) {
  Stmt s = c.Prepare(
      "INSERT INTO kube_csrs (uid, name, machine_id, kind, purpose, public_key_sha256, requester, decision, reason, "
      "message, decided_by, created_at, decided_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  s.BindText(1, d.uid)
      .BindText(2, d.name)
      .BindInt(3, d.machine_id)
      .BindText(4, d.kind)
      .BindText(5, d.purpose)
      .BindBlob(6, d.public_key_sha256)
      .BindText(7, d.requester)
      .BindText(8, d.decision)
      .BindText(9, d.reason)
      .BindText(10, d.message)
      .BindText(11, d.decided_by);
  s.BindInt(12, now);
  if (d.decision == kCsrWaiting) {
    s.BindNull(13);
  } else {
    s.BindInt(13, now);
  }
  s.Run();
}

// A flood of registrations cannot grow the store or the audit log: at most
// kMaxKeysPerKindPerAttestation keys of a kind per attestation, in the
// transaction that would add one.
void CheckKeyLimit(Connection& c, const Machine& m, const std::string& kind) {
  Stmt s = c.Prepare(
      "SELECT count(*) FROM attested_keys WHERE machine_id = ?1 AND attest_epoch = ?2 AND kind = ?3 AND "
      "registered_at >= ?4");
  s.BindInt(1, m.id).BindInt(2, m.attest_epoch).BindText(3, kind).BindInt(4, m.last_attested_at.value_or(0));
  if (s.Step() && s.Int(0) >= kMaxKeysPerKindPerAttestation) {
    Fail(Status::InvalidArgument("kubelet_key_limit",
                                 "attest again (reboot, or the renewal timer) to register another " + kind +
                                     " key: this attestation registered " +
                                     std::to_string(kMaxKeysPerKindPerAttestation) + " already"));
  }
}

}  // namespace

int64_t DenyWaitingKubeCsrs(Connection& c, int64_t machine_id, const std::string& by, int64_t now) {
  Stmt s = c.Prepare(
      "UPDATE kube_csrs SET decision = 'denied', reason = ?2, message = ?3, decided_by = ?4, decided_at = ?5 "
      "WHERE machine_id = ?1 AND decision = 'waiting'");
  s.BindInt(1, machine_id)
      .BindText(2, kKubeReasonMachineReset)
      .BindText(3, "the machine was reset (or its EK replaced) while this CSR waited: a CSR of an earlier epoch "
                   "is never approved; the node's kubelet asks again once it joined")
      .BindText(4, by)
      .BindInt(5, now)
      .Run();
  return c.Changes();
}

Result<AttestedKey> SqlStore::RegisterAttestedKey(const AttestedKey& key, const std::optional<Bytes>& certify_token_hash,
                                                  const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<AttestedKey> {
    CheckActor(actor);
    CheckAttestedKey(key);
    if (certify_token_hash && (certify_token_hash->empty() || certify_token_hash->size() > kMaxHash)) {
      return Status::NotFound("token_unknown", "unknown token");
    }
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, key.machine_id);
      if (m.state != MachineState::kAttested && m.state != MachineState::kProvisioned &&
          m.state != MachineState::kJoined) {
        Fail(Status::InvalidArgument("state_conflict", MachineIs(m) + "; a key is registered after attestation"));
      }
      // The agent retries (a lost answer): the row as stored, the nonce
      // left as it is, no second audit row.
      if (auto stored = CurrentKey(c, m.id, key.kind, key.public_key_sha256)) return *stored;
      CheckKeyLimit(c, m, key.kind);
      // SECURITY: one nonce, one use (docs/csr.md), in the transaction that
      // registers the key it proved; a token of another machine proves
      // nothing about this one.
      if (certify_token_hash) {
        Stmt s = c.Prepare("SELECT machine_id FROM tokens WHERE hash = ?1");
        s.BindBlob(1, *certify_token_hash);
        if (!s.Step() || s.Int(0) != m.id) Fail(Status::NotFound("token_unknown", "unknown token"));
        ConsumeCertifyNonceIn(c, *certify_token_hash, now);
      }
      {
        Stmt s = c.Prepare(
            "INSERT INTO attested_keys (machine_id, attest_epoch, kind, public_key_sha256, tpm_resident, "
            "registered_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
        s.BindInt(1, m.id)
            .BindInt(2, m.attest_epoch)
            .BindText(3, key.kind)
            .BindBlob(4, key.public_key_sha256)
            .BindInt(5, key.tpm_resident ? 1 : 0)
            .BindInt(6, now)
            .Run();
      }
      std::optional<AttestedKey> out = CurrentKey(c, m.id, key.kind, key.public_key_sha256);
      if (!out) Fail(Status::IoError("db_error", "the attested key just inserted is not there"));
      WriteAudit(c, actor, now, {"kubelet_key_registered", &m, m.state, m.state, KeyDetail(*out)});
      return *out;
    });
  });
}

Result<AttestedKey> SqlStore::FindAttestedKey(int64_t machine_id, const std::string& kind,
                                              const Bytes& public_key_sha256) {
  return Guard([&]() -> Result<AttestedKey> {
    return db_->Read([&](Connection& c) {
      std::optional<AttestedKey> k = CurrentKey(c, machine_id, kind, public_key_sha256);
      if (!k) Fail(Status::NotFound("key_unknown", "no such key registered in the machine's current epoch"));
      return *k;
    });
  });
}

Result<KubeCsrDecision> SqlStore::GetKubeCsr(const std::string& uid) {
  return Guard([&]() -> Result<KubeCsrDecision> {
    return db_->Read([&](Connection& c) {
      std::optional<KubeCsrDecision> d = KubeCsrByUid(c, uid);
      if (!d) Fail(Status::NotFound("kube_csr_unknown", "no decision recorded for this CSR"));
      return *d;
    });
  });
}

Result<KubeCsrDecision> SqlStore::RecordKubeCsr(const KubeCsrDecision& d, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<KubeCsrDecision> {
    CheckActor(actor);
    CheckKubeCsrDecision(d);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, d.machine_id);
      // SECURITY: one decision per API object, whichever appliance or
      // restart asks: the first one recorded is the one carried out.
      if (KubeCsrByUid(c, d.uid)) {
        Fail(Status::InvalidArgument("kube_csr_decided", "a decision on this CSR is already recorded"));
      }
      Machine after = m;
      if (d.decision == kCsrApproved && d.purpose == kKubePurposeJoin) after = ApplyApprovedJoin(c, m, d, now);
      if (d.decision == kCsrApproved) CheckJoinedInEpoch(m, d);
      InsertKubeCsr(c, d, now);
      std::optional<KubeCsrDecision> out = KubeCsrByUid(c, d.uid);
      if (!out) Fail(Status::IoError("db_error", "the CSR decision just inserted is not there"));
      WriteAudit(c, actor, now, {CsrAction(out->decision), &after, m.state, after.state, CsrDetail(*out)});
      return *out;
    });
  });
}

Result<KubeCsrDecision> SqlStore::DecideKubeCsr(const std::string& uid, bool approve, const std::string& reason,
                                                const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<KubeCsrDecision> {
    CheckActor(actor);
    if (!approve) CheckDenyReason(reason);
    return db_->Write([&](Connection& c) {
      std::optional<KubeCsrDecision> d = KubeCsrByUid(c, uid);
      if (!d) Fail(Status::NotFound("kube_csr_unknown", "no decision recorded for this CSR"));
      if (d->decision != kCsrWaiting) {
        Fail(Status::InvalidArgument("state_conflict", "the CSR " + d->name + " is " + d->decision + ", not waiting"));
      }
      Machine m = MustMachineById(c, d->machine_id);
      Machine after = m;
      if (approve && d->purpose == kKubePurposeJoin) after = ApplyApprovedJoin(c, m, *d, now);
      if (approve) CheckJoinedInEpoch(m, *d);
      {
        Stmt s = c.Prepare(
            "UPDATE kube_csrs SET decision = ?2, reason = ?3, decided_by = ?4, decided_at = ?5 WHERE uid = ?1");
        s.BindText(1, uid)
            .BindText(2, approve ? kCsrApproved : kCsrDenied)
            .BindText(3, approve ? d->reason : reason)
            .BindText(4, actor.name)
            .BindInt(5, now)
            .Run();
      }
      KubeCsrDecision out = *KubeCsrByUid(c, uid);
      WriteAudit(c, actor, now, {CsrAction(out.decision), &after, m.state, after.state, CsrDetail(out)});
      return out;
    });
  });
}

Result<std::vector<KubeCsrDecision>> SqlStore::ListKubeCsrs(bool waiting_only, int limit) {
  return Guard([&]() -> Result<std::vector<KubeCsrDecision>> {
    return db_->Read([&](Connection& c) {
      // Ties of created_at are broken by uid, so both backends (and the
      // fake) list in one order.
      Stmt s = c.Prepare(std::string(kKubeCsrSelect) +
                         (waiting_only ? "WHERE r.decision = 'waiting' ORDER BY r.created_at, r.uid LIMIT ?1"
                                       : "ORDER BY r.created_at DESC, r.uid DESC LIMIT ?1"));
      s.BindInt(1, std::clamp(limit, 1, 100000));
      std::vector<KubeCsrDecision> out;
      while (s.Step()) out.push_back(ReadKubeCsr(s));
      return out;
    });
  });
}

}  // namespace rackgate::storage
