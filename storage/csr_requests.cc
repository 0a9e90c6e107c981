// Manual CSR approval: the CSRs that wait for an operator, and the decisions.
#include <algorithm>
#include <string>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"
#include "base/hex.h"
#include "base/text.h"

namespace rackgate::storage {

namespace {

// `current` is whether the row's epoch is still its machine's.
constexpr char kCsrRequestSelect[] =
    "SELECT r.id, r.machine_id, m.hostname, r.kind, r.public_key_sha256, r.csr_pem, r.usages_json, "
    "r.tpm_resident, r.state, r.deny_reason, r.decided_by, r.created_at, r.decided_at, "
    "r.attest_epoch = m.attest_epoch "
    "FROM csr_requests r JOIN machines m ON m.id = r.machine_id ";

constexpr size_t kMaxCsrPem = 64 * 1024;
constexpr size_t kMaxUsages = 16;

CsrApprovalRequest ReadCsrRequest(const Stmt& s) {
  CsrApprovalRequest r;
  r.id = s.Int(0);
  r.machine_id = s.Int(1);
  r.hostname = s.Text(2);
  r.kind = s.Text(3);
  r.public_key_sha256 = s.Blob(4);
  r.csr_pem = s.Text(5);
  r.usages = StringList(s.Text(6));
  r.tpm_resident = s.Int(7) != 0;
  r.state = s.Text(8);
  r.deny_reason = s.Text(9);
  r.decided_by = s.Text(10);
  r.created_at = s.Int(11);
  r.decided_at = s.OptInt(12);
  r.current = s.Int(13) != 0;
  return r;
}

CsrApprovalRequest MustCsrRequest(Connection& c, int64_t id) {
  Stmt s = c.Prepare(std::string(kCsrRequestSelect) + "WHERE r.id = ?1");
  s.BindInt(1, id);
  if (!s.Step()) Fail(Status::NotFound("csr_request_unknown", "no CSR request " + std::to_string(id)));
  return ReadCsrRequest(s);
}

int64_t Count(Connection& c, const std::string& sql, const std::function<void(Stmt&)>& bind) {
  Stmt s = c.Prepare(sql);
  bind(s);
  return s.Step() ? s.Int(0) : 0;
}

AuditDetail Detail(const CsrApprovalRequest& r) {
  AuditDetail d;
  d.Int("id", r.id)
      .Text("kind", r.kind)
      .Text("public_key_sha256", hex::Encode(r.public_key_sha256))
      .Bool("tpm_resident", r.tpm_resident);
  return d;
}

}  // namespace

Result<CsrApprovalRequest> SqlStore::QueueCsrRequest(const CsrApprovalRequest& r, const CsrQueueLimits& limits,
                                                        const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<CsrApprovalRequest> {
    CheckActor(actor);
    if (r.kind != kCertClient && r.kind != kCertServing) {
      return Status::InvalidArgument("field_invalid", "a CSR request is client or serving");
    }
    CheckSize("public_key_sha256", r.public_key_sha256.size(), 1, kMaxHash);
    CheckSize("csr_pem", r.csr_pem.size(), 1, kMaxCsrPem);
    CheckSize("usages", r.usages.size(), 0, kMaxUsages);
    for (const auto& u : r.usages) CheckSize("usages[]", u.size(), 1, 64);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, r.machine_id);
      const int64_t epoch = m.attest_epoch;
      {
        Stmt s = c.Prepare(std::string(kCsrRequestSelect) +
                           "WHERE r.machine_id = ?1 AND r.attest_epoch = ?2 AND r.kind = ?3 AND "
                           "r.public_key_sha256 = ?4");
        s.BindInt(1, m.id).BindInt(2, epoch).BindText(3, r.kind).BindBlob(4, r.public_key_sha256);
        // The same key asks again (the agent retries): the same request,
        // whatever was decided; no new row.
        if (s.Step()) return ReadCsrRequest(s);
      }
      // SECURITY: bounded, so a machine (or many) cycling keys cannot fill
      // the disk or the operator's list. Stale epochs do not count: a reset
      // machine starts over.
      const int64_t mine = Count(
          c,
          "SELECT count(*) FROM csr_requests WHERE machine_id = ?1 AND attest_epoch = ?2 AND state = 'waiting'",
          [&](Stmt& s) { s.BindInt(1, m.id).BindInt(2, epoch); });
      if (mine >= limits.max_waiting_per_machine) {
        Fail(Status::Unsupported("csr_flood_machine", "too many CSRs of this machine wait for an operator"));
      }
      const int64_t all = Count(c,
                                "SELECT count(*) FROM csr_requests r JOIN machines m ON m.id = r.machine_id "
                                "WHERE r.state = 'waiting' AND r.attest_epoch = m.attest_epoch",
                                [](Stmt&) {});
      if (all >= limits.max_waiting) {
        Fail(Status::Unsupported("csr_flood", "too many CSRs wait for an operator; come back later"));
      }
      int64_t id = 0;
      {
        Stmt s = c.Prepare(
            "INSERT INTO csr_requests (machine_id, attest_epoch, kind, public_key_sha256, csr_pem, usages_json, "
            "tpm_resident, state, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'waiting', ?8) RETURNING id");
        s.BindInt(1, m.id)
            .BindInt(2, epoch)
            .BindText(3, r.kind)
            .BindBlob(4, r.public_key_sha256)
            .BindText(5, r.csr_pem)
            .BindText(6, Dump(json(r.usages)))
            .BindInt(7, r.tpm_resident ? 1 : 0)
            .BindInt(8, now);
        if (!s.Step()) Fail(Status::IoError("db_error", "INSERT INTO csr_requests returned no id"));
        id = s.Int(0);
      }
      CsrApprovalRequest out = MustCsrRequest(c, id);
      WriteAudit(c, actor, now, {"csr_waiting", &m, std::nullopt, std::nullopt, DetailJson(Detail(out))});
      return out;
    });
  });
}

Result<CsrApprovalRequest> SqlStore::DecideCsrRequest(int64_t id, bool approve, const std::string& deny_reason,
                                                         const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<CsrApprovalRequest> {
    CheckActor(actor);
    if (!approve) {
      CheckSize("deny_reason", deny_reason.size(), 1, kMaxReason);
      // The machine is told the reason: printable ASCII and spaces only.
      if (!text::IsPrintableAscii(deny_reason)) {
        return Status::InvalidArgument("field_invalid", "a deny reason is printable ASCII");
      }
    }
    return db_->Write([&](Connection& c) {
      CsrApprovalRequest r = MustCsrRequest(c, id);
      if (r.state != kCsrWaiting) {
        Fail(Status::InvalidArgument("state_conflict",
                                     "CSR request " + std::to_string(id) + " is " + r.state + ", not waiting"));
      }
      {
        Stmt s = c.Prepare(
            "UPDATE csr_requests SET state = ?2, deny_reason = ?3, decided_by = ?4, decided_at = ?5 WHERE id = ?1");
        s.BindInt(1, id)
            .BindText(2, approve ? kCsrApproved : kCsrDenied)
            .BindText(3, approve ? std::string() : deny_reason)
            .BindText(4, actor.name)
            .BindInt(5, now)
            .Run();
      }
      CsrApprovalRequest out = MustCsrRequest(c, id);
      Machine m = MustMachineById(c, out.machine_id);
      AuditDetail detail = Detail(out);
      if (!approve) detail.Text("reason", deny_reason);
      WriteAudit(c, actor, now,
                 {approve ? "csr_approved" : "csr_denied", &m, std::nullopt, std::nullopt, DetailJson(detail)});
      return out;
    });
  });
}

Result<std::vector<CsrApprovalRequest>> SqlStore::ListCsrRequests(bool all, int limit) {
  return Guard([&]() -> Result<std::vector<CsrApprovalRequest>> {
    return db_->Read([&](Connection& c) {
      Stmt s = c.Prepare(std::string(kCsrRequestSelect) +
                         (all ? "ORDER BY r.id DESC LIMIT ?1"
                              : "WHERE r.state = 'waiting' AND r.attest_epoch = m.attest_epoch "
                                "ORDER BY r.id LIMIT ?1"));
      s.BindInt(1, std::clamp(limit, 1, 100000));
      std::vector<CsrApprovalRequest> out;
      while (s.Step()) out.push_back(ReadCsrRequest(s));
      return out;
    });
  });
}

}  // namespace rackgate::storage
