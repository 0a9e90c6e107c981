// Machines: lookups, listing, counts, and the operator's state changes
// (approve, revoke, reset) and the protocol's (Transition).
#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "storage/audit.h"
#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/trust.h"
#include "storage/validation.h"
#include "base/hex.h"

namespace rackgate::storage {

namespace {

bool Contains(const std::vector<MachineState>& v, MachineState s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string Join(const std::vector<MachineState>& v) {
  std::string out;
  for (MachineState s : v) out += (out.empty() ? "" : ", ") + std::string(StateName(s));
  return out;
}


// Moves `m` to `to` when its state is in `from`; the check and the change are
// in the caller's write transaction.
Machine TransitionIn(Connection& c, const Machine& m, const std::vector<MachineState>& from, MachineState to,
                     const Actor& actor, const std::string& action, int64_t now) {
  if (m.state == to && Contains(from, to)) return m;
  if (!Contains(from, m.state)) {
    Fail(Status::InvalidArgument("state_conflict", MachineIs(m) + "; " + action + " needs one of: " + Join(from)));
  }
  {
    Stmt s = c.Prepare("UPDATE machines SET state = ?2, updated_at = ?3 WHERE id = ?1");
    s.BindInt(1, m.id).BindText(2, StateName(to)).BindInt(3, now).Run();
  }
  Machine after = MustMachineById(c, m.id);
  WriteAudit(c, actor, now, {action, &after, m.state, to});
  return after;
}

}  // namespace

Result<Machine> SqlStore::FindMachineByEkHash(const Bytes& ek_hash) {
  return Guard([&]() -> Result<Machine> {
    if (ek_hash.empty() || ek_hash.size() > kMaxHash) {
      return Status::NotFound("machine_unknown", "no machine is enrolled with this EK");
    }
    return db_->Read([&](Connection& c) -> Machine {
      auto m = MachineByEkHash(c, ek_hash);
      if (!m) Fail(Status::NotFound("machine_unknown", "no machine is enrolled with this EK"));
      return std::move(*m);
    });
  });
}

Result<Machine> SqlStore::GetMachine(const std::string& hostname) {
  return Guard([&]() -> Result<Machine> {
    return db_->Read([&](Connection& c) { return MustMachineByHostname(c, hostname); });
  });
}

Result<Machine> SqlStore::GetMachineById(int64_t id) {
  return Guard([&]() -> Result<Machine> {
    return db_->Read([&](Connection& c) { return MustMachineById(c, id); });
  });
}

Result<std::vector<Machine>> SqlStore::ListMachines(const MachineFilter& filter) {
  return Guard([&]() -> Result<std::vector<Machine>> {
    if (filter.state) CheckState(*filter.state);
    const std::optional<std::string> state =
        filter.state ? std::optional<std::string>(StateName(*filter.state)) : std::nullopt;
    return db_->Read([&](Connection& c) {
      std::vector<Machine> out;
      Stmt s = c.Prepare(MachineSelect(c) +
                         "WHERE (CAST(?1 AS TEXT) IS NULL OR pool = ?1) AND (CAST(?2 AS TEXT) IS NULL OR state = ?2) ORDER BY hostname");
      s.BindOptText(1, filter.pool).BindOptText(2, state);
      while (s.Step()) out.push_back(ReadMachine(s));
      return out;
    });
  });
}

Result<Machine> SqlStore::Approve(const std::string& hostname, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      if (m.state != MachineState::kPending) {
        Fail(Status::InvalidArgument("state_conflict", MachineIs(m) + ", not pending"));
      }
      return TransitionIn(c, m, {MachineState::kPending}, MachineState::kEnrolled, actor, "approve", now);
    });
  });
}

Result<Machine> SqlStore::Revoke(const std::string& hostname, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      const std::vector<MachineState> from(std::begin(kAllMachineStates), std::end(kAllMachineStates));
      return TransitionIn(c, m, from, MachineState::kRevoked, actor, "revoke", now);
    });
  });
}

Result<Machine> SqlStore::Reset(const std::string& hostname, const Actor& actor, int64_t now, bool unrevoke) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      static const std::vector<MachineState> kFrom = {MachineState::kAttested, MachineState::kProvisioned,
                                                      MachineState::kJoined, MachineState::kRevoked};
      if (!Contains(kFrom, m.state)) {
        Fail(Status::InvalidArgument("state_conflict", MachineIs(m) + "; reset needs one of: " + Join(kFrom)));
      }
      if (m.state == MachineState::kRevoked && !unrevoke) Fail(RevokedRefusal(m.hostname));
      {
        Stmt s = c.Prepare(
            "UPDATE machines SET state = 'enrolled', tofu_pcrs_json = NULL, client_cert_issued_at = NULL, "
            "attest_epoch = attest_epoch + 1, updated_at = ?2 WHERE id = ?1");
        s.BindInt(1, m.id).BindInt(2, now).Run();
      }
      auto [sessions, tokens] = DropCredentials(c, m.id);
      const int64_t kube_denied = DenyWaitingKubeCsrs(c, m.id, actor.name, now);
      Machine after = MustMachineById(c, m.id);
      WriteAudit(c, actor, now,
                 {"reset", &after, m.state, MachineState::kEnrolled,
                  json{{"unrevoked", m.state == MachineState::kRevoked},
                       {"tofu_cleared", m.tofu_pcrs_json.has_value()},
                       {"client_cert_mark_cleared", m.client_cert_issued_at.has_value()},
                       {"sessions_dropped", sessions},
                       {"tokens_dropped", tokens},
                       {"kubernetes_csrs_denied", kube_denied}}});
      return after;
    });
  });
}

Result<Machine> SqlStore::Transition(int64_t machine_id, const std::vector<MachineState>& from, MachineState to,
                                        const Actor& actor, const std::string& action, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckState(to);
    for (MachineState f : from) CheckState(f);
    CheckSize("action", action.size(), 1, 64);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineById(c, machine_id);
      return TransitionIn(c, m, from, to, actor, action, now);
    });
  });
}

Result<std::map<std::string, int64_t>> SqlStore::CountByState() {
  return Guard([&]() -> Result<std::map<std::string, int64_t>> {
    return db_->Read([&](Connection& c) {
      std::map<std::string, int64_t> out;
      for (MachineState s : kAllMachineStates) out[std::string(StateName(s))] = 0;
      Stmt s = c.Prepare("SELECT state, count(*) FROM machines GROUP BY state");
      while (s.Step()) out[s.Text(0)] = s.Int(1);
      return out;
    });
  });
}

// --- Delete and rename (docs/lifecycle.md, "Delete and rename") --------------

namespace {

// The states an operator may delete or rename a machine in: it holds no
// certificate of its current epoch and no attested config under its name.
const std::vector<MachineState> kQuietStates = {MachineState::kPending, MachineState::kEnrolled,
                                                MachineState::kRevoked};

// machine_active unless `m` is quiet; the message names the fix.
void CheckQuiet(const Machine& m, const std::string& verb) {
  if (Contains(kQuietStates, m.state)) return;
  Fail(Status::InvalidArgument(
      "machine_active", MachineIs(m) + "; " + verb + " needs one of: " + Join(kQuietStates) +
                            ". Run `rackgatectl revoke " + m.hostname + "` (it stops the machine at once) or `rackgatectl reset " +
                            m.hostname + "` (it must attest again) first"));
}

}  // namespace

Result<Machine> SqlStore::DeleteMachine(const std::string& hostname, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      CheckQuiet(m, "delete");
      // The row is written first: it names the machine that is about to go.
      WriteAudit(c, actor, now,
                 {"machine_deleted", &m, m.state, std::nullopt,
                  json{{"ek_hash", hex::Encode(m.ek_hash)}, {"state", std::string(StateName(m.state))}}});
      {
        // SECURITY: the certificates stay as history, but SQLite may hand
        // this id to the next machine enrolled (machines.id is no
        // AUTOINCREMENT); epoch -1 is never current, so no certificate of
        // this machine is ever renewed or counted for that one.
        Stmt s = c.Prepare("UPDATE certificates SET attest_epoch = -1 WHERE machine_id = ?1");
        s.BindInt(1, m.id).Run();
      }
      // Addresses, sessions, tokens, attestations, CSR requests and the last
      // report go by ON DELETE CASCADE (storage/schema.cc).
      Stmt s = c.Prepare("DELETE FROM machines WHERE id = ?1");
      s.BindInt(1, m.id).Run();
      return m;
    });
  });
}

Result<Machine> SqlStore::RenameMachine(const std::string& hostname, const std::string& new_hostname,
                                           const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckHostname(new_hostname);
    return db_->Write([&](Connection& c) {
      Machine m = MustMachineByHostname(c, hostname);
      if (new_hostname == m.hostname) return m;
      CheckQuiet(m, "rename");
      // SECURITY: the hostname becomes the kubelet certificate's CN, so two
      // machines never share one; the refusal names the holder.
      if (auto holder = MachineByHostname(c, new_hostname)) {
        Fail(Status::InvalidArgument(
            "hostname_taken", "'" + new_hostname + "' is already the hostname of a " +
                                  std::string(StateName(holder->state)) + " machine (ek " +
                                  hex::Encode(holder->ek_hash).substr(0, 16) + "); pick another name, or `rackgatectl delete " +
                                  new_hostname + "` first"));
      }
      {
        Stmt s = c.Prepare("UPDATE machines SET hostname = ?2, updated_at = ?3 WHERE id = ?1");
        s.BindInt(1, m.id).BindText(2, new_hostname).BindInt(3, now).Run();
      }
      {
        // The machine's own name among its addresses follows it (a serving
        // certificate's SANs come from the addresses).
        Stmt s = c.Prepare(
            "UPDATE addresses SET value = ?2 WHERE machine_id = ?1 AND kind = 'Hostname' AND value = ?3 AND NOT "
            "EXISTS (SELECT 1 FROM addresses WHERE machine_id = ?1 AND kind = 'Hostname' AND value = ?2)");
        s.BindInt(1, m.id).BindText(2, new_hostname).BindText(3, m.hostname).Run();
        Stmt d = c.Prepare("DELETE FROM addresses WHERE machine_id = ?1 AND kind = 'Hostname' AND value = ?2");
        d.BindInt(1, m.id).BindText(2, m.hostname).Run();
      }
      Machine after = MustMachineById(c, m.id);
      WriteAudit(c, actor, now,
                 {"machine_renamed", &after, m.state, after.state, json{{"from", m.hostname}, {"to", new_hostname}}});
      return after;
    });
  });
}

// --- Trust sweep (docs/trust.md) ---------------------------------------------

Result<std::vector<Machine>> SqlStore::MarkStaleUntrusted(int64_t now,
                                                             const std::map<std::string, int64_t>& max_age_by_pool,
                                                             int batch) {
  return Guard([&]() -> Result<std::vector<Machine>> {
    for (const auto& [pool, age] : max_age_by_pool) {
      if (age <= 0) return Status::InvalidArgument("field_invalid", "max attestation age of " + pool + " is not > 0");
    }
    const int64_t limit = std::clamp(batch, 1, 10000);
    return db_->Write([&](Connection& c) {
      std::vector<Machine> changed;
      for (const auto& [pool, age] : max_age_by_pool) {
        if (static_cast<int64_t>(changed.size()) >= limit) break;
        std::vector<int64_t> ids;
        {
          // Older than the age: now - last_attested_at > age, written without
          // an addition that could overflow.
          Stmt s = c.Prepare(
              "SELECT id FROM machines WHERE pool = ?1 AND last_attested_at IS NOT NULL "
              "AND last_attested_at < ?2 - ?3 AND (trust IS NULL OR trust != 'untrusted') "
              "AND state NOT IN ('pending', 'revoked') ORDER BY id LIMIT ?4");
          s.BindText(1, pool).BindInt(2, now).BindInt(3, age).BindInt(4, limit - static_cast<int64_t>(changed.size()));
          while (s.Step()) ids.push_back(s.Int(0));
        }
        for (int64_t id : ids) {
          const Machine m = MustMachineById(c, id);
          ApplyTrust(c, m, kTrustUntrusted, std::string(kTrustReasonTooOld), Actor{"rackgated", "trust sweep"}, now);
          changed.push_back(MustMachineById(c, id));
        }
      }
      return changed;
    });
  });
}

Result<int64_t> SqlStore::CountUntrusted() {
  return Guard([&]() -> Result<int64_t> {
    return db_->Read([&](Connection& c) -> int64_t {
      Stmt s = c.Prepare("SELECT count(*) FROM machines WHERE trust = 'untrusted'");
      s.Step();
      return s.Int(0);
    });
  });
}

}  // namespace rackgate::storage
