// Enrollment: one machine (Enroll) or an inventory in one transaction (Import),
// under the same rules: the EK is the identity; and the approval of a machine
// discovery recorded (Approve with changes).
#include <optional>
#include <string>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sqlite_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// Parameters ?2..?12 of the enrollment's INSERT and of the UPDATE that
// replaces an EK: the same columns in the same places, so one binder serves
// both (?1 is the hostname for one, the machine id for the other).
Stmt& BindEnrollment(Stmt& s, const Enrollment& in, int64_t now) {
  return s.BindText(2, in.pool)
      .BindText(3, StateName(in.state))
      .BindBlob(4, in.ek_public)
      .BindBlob(5, in.ek_hash)
      .BindOptBlob(6, in.ek_certificate)
      .BindText(7, in.tpm_manufacturer)
      .BindText(8, in.tpm_model)
      .BindText(9, in.tpm_version)
      .BindOptText(10, in.policy_json)
      .BindInt(11, now)
      .BindText(12, in.vars_json);
}

// Enroll's rules (store.h). Sets *changed when a row was written.
Machine EnrollIn(Connection& c, const Enrollment& in, const Actor& actor, bool replace_ek, int64_t now,
                 bool* changed) {
  CheckEnrollment(in);
  *changed = false;
  const std::vector<Address> addresses = NormalizeAddresses(in.addresses);
  if (!PoolExists(c, in.pool)) Fail(Status::NotFound("pool_unknown", "no pool named '" + in.pool + "'"));

  std::optional<Machine> by_host = MachineByHostname(c, in.hostname);
  std::optional<int64_t> ek_owner;
  {
    Stmt s = c.Prepare("SELECT id FROM machines WHERE ek_hash = ?1");
    s.BindBlob(1, in.ek_hash);
    if (s.Step()) ek_owner = s.Int(0);
  }
  // SECURITY: the EK is the machine's identity. One EK, one hostname; the
  // message does not name the hostname it is enrolled under.
  if (ek_owner && (!by_host || *ek_owner != by_host->id)) {
    Fail(Status::InvalidArgument("ek_in_use", "this EK is already enrolled under another hostname"));
  }

  if (!by_host) {
    {
      Stmt s = c.Prepare(
          "INSERT INTO machines (hostname, pool, state, ek_public, ek_hash, ek_certificate, tpm_manufacturer, "
          "tpm_model, tpm_version, policy_json, created_at, updated_at, vars_json) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12)");
      BindEnrollment(s.BindText(1, in.hostname), in, now).Run();
    }
    const int64_t id = c.LastInsertRowid();
    ReplaceAddresses(c, id, addresses);
    Machine m = MustMachineById(c, id);
    WriteAudit(c, actor, now,
               {"enroll", &m, std::nullopt, in.state,
                json{{"pool", in.pool},
                     {"ek_hash", Hex(in.ek_hash)},
                     {"ek_certificate", in.ek_certificate.has_value()},
                     {"addresses", addresses.size()}}});
    *changed = true;
    return m;
  }

  Machine old = std::move(*by_host);
  if (old.ek_hash != in.ek_hash) {
    // SECURITY: an enrolled EK is immutable. A new TPM under an old name is a
    // new identity: only an explicit, audited replacement, and it starts over.
    if (!replace_ek) {
      Fail(Status::InvalidArgument("ek_conflict", "'" + in.hostname +
                                                      "' is enrolled with another EK; replacing it needs replace_ek"));
    }
    {
      Stmt s = c.Prepare(
          "UPDATE machines SET pool = ?2, state = ?3, ek_public = ?4, ek_hash = ?5, ek_certificate = ?6, "
          "tpm_manufacturer = ?7, tpm_model = ?8, tpm_version = ?9, policy_json = ?10, tofu_pcrs_json = NULL, "
          "client_cert_issued_at = NULL, attest_epoch = attest_epoch + 1, updated_at = ?11, vars_json = ?12 "
          "WHERE id = ?1");
      BindEnrollment(s.BindInt(1, old.id), in, now).Run();
    }
    ReplaceAddresses(c, old.id, addresses);
    auto [sessions, tokens] = DropCredentials(c, old.id);
    Machine m = MustMachineById(c, old.id);
    WriteAudit(c, actor, now,
               {"replace_ek", &m, old.state, in.state,
                json{{"old_ek_hash", Hex(old.ek_hash)},
                     {"new_ek_hash", Hex(in.ek_hash)},
                     {"pool", in.pool},
                     {"sessions_dropped", sessions},
                     {"tokens_dropped", tokens}}});
    *changed = true;
    return m;
  }

  // Same hostname, same EK: the enrollment is the desired record.
  std::vector<std::string> what;
  if (old.pool != in.pool) what.push_back("pool");
  if (old.addresses != addresses) what.push_back("addresses");
  if (old.policy_json != in.policy_json) what.push_back("policy");
  if (old.vars_json != in.vars_json) what.push_back("vars");
  const bool new_cert = in.ek_certificate.has_value();
  if (new_cert && (old.ek_certificate != in.ek_certificate || old.tpm_manufacturer != in.tpm_manufacturer ||
                   old.tpm_model != in.tpm_model || old.tpm_version != in.tpm_version)) {
    what.push_back("ek_certificate");
  }
  MachineState state = old.state;
  if (old.state == MachineState::kPending && in.state == MachineState::kEnrolled) {
    state = MachineState::kEnrolled;
    what.push_back("state");
  }
  if (what.empty()) return old;
  {
    Stmt s = c.Prepare(
        "UPDATE machines SET pool = ?2, state = ?3, policy_json = ?4, "
        "ek_certificate = CASE WHEN ?5 THEN ?6 ELSE ek_certificate END, "
        "tpm_manufacturer = CASE WHEN ?5 THEN ?7 ELSE tpm_manufacturer END, "
        "tpm_model = CASE WHEN ?5 THEN ?8 ELSE tpm_model END, "
        "tpm_version = CASE WHEN ?5 THEN ?9 ELSE tpm_version END, "
        "updated_at = ?10, vars_json = ?11 WHERE id = ?1");
    s.BindInt(1, old.id)
        .BindText(2, in.pool)
        .BindText(3, StateName(state))
        .BindOptText(4, in.policy_json)
        .BindInt(5, new_cert ? 1 : 0)
        .BindOptBlob(6, in.ek_certificate)
        .BindText(7, in.tpm_manufacturer)
        .BindText(8, in.tpm_model)
        .BindText(9, in.tpm_version)
        .BindInt(10, now)
        .BindText(11, in.vars_json)
        .Run();
  }
  if (old.addresses != addresses) ReplaceAddresses(c, old.id, addresses);
  Machine m = MustMachineById(c, old.id);
  WriteAudit(c, actor, now, {"enroll_update", &m, old.state, state, json{{"changed", what}}});
  *changed = true;
  return m;
}

}  // namespace

Result<Machine> SqliteStore::Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckEnrollment(e);
    return db_->Write([&](Connection& c) {
      bool changed = false;
      return EnrollIn(c, e, actor, replace_ek, now, &changed);
    });
  });
}

Result<size_t> SqliteStore::Import(const std::vector<Enrollment>& rows, const Actor& actor, int64_t now,
                                   const ImportProgress& progress) {
  return Guard([&]() -> Result<size_t> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) {
      size_t changed_rows = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        bool changed = false;
        try {
          EnrollIn(c, rows[i], actor, /*replace_ek=*/false, now, &changed);
        } catch (const StoreError& err) {
          Fail(err.status().Annotate("row " + std::to_string(i) + " (" + rows[i].hostname + ")"));
        }
        if (changed) ++changed_rows;
        if (progress) progress(i + 1, rows.size());
      }
      if (!rows.empty()) {
        WriteAudit(c, actor, now,
                   {"import", nullptr, std::nullopt, std::nullopt,
                    json{{"rows", rows.size()}, {"changed", changed_rows}}});
      }
      return rows.size();
    });
  });
}

Result<Machine> SqliteStore::Approve(const std::string& hostname, const ApprovalChanges& changes, const Actor& actor,
                                     int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) {
      Machine old = MustMachineByHostname(c, hostname);
      if (old.state != MachineState::kPending) {
        Fail(Status::InvalidArgument("state_conflict", MachineIs(old) + ", not pending"));
      }
      // The machine as it will be, checked by enrollment's rules.
      Enrollment e;
      e.hostname = changes.hostname.value_or(old.hostname);
      e.pool = changes.pool.value_or(old.pool);
      e.ek_public = old.ek_public;
      e.ek_hash = old.ek_hash;
      e.ek_certificate = old.ek_certificate;
      e.addresses = changes.addresses.value_or(old.addresses);
      e.vars_json = changes.vars_json.value_or(old.vars_json);
      e.state = MachineState::kEnrolled;
      CheckEnrollment(e);
      const std::vector<Address> addresses = NormalizeAddresses(e.addresses);
      if (!PoolExists(c, e.pool)) Fail(Status::NotFound("pool_unknown", "no pool named '" + e.pool + "'"));
      // SECURITY: the hostname becomes the kubelet certificate's CN, so two
      // machines never share one; the refusal names the holder so the
      // operator can see which machine to rename or revoke.
      if (e.hostname != old.hostname) {
        if (auto holder = MachineByHostname(c, e.hostname)) {
          Fail(Status::InvalidArgument("hostname_taken", "'" + e.hostname + "' is already the hostname of a " +
                                                             std::string(StateName(holder->state)) +
                                                             " machine (ek " + Hex(holder->ek_hash).substr(0, 16) +
                                                             "); rename or revoke it first"));
        }
      }
      std::vector<std::string> what;
      if (e.hostname != old.hostname) what.push_back("hostname");
      if (e.pool != old.pool) what.push_back("pool");
      if (addresses != old.addresses) what.push_back("addresses");
      if (e.vars_json != old.vars_json) what.push_back("vars");
      {
        Stmt s = c.Prepare(
            "UPDATE machines SET hostname = ?2, pool = ?3, vars_json = ?4, state = ?5, updated_at = ?6 WHERE id = ?1");
        s.BindInt(1, old.id)
            .BindText(2, e.hostname)
            .BindText(3, e.pool)
            .BindText(4, e.vars_json)
            .BindText(5, StateName(MachineState::kEnrolled))
            .BindInt(6, now)
            .Run();
      }
      if (addresses != old.addresses) ReplaceAddresses(c, old.id, addresses);
      Machine m = MustMachineById(c, old.id);
      WriteAudit(c, actor, now,
                 {"approve", &m, old.state, m.state,
                  json{{"old_hostname", old.hostname},
                       {"hostname", m.hostname},
                       {"pool", m.pool},
                       {"addresses", addresses.size()},
                       {"changed", what}}});
      return m;
    });
  });
}

}  // namespace rackgate::storage
