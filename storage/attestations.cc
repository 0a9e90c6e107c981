// Attestation records: a success (state, TOFU values, token, audit row in one
// transaction), a bounded list of refusals, and the counters' baseline.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/trust.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// RecordAttestationSuccess's checks, made before any transaction.
Status CheckSuccess(const AttestationRecord& record, const Token& token,
                    const std::optional<std::string>& tofu_pcrs_json) {
  CheckRecord(record);
  if (!record.verdict.empty() && record.verdict != kVerdictOk) {
    return Status::InvalidArgument("field_invalid", "a successful attestation has verdict ok");
  }
  CheckSize("token hash", token.hash.size(), 1, kMaxHash);
  CheckSize("token nonce", token.nonce.size(), 0, kMaxHash);
  CheckSize("token ak_public", token.ak_public.size(), 0, kMaxTpmBlob);
  CheckOptJson("tofu_pcrs_json", tofu_pcrs_json);
  if (token.machine_id != record.machine_id) {
    return Status::InvalidArgument("field_invalid", "the token is for another machine than the attestation");
  }
  return Status::Ok();
}

Status CheckFailure(const AttestationRecord& record) {
  CheckRecord(record);
  if (!record.verdict.empty() && record.verdict != kVerdictRefused) {
    return Status::InvalidArgument("field_invalid", "a failed attestation has verdict refused");
  }
  return Status::Ok();
}

// RecordAttestationSuccess's transaction body. The machine is read once (it
// must be, under the writer lock, for the state check); what the UPDATEs
// change is applied to that copy rather than read back.
Machine RecordSuccessIn(Connection& c, const AttestationRecord& record, const Token& token,
                        const std::optional<std::string>& tofu_pcrs_json) {
  Machine m = MustMachineById(c, record.machine_id);
  if (m.state == MachineState::kPending || m.state == MachineState::kRevoked) {
    Fail(Status::InvalidArgument("state_conflict", "'" + m.hostname + "' is " + std::string(StateName(m.state)) +
                                                       " and cannot attest"));
  }
  const int64_t attestation_id = InsertAttestation(c, record, kVerdictOk, m.attest_epoch);
  // A reboot re-attests: only an enrolled machine moves.
  const MachineState to = m.state == MachineState::kEnrolled ? MachineState::kAttested : m.state;
  // A good attestation makes the machine trusted (docs/trust.md), in the
  // same UPDATE; its audit row follows the attest row (AuditTrustChange).
  const bool trust_changes = m.trust != kTrustTrusted;
  const std::optional<int64_t> trust_changed_at = trust_changes ? std::optional(record.at) : m.trust_changed_at;
  {
    Stmt s = c.Prepare(
        "UPDATE machines SET state = ?2, last_attested_at = ?3, "
        "tofu_pcrs_json = COALESCE(?4, tofu_pcrs_json), updated_at = ?3, "
        "trust = ?5, trust_reason = '', trust_changed_at = ?6 WHERE id = ?1");
    s.BindInt(1, m.id).BindText(2, StateName(to)).BindInt(3, record.at).BindOptText(4, tofu_pcrs_json);
    s.BindText(5, kTrustTrusted).BindOptInt(6, trust_changed_at).Run();
  }
  {
    // A taken hash inserts nothing (one statement, not a check and an insert).
    Stmt s = c.Prepare(
        "INSERT INTO tokens (hash, machine_id, session_id, issued_at, expires_at, nonce, ak_public) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (hash) DO NOTHING");
    s.BindBlob(1, token.hash)
        .BindInt(2, token.machine_id)
        .BindText(3, token.session_id)
        .BindInt(4, token.issued_at)
        .BindInt(5, token.expires_at)
        .BindBlob(6, token.nonce)
        .BindBlob(7, token.ak_public)
        .Run();
    if (c.Changes() != 1) Fail(Status::InvalidArgument("field_invalid", "the token hash is taken"));
  }
  Machine after = m;
  after.state = to;
  after.last_attested_at = record.at;
  after.updated_at = record.at;
  if (tofu_pcrs_json) after.tofu_pcrs_json = tofu_pcrs_json;
  WriteAudit(c, Actor{kAttestationActor, ""}, record.at,
             {"attest", &after, m.state, to,
              json{{"attestation_id", attestation_id},
                   {"reset_count", record.reset_count},
                   {"restart_count", record.restart_count},
                   {"firmware_version", record.firmware_version},
                   {"tofu_recorded", tofu_pcrs_json.has_value()}}});
  if (trust_changes) AuditTrustChange(c, after, kTrustTrusted, "", Actor{kAttestationActor, ""}, record.at);
  after.trust = kTrustTrusted;
  after.trust_reason.clear();
  after.trust_changed_at = trust_changed_at;
  return after;
}

// RecordAttestationFailure's transaction body.
void RecordFailureIn(Connection& c, const AttestationRecord& record, int max_failures_per_machine) {
  const Machine m = MustMachineById(c, record.machine_id);
  InsertAttestation(c, record, kVerdictRefused, m.attest_epoch);
  // The latest attestation failed: the machine is untrusted until one
  // passes (docs/trust.md). Its state is never changed here. A revoked
  // machine has no trust to lose (revoked is terminal).
  if (m.state != MachineState::kRevoked) {
    ApplyTrust(c, m, kTrustUntrusted, std::string(kTrustReasonFailedPrefix) + record.reason,
               Actor{kAttestationActor, ""}, record.at);
  }
  // Bounded per machine: anyone who knows an enrolled EK's public key can
  // open sessions and fail them.
  Stmt s = c.Prepare(
      "DELETE FROM attestations WHERE machine_id = ?1 AND verdict = 'refused' AND id NOT IN "
      "(SELECT id FROM attestations WHERE machine_id = ?1 AND verdict = 'refused' ORDER BY id DESC LIMIT ?2)");
  s.BindInt(1, record.machine_id).BindInt(2, std::max(1, max_failures_per_machine)).Run();
}

// The machine's last good attestation of its current epoch (the counters'
// baseline), if any.
std::optional<AttestationRecord> LastSuccessIn(Connection& c, int64_t machine_id) {
  static const std::string sql = "SELECT " + std::string(kAttestationColumns) + kAttestationFrom +
                                "WHERE m.id = ?1 AND a.id = " + kBaselineAttestationId;
  Stmt s = c.Prepare(sql);
  s.BindInt(1, machine_id);
  if (!s.Step()) return std::nullopt;
  return ReadAttestation(s);
}

// Consumes the record's session, which must be its machine's.
void ConsumeRecordSessionIn(Connection& c, const AttestationRecord& record, int64_t now) {
  const Session session = ConsumeSessionIn(c, record.session_id, now);
  if (session.machine_id != record.machine_id) {
    Fail(Status::InvalidArgument("field_invalid", "the session is for another machine than the attestation"));
  }
}

}  // namespace

Result<Machine> SqlStore::RecordAttestationSuccess(const AttestationRecord& record, const Token& token,
                                                   const std::optional<std::string>& tofu_pcrs_json) {
  return Guard([&]() -> Result<Machine> {
    if (Status s = CheckSuccess(record, token, tofu_pcrs_json); !s.ok()) return s;
    return db_->Write([&](Connection& c) { return RecordSuccessIn(c, record, token, tofu_pcrs_json); });
  });
}

Status SqlStore::RecordAttestationFailure(const AttestationRecord& record) {
  return Guard([&]() -> Status {
    if (Status s = CheckFailure(record); !s.ok()) return s;
    db_->Write([&](Connection& c) {
      RecordFailureIn(c, record, db_->options().max_failures_per_machine);
      return true;
    });
    return Status::Ok();
  });
}

// Evidence in one read and one write (docs/storage.md, "Statements and writes per machine").

Result<EvidenceInputs> SqlStore::ReadEvidence(const std::string& session_id, int64_t now) {
  return Guard([&]() -> Result<EvidenceInputs> {
    if (session_id.empty() || session_id.size() > kMaxSessionId) {
      return Status::NotFound("session_unknown", "unknown session");
    }
    // One statement: the session, its machine, the machine's pool and its
    // last good attestation of its epoch (LastSuccessIn's row).
    return db_->ReadOne([&](Connection& c) {
      Stmt s = c.Prepare(PerDialect(c, [](Dialect d) {
        return "SELECT " + Qualified("s", kSessionColumns) + ", " + MachineColumns(d) + ", " +
               Qualified("p", kPoolColumns) + ", " + kAttestationColumns +
               " FROM sessions s JOIN machines m ON m.id = s.machine_id JOIN pools p ON p.name = m.pool "
               "LEFT JOIN attestations a ON a.id = " + kBaselineAttestationId + " WHERE s.id = ?1";
      }));
      s.BindText(1, session_id);
      if (!s.Step()) Fail(Status::NotFound("session_unknown", "unknown session"));
      EvidenceInputs in;
      int col = 0;
      in.session = ReadSessionRow(s, col);
      CheckSessionUsable(in.session, now);
      in.machine = ReadMachine(s, col += kSessionColumnCount);
      in.pool = ReadPool(s, col += kMachineColumnCount);
      col += kPoolColumnCount;
      if (!s.IsNull(col)) in.last = ReadAttestation(s, col);
      return in;
    });
  });
}

Result<ChallengeInputs> SqlStore::ReadChallenge(const Bytes& ek_hash) {
  return Guard([&]() -> Result<ChallengeInputs> {
    if (ek_hash.empty() || ek_hash.size() > kMaxHash) {
      return Status::NotFound("machine_unknown", "no machine is enrolled with this EK");
    }
    // One statement: the machine and its pool.
    return db_->ReadOne([&](Connection& c) {
      Stmt s = c.Prepare(PerDialect(c, [](Dialect d) {
        return "SELECT " + MachineColumns(d) + ", " + Qualified("p", kPoolColumns) +
               " FROM machines m JOIN pools p ON p.name = m.pool WHERE m.ek_hash = ?1";
      }));
      s.BindBlob(1, ek_hash);
      if (!s.Step()) Fail(Status::NotFound("machine_unknown", "no machine is enrolled with this EK"));
      return ChallengeInputs{ReadMachine(s), ReadPool(s, kMachineColumnCount)};
    });
  });
}

Result<Machine> SqlStore::ConsumeSessionAndRecordSuccess(const AttestationRecord& record, const Token& token,
                                                         const std::optional<std::string>& tofu_pcrs_json,
                                                         int64_t now) {
  return Guard([&]() -> Result<Machine> {
    if (Status s = CheckSuccess(record, token, tofu_pcrs_json); !s.ok()) return s;
    return db_->WriteRerunnable([&](Connection& c) {
      ConsumeRecordSessionIn(c, record, now);
      return RecordSuccessIn(c, record, token, tofu_pcrs_json);
    });
  });
}

Status SqlStore::ConsumeSessionAndRecordFailure(const AttestationRecord& record, int64_t now) {
  return Guard([&]() -> Status {
    if (Status s = CheckFailure(record); !s.ok()) return s;
    db_->WriteRerunnable([&](Connection& c) {
      ConsumeRecordSessionIn(c, record, now);
      RecordFailureIn(c, record, db_->options().max_failures_per_machine);
      return true;
    });
    return Status::Ok();
  });
}

Result<AttestationRecord> SqlStore::LastSuccessfulAttestation(int64_t machine_id) {
  return Guard([&]() -> Result<AttestationRecord> {
    return db_->Read([&](Connection& c) -> AttestationRecord {
      auto last = LastSuccessIn(c, machine_id);
      if (!last) Fail(Status::NotFound("attestation_unknown", "no successful attestation on record"));
      return std::move(*last);
    });
  });
}

Result<std::vector<AttestationRecord>> SqlStore::RecentFailures(int limit) {
  return Guard([&]() -> Result<std::vector<AttestationRecord>> {
    return db_->Read([&](Connection& c) {
      static const std::string sql = "SELECT " + std::string(kAttestationColumns) + kAttestationFrom +
                                     "WHERE a.verdict = 'refused' ORDER BY a.id DESC LIMIT ?1";
      Stmt s = c.Prepare(sql);
      s.BindInt(1, std::clamp(limit, 1, 10000));
      std::vector<AttestationRecord> out;
      while (s.Step()) out.push_back(ReadAttestation(s));
      return out;
    });
  });
}

}  // namespace rackgate::storage
