// The fleet's CA rotation record (docs/operations.md, "Rotating the
// appliance CA"): one row per kind while a rotation runs, each stage change
// under one audit row.
#include <optional>
#include <string>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// A CA certificate as PEM, and its fingerprint: bounded so that a careless
// caller cannot grow the row (a P-256 CA is under 1 KiB).
constexpr size_t kMaxCaPem = 16 * 1024;
constexpr size_t kFingerprintHex = 64;

void CheckKind(const std::string& kind) {
  if (kind != kCaKindAppliance) Fail(Status::InvalidArgument("field_invalid", "a CA rotation's kind is appliance"));
}

std::optional<CaRotation> LoadRotation(Connection& c, const std::string& kind) {
  Stmt s = c.Prepare(
      "SELECT kind, stage, current_pem, current_sha256, next_pem, next_sha256, prepared_at, switched_at "
      "FROM ca_rotations WHERE kind = ?1");
  s.BindText(1, kind);
  if (!s.Step()) return std::nullopt;
  CaRotation r;
  r.kind = s.Text(0);
  r.stage = s.Text(1);
  r.current_pem = s.Text(2);
  r.current_sha256 = s.Text(3);
  r.next_pem = s.Text(4);
  r.next_sha256 = s.Text(5);
  r.prepared_at = s.Int(6);
  r.switched_at = s.OptInt(7);
  return r;
}

// The record a switch or retire changes; refused when none runs or when the
// caller holds another next CA than the recorded one (the change is bound
// to the CA it was decided for).
CaRotation MustRotation(Connection& c, const std::string& kind, const std::string& next_sha256) {
  std::optional<CaRotation> r = LoadRotation(c, kind);
  if (!r) Fail(Status::InvalidArgument("ca_rotation_none", "no " + kind + " CA rotation is in progress"));
  if (r->next_sha256 != next_sha256) {
    Fail(Status::InvalidArgument("ca_next_mismatch", "the next CA here (sha256 " + next_sha256 +
                                                         ") is not the one the rotation prepared (sha256 " +
                                                         r->next_sha256 + ")"));
  }
  return *r;
}

json RotationDetail(const std::string& detail_json, const CaRotation& r) {
  json detail = DetailObject("a CA rotation's audit detail", detail_json);
  detail["kind"] = r.kind;
  detail["current_sha256"] = r.current_sha256;
  detail["next_sha256"] = r.next_sha256;
  return detail;
}

}  // namespace

Result<std::optional<CaRotation>> SqlStore::GetCaRotation(const std::string& kind) {
  return Guard([&]() -> Result<std::optional<CaRotation>> {
    CheckKind(kind);
    return db_->Read([&](Connection& c) { return LoadRotation(c, kind); });
  });
}

Result<CaRotation> SqlStore::PrepareCaRotation(const CaRotation& rotation, const std::string& detail_json,
                                               const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<CaRotation> {
    CheckKind(rotation.kind);
    CheckActor(actor);
    CheckSize("current_pem", rotation.current_pem.size(), 1, kMaxCaPem);
    CheckSize("next_pem", rotation.next_pem.size(), 1, kMaxCaPem);
    CheckSize("current_sha256", rotation.current_sha256.size(), kFingerprintHex, kFingerprintHex);
    CheckSize("next_sha256", rotation.next_sha256.size(), kFingerprintHex, kFingerprintHex);
    if (rotation.current_sha256 == rotation.next_sha256) {
      return Status::InvalidArgument("field_invalid", "the next CA is the current one");
    }
    CaRotation r = rotation;
    r.stage = kCaStagePrepared;
    r.prepared_at = now;
    r.switched_at = std::nullopt;
    const json detail = RotationDetail(detail_json, r);
    return db_->Write([&](Connection& c) -> CaRotation {
      if (auto running = LoadRotation(c, r.kind)) {
        Fail(Status::InvalidArgument("ca_rotation_in_progress",
                                     "an " + r.kind + " CA rotation is " + running->stage + " already (next CA sha256 " +
                                         running->next_sha256 + ")"));
      }
      c.Prepare(
           "INSERT INTO ca_rotations (kind, stage, current_pem, current_sha256, next_pem, next_sha256, prepared_at, "
           "switched_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL)")
          .BindText(1, r.kind)
          .BindText(2, r.stage)
          .BindText(3, r.current_pem)
          .BindText(4, r.current_sha256)
          .BindText(5, r.next_pem)
          .BindText(6, r.next_sha256)
          .BindInt(7, r.prepared_at)
          .Run();
      WriteAudit(c, actor, now, {"ca_rotation_prepared", nullptr, std::nullopt, std::nullopt, detail});
      return r;
    });
  });
}

Result<CaRotation> SqlStore::SwitchCaRotation(const std::string& kind, const std::string& next_sha256,
                                              const std::string& detail_json, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<CaRotation> {
    CheckKind(kind);
    CheckActor(actor);
    return db_->Write([&](Connection& c) -> CaRotation {
      CaRotation r = MustRotation(c, kind, next_sha256);
      if (!r.switched_at) r.switched_at = now;
      r.stage = kCaStageSwitched;
      c.Prepare("UPDATE ca_rotations SET stage = ?2, switched_at = ?3 WHERE kind = ?1")
          .BindText(1, kind)
          .BindText(2, r.stage)
          .BindInt(3, *r.switched_at)
          .Run();
      WriteAudit(c, actor, now,
                 {"ca_rotation_switched", nullptr, std::nullopt, std::nullopt, RotationDetail(detail_json, r)});
      return r;
    });
  });
}

Status SqlStore::RetireCaRotation(const std::string& kind, const std::string& next_sha256,
                                  const std::string& detail_json, const Actor& actor, int64_t now) {
  return Guard([&]() -> Status {
    CheckKind(kind);
    CheckActor(actor);
    db_->Write([&](Connection& c) {
      CaRotation r = MustRotation(c, kind, next_sha256);
      if (r.stage != kCaStageSwitched) {
        Fail(Status::InvalidArgument("ca_rotation_stage", "the " + kind + " CA rotation is " + r.stage +
                                                              "; retire comes after switch"));
      }
      c.Prepare("DELETE FROM ca_rotations WHERE kind = ?1").BindText(1, kind).Run();
      WriteAudit(c, actor, now,
                 {"ca_rotation_retired", nullptr, std::nullopt, std::nullopt, RotationDetail(detail_json, r)});
    });
    return Status::Ok();
  });
}

}  // namespace rackgate::storage
