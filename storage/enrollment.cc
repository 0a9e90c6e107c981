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

// A vars text as a JSON object; `stored` says whether it came from the
// database (then a broken one is corruption, not the caller's mistake).
json VarsObject(const std::string& text, bool stored) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (stored) Fail(Status::Corruption("db_corrupt", "a machine's stored vars are not a JSON object"));
    Fail(Status::InvalidArgument("field_invalid", "vars must be a JSON object"));
  }
  return j;
}

std::string AddressText(const Address& a) { return a.kind + "=" + a.value; }

// The machine as it will be: the enrollment's fields where `f` gives them,
// the enrolled machine's (`old`; none for a new machine) elsewhere.
Enrollment Resolve(const Machine* old, const Enrollment& in, const EnrollFields& f) {
  Enrollment d = in;
  if (!f.pool) d.pool = old ? old->pool : std::string();
  std::vector<Address> addresses;
  if (old && !(f.addresses && f.replace_addresses)) addresses = old->addresses;
  if (f.addresses) addresses.insert(addresses.end(), in.addresses.begin(), in.addresses.end());
  d.addresses = NormalizeAddresses(std::move(addresses));
  json vars = json::object();
  if (old && !(f.vars && f.replace_vars)) vars = VarsObject(old->vars_json, true);
  if (f.vars) {
    const json given = VarsObject(in.vars_json, false);
    for (const auto& [k, v] : given.items()) vars[k] = v;
  }
  for (const auto& name : f.unset_vars) vars.erase(name);
  d.vars_json = vars.dump();
  if (!f.policy) d.policy_json = old ? old->policy_json : std::nullopt;
  return d;
}

// The changes from `old` to `d` in words (EnrollOutcome) and the changed
// fields' names (the audit row's detail).
void Diff(const Machine& old, const Enrollment& d, MachineState state, std::vector<std::string>* words,
          std::vector<std::string>* fields) {
  if (old.pool != d.pool) {
    words->push_back("pool " + old.pool + " -> " + d.pool);
    fields->push_back("pool");
  }
  if (old.addresses != d.addresses) {
    std::string w = "addresses";
    for (const auto& a : d.addresses) {
      if (std::find(old.addresses.begin(), old.addresses.end(), a) == old.addresses.end()) w += " +" + AddressText(a);
    }
    for (const auto& a : old.addresses) {
      if (std::find(d.addresses.begin(), d.addresses.end(), a) == d.addresses.end()) w += " -" + AddressText(a);
    }
    words->push_back(w);
    fields->push_back("addresses");
  }
  // Names only: a template value may be something an operator would not
  // want in every terminal and log the answer reaches.
  const json old_vars = VarsObject(old.vars_json, true);
  const json new_vars = VarsObject(d.vars_json, false);
  if (old_vars != new_vars) {
    std::string w = "vars";
    for (const auto& [k, v] : new_vars.items()) {
      if (!old_vars.contains(k)) {
        w += " +" + k;
      } else if (old_vars.at(k) != v) {
        w += " ~" + k;
      }
    }
    for (const auto& [k, v] : old_vars.items()) {
      if (!new_vars.contains(k)) w += " -" + k;
    }
    words->push_back(w);
    fields->push_back("vars");
  }
  if (old.policy_json != d.policy_json) {
    words->push_back(!old.policy_json ? "policy set" : !d.policy_json ? "policy cleared" : "policy replaced");
    fields->push_back("policy");
  }
  if (d.ek_certificate && (old.ek_certificate != d.ek_certificate || old.tpm_manufacturer != d.tpm_manufacturer ||
                           old.tpm_model != d.tpm_model || old.tpm_version != d.tpm_version)) {
    words->push_back("ek_certificate updated");
    fields->push_back("ek_certificate");
  }
  if (state != old.state) {
    words->push_back("state " + std::string(StateName(old.state)) + " -> " + std::string(StateName(state)));
    fields->push_back("state");
  }
}

// EnrollMerged's rules (store.h).
EnrollOutcome EnrollIn(Connection& c, const Enrollment& given, const EnrollFields& f, const Actor& actor,
                       bool replace_ek, int64_t now) {
  std::optional<Machine> by_host = MachineByHostname(c, given.hostname);
  const Machine* old_ptr = by_host ? &*by_host : nullptr;
  if (!old_ptr && (!f.pool || given.pool.empty())) {
    Fail(Status::InvalidArgument("field_missing", "'" + given.hostname +
                                                      "' is not enrolled yet: a new machine needs a pool (--pool)"));
  }
  const Enrollment in = Resolve(old_ptr, given, f);
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

  if (!by_host) {
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
    WriteAudit(c, actor, now,
               {"enroll", &m, std::nullopt, in.state,
                json{{"pool", in.pool},
                     {"ek_hash", hex::Encode(in.ek_hash)},
                     {"ek_certificate", in.ek_certificate.has_value()},
                     {"addresses", in.addresses.size()}}});
    return {std::move(m), std::string(kEnrollCreated), {}};
  }

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
    WriteAudit(c, actor, now,
               {"replace_ek", &m, old.state, in.state,
                json{{"old_ek_hash", hex::Encode(old.ek_hash)},
                     {"new_ek_hash", hex::Encode(in.ek_hash)},
                     {"pool", in.pool},
                     {"sessions_dropped", sessions},
                     {"tokens_dropped", tokens}}});
    std::vector<std::string> words{"ek replaced"}, fields;
    Diff(old, in, old.state, &words, &fields);
    return {std::move(m), std::string(kEnrollReplacedEk), std::move(words)};
  }

  // Same hostname, same EK.
  MachineState state = old.state;
  if (old.state == MachineState::kPending && in.state == MachineState::kEnrolled) state = MachineState::kEnrolled;
  std::vector<std::string> words, what;
  Diff(old, in, state, &words, &what);
  if (what.empty()) return {std::move(old), std::string(kEnrollUnchanged), {}};
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
  WriteAudit(c, actor, now, {"enroll_update", &m, old.state, state, json{{"changed", what}}});
  return {std::move(m), std::string(kEnrollUpdated), std::move(words)};
}

// import_duplicate unless every hostname and every EK appears once in the
// rows; the message names both rows of each pair (at most a few pairs).
void CheckNoDuplicates(const std::vector<ImportRow>& rows) {
  std::map<std::string, size_t> by_host;
  std::map<Bytes, size_t> by_ek;
  std::vector<std::string> found;
  size_t total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Enrollment& e = rows[i].enrollment;
    auto [h, new_host] = by_host.emplace(e.hostname, i);
    auto [k, new_ek] = by_ek.emplace(e.ek_hash, i);
    if (!new_host) {
      if (++total <= 5) {
        found.push_back(rows[h->second].where + " and " + rows[i].where + " both enroll hostname " + e.hostname);
      }
    } else if (!new_ek) {
      if (++total <= 5) {
        found.push_back(rows[k->second].where + " (" + rows[k->second].enrollment.hostname + ") and " +
                        rows[i].where + " (" + e.hostname + ") carry the same EK (" + hex::Encode(e.ek_hash).substr(0, 16) +
                        ")");
      }
    }
  }
  if (found.empty()) return;
  std::string message;
  for (const auto& f : found) message += (message.empty() ? "" : "; ") + f;
  if (total > found.size()) message += "; and " + std::to_string(total - found.size()) + " more";
  Fail(Status::InvalidArgument("import_duplicate",
                               message + ": each machine appears once in an inventory; nothing was imported"));
}

// Thrown out of a dry run's write to roll it back, carrying its report.
struct DryRunDone {
  ImportReport report;
};

}  // namespace

Result<Machine> SqlStore::Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) {
  auto outcome = EnrollMerged(e, EnrollFields{}, actor, replace_ek, now);
  if (!outcome.ok()) return outcome.status();
  return std::move(outcome->machine);
}

Result<EnrollOutcome> SqlStore::EnrollMerged(const Enrollment& e, const EnrollFields& fields, const Actor& actor,
                                                bool replace_ek, int64_t now) {
  return Guard([&]() -> Result<EnrollOutcome> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) { return EnrollIn(c, e, fields, actor, replace_ek, now); });
  });
}

Result<ImportReport> SqlStore::Import(const std::vector<ImportRow>& rows, const ImportOptions& options,
                                         const Actor& actor, int64_t now, const ImportProgress& progress) {
  return Guard([&]() -> Result<ImportReport> {
    CheckActor(actor);
    CheckNoDuplicates(rows);
    try {
      return db_->Write([&](Connection& c) {
        ImportReport report;
        report.dry_run = options.dry_run;
        report.rows.reserve(rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
          const ImportRow& row = rows[i];
          EnrollOutcome o;
          try {
            o = EnrollIn(c, row.enrollment, row.fields, actor, /*replace_ek=*/false, now);
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
