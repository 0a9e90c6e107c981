// Attestation sessions (single-use challenges) and bearer tokens.
#include <algorithm>
#include <string>
#include <utility>

#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

Status SqlStore::CreateSession(const Session& session) {
  return Guard([&]() -> Status {
    if (Status s = CheckSession(session); !s.ok()) return s;
    db_->WriteRerunnable([&](Connection& c) {
      // One statement: inserted only for a known machine and a free id; why
      // not is asked only when it was not.
      {
        Stmt s = c.Prepare(
            "INSERT INTO sessions (id, machine_id, nonce, secret_hash, ak_public, ak_name, pcr_selection, "
            "created_at, expires_at) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 "
            "WHERE EXISTS (SELECT 1 FROM machines WHERE id = ?2) ON CONFLICT (id) DO NOTHING");
        s.BindText(1, session.id)
            .BindInt(2, session.machine_id)
            .BindBlob(3, session.nonce)
            .BindBlob(4, session.secret_hash)
            .BindBlob(5, session.ak_public)
            .BindBlob(6, session.ak_name)
            .BindText(7, session.pcr_selection)
            .BindInt(8, session.created_at)
            .BindInt(9, session.expires_at)
            .Run();
        if (c.Changes() == 1) return true;
      }
      Stmt known = c.Prepare("SELECT 1 FROM machines WHERE id = ?1");
      known.BindInt(1, session.machine_id);
      if (!known.Step()) {
        Fail(Status::NotFound("machine_unknown", "no machine with id " + std::to_string(session.machine_id)));
      }
      Fail(Status::InvalidArgument("field_invalid", "the session id is taken"));
    });
    return Status::Ok();
  });
}

Session ReadSession(Connection& c, const std::string& id) {
  static const std::string sql = "SELECT " + std::string(kSessionColumns) + " FROM sessions WHERE id = ?1";
  Stmt s = c.Prepare(sql);
  s.BindText(1, id);
  if (!s.Step()) Fail(Status::NotFound("session_unknown", "unknown session"));
  return ReadSessionRow(s);
}

void CheckSessionUsable(const Session& session, int64_t now) {
  if (session.used_at) Fail(Status::VerificationFailed("session_used", "the session was already used"));
  if (now >= session.expires_at) Fail(Status::VerificationFailed("session_expired", "the session expired"));
}

Session ConsumeSessionIn(Connection& c, const std::string& id, int64_t now) {
  // SECURITY: a nonce is used once. The check and the mark are one write
  // transaction under the writer lock, so two racing requests cannot both
  // see the session unused.
  if (id.empty() || id.size() > kMaxSessionId) Fail(Status::NotFound("session_unknown", "unknown session"));
  // One statement when the session is usable; why not is asked only when
  // it was not.
  {
    static const std::string sql =
        "UPDATE sessions SET used_at = ?2 WHERE id = ?1 AND used_at IS NULL AND expires_at > ?2 RETURNING " +
        std::string(kSessionColumns);
    Stmt s = c.Prepare(sql);
    s.BindText(1, id).BindInt(2, now);
    if (s.Step()) return ReadSessionRow(s);
  }
  CheckSessionUsable(ReadSession(c, id), now);
  Fail(Status::VerificationFailed("session_used", "the session was already used"));
}

Result<Session> SqlStore::ConsumeSession(const std::string& id, int64_t now) {
  return Guard([&]() -> Result<Session> {
    if (id.empty() || id.size() > kMaxSessionId) return Status::NotFound("session_unknown", "unknown session");
    return db_->WriteRerunnable([&](Connection& c) { return ConsumeSessionIn(c, id, now); });
  });
}

Result<Bearer> SqlStore::LookupToken(const Bytes& token_hash, int64_t now) {
  return Guard([&]() -> Result<Bearer> {
    if (token_hash.empty() || token_hash.size() > kMaxHash) return Status::NotFound("token_unknown", "unknown token");
    // The lookup is by the hash of a random token: timing reveals nothing
    // about a valid token.
    // One statement: the token, its machine and the machine's pool.
    return db_->ReadOne([&](Connection& c) -> Bearer {
      Stmt s = c.Prepare(PerDialect(c, [](Dialect d) {
        return "SELECT t.hash, t.machine_id, t.session_id, t.issued_at, t.expires_at, t.nonce, t.ak_public, "
               "t.certify_nonce_used_at, " +
               MachineColumns(d) + ", " + Qualified("p", kPoolColumns) +
               " FROM tokens t JOIN machines m ON m.id = t.machine_id JOIN pools p ON p.name = m.pool "
               "WHERE t.hash = ?1";
      }));
      s.BindBlob(1, token_hash);
      if (!s.Step()) Fail(Status::NotFound("token_unknown", "unknown token"));
      Token t{s.Blob(0), s.Int(1), s.Text(2), s.Int(3), s.Int(4), s.Blob(5), s.Blob(6), s.OptInt(7)};
      constexpr int kTokenColumnCount = 8;
      Machine m = ReadMachine(s, kTokenColumnCount);
      // SECURITY: revocation wins over everything, at once.
      if (m.state == MachineState::kRevoked) Fail(Status::VerificationFailed("token_revoked", "the machine is revoked"));
      if (now >= t.expires_at) Fail(Status::VerificationFailed("token_expired", "the token expired"));
      Pool pool = ReadPool(s, kTokenColumnCount + kMachineColumnCount);
      return Bearer{std::move(m), std::move(t), std::move(pool)};
    });
  });
}

void ConsumeCertifyNonceIn(Connection& c, const Bytes& token_hash, int64_t now) {
  Stmt s = c.Prepare("UPDATE tokens SET certify_nonce_used_at = ?2 WHERE hash = ?1 AND certify_nonce_used_at IS NULL");
  s.BindBlob(1, token_hash).BindInt(2, now).Run();
  if (c.Changes() == 1) return;
  Stmt known = c.Prepare("SELECT 1 FROM tokens WHERE hash = ?1");
  known.BindBlob(1, token_hash);
  if (!known.Step()) Fail(Status::NotFound("token_unknown", "unknown token"));
  Fail(Status::VerificationFailed("certify_nonce_used",
                                  "this attestation's nonce already certified a key for a CSR; attest again"));
}

Status SqlStore::ConsumeCertifyNonce(const Bytes& token_hash, int64_t now) {
  return Guard([&]() -> Status {
    if (token_hash.empty() || token_hash.size() > kMaxHash) return Status::NotFound("token_unknown", "unknown token");
    // SECURITY: one nonce, one use (docs/csr.md). The check and the mark are
    // one statement in one write transaction under the writer lock: of two
    // racing CSRs certified over the same nonce, exactly one gets it.
    db_->WriteRerunnable([&](Connection& c) {
      ConsumeCertifyNonceIn(c, token_hash, now);
      return true;
    });
    return Status::Ok();
  });
}

Result<PurgeCounts> SqlStore::PurgeExpired(int64_t now, int batch) {
  return Guard([&]() -> Result<PurgeCounts> {
    const int64_t limit = std::clamp(batch, 1, 100000);
    return db_->Write([&](Connection& c) {
      PurgeCounts counts;
      {
        Stmt s = c.Prepare(
            "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE expires_at <= ?1 LIMIT ?2)");
        s.BindInt(1, now).BindInt(2, limit).Run();
        counts.sessions = c.Changes();
      }
      Stmt s = c.Prepare("DELETE FROM tokens WHERE hash IN (SELECT hash FROM tokens WHERE expires_at <= ?1 LIMIT ?2)");
      s.BindInt(1, now).BindInt(2, limit).Run();
      counts.tokens = c.Changes();
      return counts;
    });
  });
}

Result<int64_t> SqlStore::CountOpenSessions(int64_t now) {
  return Guard([&]() -> Result<int64_t> {
    return db_->Read([&](Connection& c) -> int64_t {
      Stmt s = c.Prepare("SELECT count(*) FROM sessions WHERE used_at IS NULL AND expires_at > ?1");
      s.BindInt(1, now);
      return s.Step() ? s.Int(0) : 0;
    });
  });
}

}  // namespace rackgate::storage
