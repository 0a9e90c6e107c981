// Boot policy observation (docs/policy.md, "Observe"): a pool's mode and
// policy changed together under one audit row, and each machine's latest
// observed boot, which `policy propose` reads.
#include <string>
#include <vector>

#include "base/sha256.h"
#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// wire::kMaxEventLog, kept here so that the store never grows with a
// careless caller.
constexpr size_t kMaxObservedLog = 16u << 20;

std::string PolicyDigest(const std::optional<std::string>& text) {
  if (!text) return "";
  return sha256::Hex(sha256::Digest({reinterpret_cast<const uint8_t*>(text->data()), text->size()}));
}

bool IsMode(const std::string& m) { return m == kPolicyModeEnforce || m == kPolicyModeObserve; }

constexpr char kObservationSelect[] =
    "SELECT o.machine_id, m.hostname, o.pool, m.tpm_manufacturer, m.tpm_model, o.at, o.event_log, o.pcrs_json, "
    "o.verdict, o.violations_json FROM boot_observations o JOIN machines m ON m.id = o.machine_id ";

BootObservation ReadObservation(const Stmt& s) {
  BootObservation o;
  o.machine_id = s.Int(0);
  o.hostname = s.Text(1);
  o.pool = s.Text(2);
  o.tpm_manufacturer = s.Text(3);
  o.tpm_model = s.Text(4);
  o.at = s.Int(5);
  o.event_log = s.Blob(6);
  o.pcrs_json = s.Text(7);
  o.verdict = s.Text(8);
  o.violations = StringList(s.Text(9));
  return o;
}

}  // namespace

Result<Pool> SqlStore::SetPoolBootPolicy(const PoolPolicyChange& change, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Pool> {
    CheckPoolName(change.pool);
    CheckActor(actor);
    if (change.mode && !IsMode(*change.mode)) {
      return Status::InvalidArgument("field_invalid", "a pool's boot policy mode is enforce or observe");
    }
    if (change.boot_policy_json) CheckOptJson("boot_policy_json", *change.boot_policy_json);
    const json extra = DetailObject("a policy change's audit detail", change.audit_detail_json, kMaxJson);
    return db_->Write([&](Connection& c) -> Pool {
      std::optional<Pool> old = LoadPool(c, change.pool);
      if (!old) Fail(Status::NotFound("pool_unknown", "no pool named '" + change.pool + "'"));
      const std::optional<std::string> policy = change.boot_policy_json ? *change.boot_policy_json
                                                                        : old->boot_policy_json;
      const std::string mode = change.mode.value_or(old->boot_policy_mode);
      if (policy == old->boot_policy_json && mode == old->boot_policy_mode) return *old;
      c.Prepare("UPDATE pools SET boot_policy_json = ?2, boot_policy_mode = ?3, updated_at = ?4 WHERE name = ?1")
          .BindText(1, change.pool)
          .BindOptText(2, policy)
          .BindText(3, mode)
          .BindInt(4, now)
          .Run();
      json detail = extra;
      detail["pool"] = change.pool;
      detail["mode_from"] = old->boot_policy_mode;
      detail["mode_to"] = mode;
      // Digests, not texts: the audit log names which policy was in force;
      // the texts are the pool's (and `policy show`'s) to hold.
      detail["policy_from_sha256"] = PolicyDigest(old->boot_policy_json);
      detail["policy_to_sha256"] = PolicyDigest(policy);
      WriteAudit(c, actor, now, {"pool_policy", nullptr, std::nullopt, std::nullopt, detail});
      auto loaded = LoadPool(c, change.pool);
      if (!loaded) Fail(Status::IoError("db_error", "pool vanished inside its transaction"));
      return *loaded;
    });
  });
}

Status SqlStore::RecordBootObservation(const BootObservation& o) {
  return Guard([&]() -> Status {
    CheckPoolName(o.pool);
    CheckSize("event log", o.event_log.size(), 0, kMaxObservedLog);
    CheckSize("pcrs_json", o.pcrs_json.size(), 2, kMaxJson);
    if (o.verdict != "pass" && o.verdict != "fail" && o.verdict != "none") {
      return Status::InvalidArgument("field_invalid", "an observation's verdict is pass, fail or none");
    }
    CheckSize("violations", o.violations.size(), 0, kMaxReasons);
    json violations = json::array();
    for (const auto& v : o.violations) {
      CheckSize("violation", v.size(), 1, kMaxReason);
      violations.push_back(v);
    }
    db_->Write([&](Connection& c) {
      MustMachineById(c, o.machine_id);
      c.Prepare(
           "INSERT INTO boot_observations (machine_id, pool, at, event_log, pcrs_json, verdict, violations_json) "
           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (machine_id) DO UPDATE SET pool = excluded.pool, "
           "at = excluded.at, event_log = excluded.event_log, pcrs_json = excluded.pcrs_json, "
           "verdict = excluded.verdict, violations_json = excluded.violations_json")
          .BindInt(1, o.machine_id)
          .BindText(2, o.pool)
          .BindInt(3, o.at)
          .BindBlob(4, o.event_log)
          .BindText(5, o.pcrs_json)
          .BindText(6, o.verdict)
          .BindText(7, violations.dump())
          .Run();
    });
    return Status::Ok();
  });
}

Result<std::vector<BootObservation>> SqlStore::ListBootObservations(const std::string& pool) {
  return Guard([&]() -> Result<std::vector<BootObservation>> {
    CheckPoolName(pool);
    return db_->Read([&](Connection& c) {
      // A machine moved to another pool since it was observed is not this
      // pool's evidence.
      Stmt s = c.Prepare(std::string(kObservationSelect) + "WHERE o.pool = ?1 AND m.pool = ?1 ORDER BY m.hostname");
      s.BindText(1, pool);
      std::vector<BootObservation> out;
      while (s.Step()) out.push_back(ReadObservation(s));
      return out;
    });
  });
}

}  // namespace rackgate::storage
