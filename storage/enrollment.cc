// Enrollment: one machine (Enroll) or an inventory in one transaction (Import),
// under the same rules: the EK is the identity; and the approval of a machine
// discovery recorded (Approve with changes).
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"
#include "base/hex.h"

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

// The anchor relaxations the enrollment's EK certificate needed, named in
// its audit row (docs/ek-vendors.md): nothing when it needed none.
void AddEkRelaxations(const Enrollment& in, AuditDetail* detail) {
  if (in.ek_certificate && !in.ek_relaxations.empty()) detail->Texts("ek_relaxed", in.ek_relaxations);
}

// Enroll's merge: the enrollment as given, its addresses sorted, and the
// names of the fields that differ from the stored machine's. Vars and policy
// are opaque texts here, compared as texts. No words: Enroll answers the
// machine only.
Result<MergedEnrollment> AsGiven(const Enrollment& given, const Machine* stored, MachineState state) {
  MergedEnrollment out{given, {}, {}};
  out.enrollment.addresses = NormalizeAddresses(given.addresses);
  if (stored == nullptr) return out;
  const Enrollment& d = out.enrollment;
  const auto add = [&](bool differs, const char* field) {
    if (differs) out.changed.push_back(field);
  };
  add(stored->pool != d.pool, "pool");
  add(stored->addresses != d.addresses, "addresses");
  add(stored->vars_json != d.vars_json, "vars");
  add(stored->policy_json != d.policy_json, "policy");
  add(d.ek_certificate && (stored->ek_certificate != d.ek_certificate ||
                           stored->tpm_manufacturer != d.tpm_manufacturer || stored->tpm_model != d.tpm_model ||
                           stored->tpm_version != d.tpm_version),
      "ek_certificate");
  add(state != stored->state, "state");
  out.changes = out.changed;
  return out;
}

// The merge's answer for `given`, checked: it keeps the enrollment's
// identity (hostname, EK) and state, whatever it resolved.
MergedEnrollment Merge(const EnrollMerge& merge, size_t row, const Enrollment& given, const Machine* stored,
                       MachineState state) {
  Result<MergedEnrollment> merged = merge(row, stored, state);
  if (!merged.ok()) Fail(merged.status());
  MergedEnrollment out = std::move(merged).value();
  out.enrollment.hostname = given.hostname;
  out.enrollment.ek_public = given.ek_public;
  out.enrollment.ek_hash = given.ek_hash;
  out.enrollment.state = given.state;
  return out;
}

// EnrollMerged's rules (store.h), with the merge of row `row`.
// A hostname never enrolled: its row, its addresses and the "enroll" audit row.
EnrollOutcome EnrollNew(Connection& c, const Enrollment& in, const Actor& actor, int64_t now) {
  int64_t id = 0;
  {
    Stmt s = c.Prepare(
        "INSERT INTO machines (hostname, pool, state, ek_public, ek_hash, ek_certificate, tpm_manufacturer, "
        "tpm_model, tpm_version, policy_json, created_at, updated_at, vars_json) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12) RETURNING id");
    BindEnrollment(s.BindText(1, in.hostname), in, now);
    if (!s.Step()) Fail(Status::IoError("db_error", "INSERT INTO machines returned no id"));
    id = s.Int(0);
  }
  ReplaceAddresses(c, id, in.addresses);
  Machine m = MustMachineById(c, id);
  AuditDetail detail;
  detail.Text("pool", in.pool)
      .Text("ek_hash", hex::Encode(in.ek_hash))
      .Bool("ek_certificate", in.ek_certificate.has_value())
      .Int("addresses", static_cast<int64_t>(in.addresses.size()));
  AddEkRelaxations(in, &detail);
  WriteAudit(c, actor, now, {"enroll", &m, std::nullopt, in.state, DetailJson(detail)});
  return {std::move(m), std::string(kEnrollCreated), {}};
}

EnrollOutcome EnrollIn(Connection& c, const Enrollment& given, const EnrollMerge& merge, size_t row,
                       const Actor& actor, bool replace_ek, int64_t now) {
  std::optional<Machine> by_host = MachineByHostname(c, given.hostname);
  const Machine* old_ptr = by_host ? &*by_host : nullptr;
  // The state the machine keeps (Enroll's rules): an EK replacement says its
  // own; the same EK moves pending -> enrolled when enrolled as enrolled.
  MachineState state = old_ptr ? old_ptr->state : given.state;
  if (old_ptr && old_ptr->ek_hash == given.ek_hash && old_ptr->state == MachineState::kPending &&
      given.state == MachineState::kEnrolled) {
    state = MachineState::kEnrolled;
  }
  MergedEnrollment merged = Merge(merge, row, given, old_ptr, state);
  const Enrollment& in = merged.enrollment;
  CheckEnrollment(in);
  if (!PoolExists(c, in.pool)) {
    Fail(Status::NotFound("pool_unknown", "no pool named '" + in.pool + "': create it first (`rackgatectl pool put " +
                                              in.pool + "`)"));
  }

  std::optional<Machine> ek_owner;
  {
    Stmt s = c.Prepare("SELECT id FROM machines WHERE ek_hash = ?1");
    s.BindBlob(1, in.ek_hash);
    if (s.Step()) ek_owner = MustMachineById(c, s.Int(0));
  }
  // SECURITY: the EK is the machine's identity. One EK, one hostname. The
  // admin API is the only caller that sees this message (discovery enrolls
  // unknown EKs only), so it may name the holder: the operator needs it to
  // free the EK.
  if (ek_owner && (!by_host || ek_owner->id != by_host->id)) {
    Fail(Status::InvalidArgument(
        "ek_in_use", "this EK is enrolled as " + ek_owner->hostname + " (state " +
                         std::string(StateName(ek_owner->state)) + "): delete it (`rackgatectl delete " +
                         ek_owner->hostname + "`) or rename it (`rackgatectl rename " + ek_owner->hostname + " " +
                         in.hostname + "`)"));
  }

  if (!by_host) return EnrollNew(c, in, actor, now);

  Machine old = std::move(*by_host);
  if (old.ek_hash != in.ek_hash) {
    // SECURITY: an enrolled EK is immutable. A new TPM under an old name is a
    // new identity: only an explicit, audited replacement, and it starts over.
    if (!replace_ek) {
      Fail(Status::InvalidArgument("ek_conflict", "'" + in.hostname +
                                                      "' is enrolled with another EK; if its TPM was replaced, "
                                                      "enroll it again with --replace-ek"));
    }
    {
      Stmt s = c.Prepare(
          "UPDATE machines SET pool = ?2, state = ?3, ek_public = ?4, ek_hash = ?5, ek_certificate = ?6, "
          "tpm_manufacturer = ?7, tpm_model = ?8, tpm_version = ?9, policy_json = ?10, tofu_pcrs_json = NULL, "
          "client_cert_issued_at = NULL, attest_epoch = attest_epoch + 1, updated_at = ?11, vars_json = ?12 "
          "WHERE id = ?1");
      BindEnrollment(s.BindInt(1, old.id), in, now).Run();
    }
    ReplaceAddresses(c, old.id, in.addresses);
    auto [sessions, tokens] = DropCredentials(c, old.id);
    Machine m = MustMachineById(c, old.id);
    AuditDetail detail;
    detail.Text("old_ek_hash", hex::Encode(old.ek_hash))
        .Text("new_ek_hash", hex::Encode(in.ek_hash))
        .Text("pool", in.pool)
        .Int("sessions_dropped", sessions)
        .Int("tokens_dropped", tokens)
        .Int("kubernetes_csrs_denied", DenyWaitingKubeCsrs(c, old.id, actor.name, now));
    AddEkRelaxations(in, &detail);
    WriteAudit(c, actor, now, {"replace_ek", &m, old.state, in.state, DetailJson(detail)});
    std::vector<std::string> words{"ek replaced"};
    words.insert(words.end(), merged.changes.begin(), merged.changes.end());
    return {std::move(m), std::string(kEnrollReplacedEk), std::move(words)};
  }

  // Same hostname, same EK.
  if (merged.changed.empty()) return {std::move(old), std::string(kEnrollUnchanged), {}};
  const bool new_cert = in.ek_certificate.has_value();
  {
    Stmt s = c.Prepare(
        "UPDATE machines SET pool = ?2, state = ?3, policy_json = ?4, "
        "ek_certificate = CASE WHEN ?5 <> 0 THEN ?6 ELSE ek_certificate END, "
        "tpm_manufacturer = CASE WHEN ?5 <> 0 THEN ?7 ELSE tpm_manufacturer END, "
        "tpm_model = CASE WHEN ?5 <> 0 THEN ?8 ELSE tpm_model END, "
        "tpm_version = CASE WHEN ?5 <> 0 THEN ?9 ELSE tpm_version END, "
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
  if (old.addresses != in.addresses) ReplaceAddresses(c, old.id, in.addresses);
  Machine m = MustMachineById(c, old.id);
  AuditDetail detail;
  detail.Texts("changed", merged.changed);
  if (std::find(merged.changed.begin(), merged.changed.end(), "ek_certificate") != merged.changed.end()) {
    AddEkRelaxations(in, &detail);
  }
  WriteAudit(c, actor, now, {"enroll_update", &m, old.state, state, DetailJson(detail)});
  return {std::move(m), std::string(kEnrollUpdated), std::move(merged.changes)};
}

// Thrown out of a dry run's write to roll it back, carrying its report.
struct DryRunDone {
  ImportReport report;
};

}  // namespace

Result<Machine> SqlStore::Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) {
  const EnrollMerge as_given = [&e](size_t, const Machine* stored, MachineState state) {
    return AsGiven(e, stored, state);
  };
  auto outcome = EnrollMerged(e, as_given, actor, replace_ek, now);
  if (!outcome.ok()) return outcome.status();
  return std::move(outcome->machine);
}

Result<EnrollOutcome> SqlStore::EnrollMerged(const Enrollment& e, const EnrollMerge& merge, const Actor& actor,
                                             bool replace_ek, int64_t now) {
  return Guard([&]() -> Result<EnrollOutcome> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) { return EnrollIn(c, e, merge, 0, actor, replace_ek, now); });
  });
}

Result<ImportReport> SqlStore::Import(const std::vector<ImportRow>& rows, const EnrollMerge& merge,
                                      const ImportOptions& options, const Actor& actor, int64_t now,
                                      const ImportProgress& progress) {
  return Guard([&]() -> Result<ImportReport> {
    CheckActor(actor);
    CheckNoImportDuplicates(rows);
    try {
      return db_->Write([&](Connection& c) {
        ImportReport report;
        report.dry_run = options.dry_run;
        report.rows.reserve(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
          const ImportRow& row = rows[i];
          EnrollOutcome o;
          try {
            o = EnrollIn(c, row.enrollment, merge, i, actor, /*replace_ek=*/false, now);
          } catch (const StoreError& err) {
            Fail(err.status().Annotate(row.where + " (" + row.enrollment.hostname + ")"));
          }
          if (o.outcome == kEnrollCreated) {
            ++report.created;
          } else if (o.outcome == kEnrollUpdated) {
            ++report.updated;
          } else {
            ++report.unchanged;
          }
          report.rows.push_back({row.where, o.machine.hostname, std::move(o.outcome), std::move(o.changes)});
          if (progress) progress(i + 1, rows.size());
        }
        if (!rows.empty()) {
          WriteAudit(c, actor, now,
                     {"import", nullptr, std::nullopt, std::nullopt,
                      json{{"rows", rows.size()},
                           {"created", report.created},
                           {"updated", report.updated},
                           {"unchanged", report.unchanged},
                           {"changed", report.created + report.updated}}});
        }
        // The dry run: the same checks as a real import, on the
        // same transaction, then rolled back (Database::Write rolls back a
        // write's savepoint when it throws): it cannot store anything.
        if (options.dry_run) throw DryRunDone{std::move(report)};
        return report;
      });
    } catch (DryRunDone& done) {
      return std::move(done.report);
    }
  });
}

Result<Machine> SqlStore::Approve(const std::string& hostname, const ApprovalChanges& changes, const Actor& actor,
                                     int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) {
      Machine old = MustMachineByHostname(c, hostname);
      if (old.state != MachineState::kPending) {
        Fail(Status::InvalidArgument("state_conflict", MachineIs(old) + ", not pending"));
      }
      // The machine as it will be, checked by enrollment's rules.
      const Enrollment e = ApprovedEnrollment(old, changes);
      const std::vector<Address> addresses = NormalizeAddresses(e.addresses);
      if (!PoolExists(c, e.pool)) Fail(Status::NotFound("pool_unknown", "no pool named '" + e.pool + "'"));
      // SECURITY: the hostname becomes the kubelet certificate's CN, so two
      // machines never share one; the refusal names the holder so the
      // operator can see which machine to rename or revoke.
      if (e.hostname != old.hostname) {
        if (auto holder = MachineByHostname(c, e.hostname)) {
          Fail(Status::InvalidArgument("hostname_taken", "'" + e.hostname + "' is already the hostname of a " +
                                                             std::string(StateName(holder->state)) +
                                                             " machine (ek " + hex::Encode(holder->ek_hash).substr(0, 16) +
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
