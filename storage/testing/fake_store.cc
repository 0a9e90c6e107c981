// The in-memory store of tests: store.h's contract over maps.
#include "storage/testing/fake_store.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "base/hex.h"
#include "base/text.h"
#include "storage/sql.h"
#include "storage/validation.h"

namespace rackgate::storage::testing {

namespace {

Status Unsupported(const char* what) {
  return Status::Unsupported("fake_unsupported", std::string("the fake store does not keep ") + what);
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string Is(const Machine& m) { return "'" + m.hostname + "' is " + std::string(StateName(m.state)); }

bool Contains(const std::vector<MachineState>& v, MachineState s) { return std::find(v.begin(), v.end(), s) != v.end(); }

struct StoredCertificate {
  IssuedCertificate cert;
  int64_t epoch = 0;
};

struct StoredAttestation {
  AttestationRecord record;
  int64_t epoch = 0;
};

struct StoredCsr {
  CsrApprovalRequest request;
  int64_t epoch = 0;
};

struct StoredKey {
  AttestedKey key;
  int64_t epoch = 0;
};

}  // namespace

struct FakeStore::State {
  StoreOptions options;
  std::map<std::string, Pool> pools;
  std::vector<PoolToken> pool_tokens;
  std::map<int64_t, Machine> machines;
  std::map<int64_t, int64_t> epochs;  // machine id -> attest epoch
  int64_t next_machine = 1;
  std::map<std::string, Session> sessions;
  std::map<Bytes, Token> tokens;
  std::vector<StoredAttestation> attestations;
  int64_t next_attestation = 1;
  std::vector<StoredCertificate> certificates;  // in issue order
  std::vector<StoredCsr> csrs;
  int64_t next_csr = 1;
  std::vector<StoredKey> attested_keys;          // in registration order
  std::map<std::string, KubeCsrDecision> kube_csrs;  // by uid
  std::map<int64_t, BootObservation> observations;
  std::map<int64_t, ProvisioningReportRecord> reports;  // by machine id
  std::vector<AuditEntry> audit;
  std::map<std::string, CaRotation> ca_rotations;  // by kind
  WriteStats stats;

  Machine& MustMachine(int64_t id) {
    auto it = machines.find(id);
    if (it == machines.end()) Fail(Status::NotFound("machine_unknown", "no machine with id " + std::to_string(id)));
    return it->second;
  }
  Machine& MustHost(const std::string& hostname) {
    for (auto& [id, m] : machines) {
      if (m.hostname == hostname) return m;
    }
    Fail(Status::NotFound("hostname_unknown", "no machine '" + hostname + "'"));
  }
  const Pool& MustPool(const std::string& name) {
    auto it = pools.find(name);
    if (it == pools.end()) Fail(Status::NotFound("pool_unknown", "no pool '" + name + "'"));
    return it->second;
  }
  void Audit(const Actor& actor, int64_t now, const std::string& action, const Machine* m,
             std::optional<MachineState> from, std::optional<MachineState> to, std::string detail) {
    AuditEntry a;
    a.id = static_cast<int64_t>(audit.size()) + 1;
    a.at = now;
    a.actor = actor.name;
    a.why = actor.why;
    a.action = action;
    if (m != nullptr) {
      a.machine_id = m->id;
      a.hostname = m->hostname;
    }
    if (from) a.from_state = std::string(StateName(*from));
    if (to) a.to_state = std::string(StateName(*to));
    a.detail_json = std::move(detail);
    audit.push_back(std::move(a));
  }
  // The trust change of docs/trust.md, with its audit row (none for a first
  // good attestation). Returns whether the trust changed.
  bool ApplyTrust(Machine& m, std::string_view trust, const std::string& reason, int64_t now) {
    if (m.trust == trust) {
      if (trust == kTrustUntrusted) m.trust_reason = reason;
      return false;
    }
    const Machine before = m;
    m.trust = std::string(trust);
    m.trust_reason = reason;
    m.trust_changed_at = now;
    if (!(before.trust.empty() && trust == kTrustTrusted)) {
      Audit(Actor{"attestation", ""}, now, std::string(trust), &before, before.state, before.state,
            "{\"reason\":" + Quote(trust == kTrustTrusted ? std::string("attestation_ok") : reason) + "}");
    }
    return true;
  }
  Session& UsableSession(const std::string& id, int64_t now) {
    auto it = sessions.find(id);
    if (id.empty() || it == sessions.end()) Fail(Status::NotFound("session_unknown", "unknown session"));
    if (it->second.used_at) Fail(Status::VerificationFailed("session_used", "the session was already used"));
    if (now >= it->second.expires_at) Fail(Status::VerificationFailed("session_expired", "the session expired"));
    return it->second;
  }
  std::optional<AttestationRecord> LastSuccess(int64_t machine_id) {
    for (auto it = attestations.rbegin(); it != attestations.rend(); ++it) {
      if (it->record.machine_id == machine_id && it->record.verdict == kVerdictOk &&
          it->epoch == epochs[machine_id]) {
        return it->record;
      }
    }
    return std::nullopt;
  }
  int64_t Insert(AttestationRecord record, std::string_view verdict) {
    record.id = next_attestation++;
    record.verdict = std::string(verdict);
    record.hostname = MustMachine(record.machine_id).hostname;
    attestations.push_back({record, epochs[record.machine_id]});
    return record.id;
  }
  // Checks first, then changes: a refusal changes nothing.
  Machine RecordSuccess(const AttestationRecord& record, const Token& token,
                        const std::optional<std::string>& tofu_pcrs_json) {
    Machine& m = MustMachine(record.machine_id);
    if (m.state == MachineState::kPending || m.state == MachineState::kRevoked) {
      Fail(Status::InvalidArgument("state_conflict", Is(m) + " and cannot attest"));
    }
    if (tokens.count(token.hash) != 0) Fail(Status::InvalidArgument("field_invalid", "the token hash is taken"));
    const MachineState from = m.state;
    const int64_t id = Insert(record, kVerdictOk);
    if (m.state == MachineState::kEnrolled) m.state = MachineState::kAttested;
    m.last_attested_at = record.at;
    m.updated_at = record.at;
    if (tofu_pcrs_json) m.tofu_pcrs_json = tofu_pcrs_json;
    tokens[token.hash] = token;
    tokens[token.hash].certify_nonce_used_at.reset();
    Audit(Actor{"attestation", ""}, record.at, "attest", &m, from, m.state,
          "{\"attestation_id\":" + std::to_string(id) + ",\"reset_count\":" + std::to_string(record.reset_count) +
              ",\"restart_count\":" + std::to_string(record.restart_count) +
              ",\"firmware_version\":" + std::to_string(record.firmware_version) +
              ",\"tofu_recorded\":" + (tofu_pcrs_json ? "true" : "false") + "}");
    ApplyTrust(m, kTrustTrusted, "", record.at);
    return m;
  }
  void RecordFailure(const AttestationRecord& record) {
    Machine& m = MustMachine(record.machine_id);
    Insert(record, kVerdictRefused);
    if (m.state != MachineState::kRevoked) {
      ApplyTrust(m, kTrustUntrusted, std::string(kTrustReasonFailedPrefix) + record.reason, record.at);
    }
    // Bounded per machine, the oldest refusals dropped.
    const auto refused = [&](const StoredAttestation& a) {
      return a.record.machine_id == record.machine_id && a.record.verdict == kVerdictRefused;
    };
    int64_t extra = std::count_if(attestations.begin(), attestations.end(), refused) -
                    std::max(1, options.max_failures_per_machine);
    for (auto it = attestations.begin(); it != attestations.end() && extra > 0;) {
      if (refused(*it)) {
        it = attestations.erase(it);
        --extra;
      } else {
        ++it;
      }
    }
  }
  void CheckSessionIsTheRecords(const AttestationRecord& record, int64_t now) {
    Session& s = UsableSession(record.session_id, now);
    if (s.machine_id != record.machine_id) {
      Fail(Status::InvalidArgument("field_invalid", "the session is for another machine than the attestation"));
    }
  }
  IssuedCertificate Filled(const StoredCertificate& c) {
    IssuedCertificate out = c.cert;
    auto m = machines.find(c.cert.machine_id);
    out.since_reset = m != machines.end() && c.epoch == epochs[c.cert.machine_id];
    return out;
  }
  CsrApprovalRequest Filled(const StoredCsr& r) {
    CsrApprovalRequest out = r.request;
    out.hostname = MustMachine(r.request.machine_id).hostname;
    out.current = r.epoch == epochs[r.request.machine_id];
    return out;
  }
  void DropCredentials(int64_t machine_id) {
    std::erase_if(sessions, [&](const auto& kv) { return kv.second.machine_id == machine_id; });
    std::erase_if(tokens, [&](const auto& kv) { return kv.second.machine_id == machine_id; });
  }
  // As storage/rows.h DenyWaitingKubeCsrs, at the identity changes (reset,
  // new EK).
  void DenyWaitingKubeCsrs(int64_t machine_id, const std::string& by, int64_t now) {
    for (auto& [uid, d] : kube_csrs) {
      if (d.machine_id != machine_id || d.decision != kCsrWaiting) continue;
      d.decision = std::string(kCsrDenied);
      d.reason = std::string(kKubeReasonMachineReset);
      d.message = "the machine was reset (or its EK replaced) while this CSR waited";
      d.decided_by = by;
      d.decided_at = now;
    }
  }
  Machine TransitionIn(Machine& m, const std::vector<MachineState>& from, MachineState to, const Actor& actor,
                       const std::string& action, int64_t now) {
    if (m.state == to && Contains(from, to)) return m;
    if (!Contains(from, m.state)) Fail(Status::InvalidArgument("state_conflict", Is(m)));
    const MachineState before = m.state;
    m.state = to;
    m.updated_at = now;
    Audit(actor, now, action, &m, before, to, "{}");
    return m;
  }
};

FakeStore::FakeStore(const StoreOptions& options) : state_(std::make_unique<State>()) { state_->options = options; }

FakeStore::~FakeStore() = default;

// --- PoolReader ----------------------------------------------------------------

Result<Pool> FakeStore::GetPool(const std::string& name) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Pool> { return state_->MustPool(name); });
}

Result<std::vector<Pool>> FakeStore::ListPools() {
  std::lock_guard lock(mu_);
  std::vector<Pool> out;
  for (const auto& [name, p] : state_->pools) out.push_back(p);
  return out;
}

Result<std::vector<PoolToken>> FakeStore::ValidPoolTokens(const std::string& pool, int64_t now) {
  std::lock_guard lock(mu_);
  std::vector<PoolToken> out;
  for (const auto& t : state_->pool_tokens) {
    if (t.pool == pool && !t.expires_at) out.insert(out.begin(), t);
    if (t.pool == pool && t.expires_at && now < *t.expires_at) out.push_back(t);
  }
  return out;
}

Result<std::pair<Pool, std::vector<PoolToken>>> FakeStore::GetPoolWithTokens(const std::string& name, int64_t now) {
  auto pool = GetPool(name);
  if (!pool.ok()) return pool.status();
  auto tokens = ValidPoolTokens(name, now);
  if (!tokens.ok()) return tokens.status();
  return std::make_pair(std::move(pool).value(), std::move(tokens).value());
}

// --- MachineReader -------------------------------------------------------------

Result<Machine> FakeStore::FindMachineByEkHash(const Bytes& ek_hash) {
  std::lock_guard lock(mu_);
  for (const auto& [id, m] : state_->machines) {
    if (m.ek_hash == ek_hash) return m;
  }
  return Status::NotFound("machine_unknown", "no machine with this EK");
}

Result<Machine> FakeStore::GetMachine(const std::string& hostname) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> { return state_->MustHost(hostname); });
}

Result<Machine> FakeStore::GetMachineById(int64_t id) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> { return state_->MustMachine(id); });
}

Result<std::vector<Machine>> FakeStore::ListMachines(const MachineFilter& filter) {
  std::lock_guard lock(mu_);
  std::vector<Machine> out;
  for (const auto& [id, m] : state_->machines) {
    if (filter.pool && m.pool != *filter.pool) continue;
    if (filter.state && m.state != *filter.state) continue;
    out.push_back(m);
  }
  std::sort(out.begin(), out.end(), [](const Machine& a, const Machine& b) { return a.hostname < b.hostname; });
  return out;
}

// --- DecisionAudit -------------------------------------------------------------

Status FakeStore::AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                                    const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckSize("action", action.size(), 1, 64);
    CheckOptJson("detail_json", detail_json);
    Machine& m = state_->MustMachine(machine_id);
    state_->Audit(actor, now, action, &m, m.state, m.state, detail_json);
    return Status::Ok();
  });
}

// --- AttestationStore ----------------------------------------------------------

Result<Machine> FakeStore::Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckEnrollment(e);
    state_->MustPool(e.pool);
    Machine* same_host = nullptr;
    for (auto& [id, m] : state_->machines) {
      if (m.ek_hash == e.ek_hash && m.hostname != e.hostname) {
        Fail(Status::InvalidArgument("ek_in_use", "the EK is enrolled under another hostname"));
      }
      if (m.hostname == e.hostname) same_host = &m;
    }
    if (same_host != nullptr && same_host->ek_hash != e.ek_hash && !replace_ek) {
      Fail(Status::InvalidArgument("ek_conflict", "'" + e.hostname + "' is enrolled with another EK"));
    }
    Machine m;
    if (same_host != nullptr) m = *same_host;
    const bool created = same_host == nullptr;
    const bool replaced = !created && same_host->ek_hash != e.ek_hash;
    const MachineState from = m.state;
    if (created) {
      m.id = state_->next_machine++;
      m.created_at = now;
      m.state = e.state;
      state_->epochs[m.id] = 0;
    }
    m.hostname = e.hostname;
    m.pool = e.pool;
    m.addresses = NormalizeAddresses(e.addresses);
    m.policy_json = e.policy_json;
    m.vars_json = e.vars_json;
    if (created || replaced || e.ek_certificate) {
      m.ek_certificate = e.ek_certificate;
      m.tpm_manufacturer = e.tpm_manufacturer;
      m.tpm_model = e.tpm_model;
      m.tpm_version = e.tpm_version;
    }
    m.ek_public = e.ek_public;
    m.ek_hash = e.ek_hash;
    if (replaced) {
      m.state = e.state;
      m.tofu_pcrs_json.reset();
      m.client_cert_issued_at.reset();
      ++state_->epochs[m.id];
      state_->DropCredentials(m.id);
      state_->DenyWaitingKubeCsrs(m.id, actor.name, now);
    } else if (!created && m.state == MachineState::kPending && e.state == MachineState::kEnrolled) {
      m.state = MachineState::kEnrolled;
    }
    const bool changed = created || replaced || same_host->pool != m.pool || same_host->addresses != m.addresses ||
                         same_host->policy_json != m.policy_json || same_host->vars_json != m.vars_json ||
                         same_host->state != m.state || same_host->ek_certificate != m.ek_certificate;
    if (!changed) return m;
    m.updated_at = now;
    state_->machines[m.id] = m;
    state_->Audit(actor, now, created ? "enroll" : replaced ? "replace_ek" : "enroll_update", &m,
                  created ? std::nullopt : std::optional<MachineState>(from), m.state, "{}");
    return m;
  });
}

Status FakeStore::CreateSession(const Session& session) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    if (Status s = CheckSession(session); !s.ok()) return s;
    state_->MustMachine(session.machine_id);
    if (state_->sessions.count(session.id) != 0) {
      return Status::InvalidArgument("field_invalid", "the session id is taken");
    }
    Session s = session;
    s.used_at.reset();
    state_->sessions[s.id] = s;
    ++state_->stats.commits;
    ++state_->stats.writes;
    return Status::Ok();
  });
}

Result<Session> FakeStore::ConsumeSession(const std::string& id, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Session> {
    Session& s = state_->UsableSession(id, now);
    s.used_at = now;
    return s;
  });
}

Result<Bearer> FakeStore::LookupToken(const Bytes& token_hash, int64_t now) {
  std::lock_guard lock(mu_);
  auto it = state_->tokens.find(token_hash);
  if (token_hash.empty() || it == state_->tokens.end()) return Status::NotFound("token_unknown", "unknown token");
  auto m = state_->machines.find(it->second.machine_id);
  if (m == state_->machines.end()) return Status::NotFound("token_unknown", "unknown token");
  if (m->second.state == MachineState::kRevoked) {
    return Status::VerificationFailed("token_revoked", "the machine is revoked");
  }
  if (now >= it->second.expires_at) return Status::VerificationFailed("token_expired", "the token expired");
  auto pool = state_->pools.find(m->second.pool);
  if (pool == state_->pools.end()) return Status::NotFound("pool_unknown", "no pool '" + m->second.pool + "'");
  return Bearer{m->second, it->second, pool->second};
}

Result<EvidenceInputs> FakeStore::ReadEvidence(const std::string& session_id, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<EvidenceInputs> {
    EvidenceInputs in;
    in.session = state_->UsableSession(session_id, now);
    in.machine = state_->MustMachine(in.session.machine_id);
    in.last = state_->LastSuccess(in.machine.id);
    in.pool = state_->MustPool(in.machine.pool);
    return in;
  });
}

Result<ChallengeInputs> FakeStore::ReadChallenge(const Bytes& ek_hash) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<ChallengeInputs> {
    for (const auto& [id, m] : state_->machines) {
      if (m.ek_hash == ek_hash) return ChallengeInputs{m, state_->MustPool(m.pool)};
    }
    Fail(Status::NotFound("machine_unknown", "no machine with this EK"));
  });
}

Result<Machine> FakeStore::ConsumeSessionAndRecordSuccess(const AttestationRecord& record, const Token& token,
                                                          const std::optional<std::string>& tofu_pcrs_json,
                                                          int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckRecord(record);
    CheckOptJson("tofu_pcrs_json", tofu_pcrs_json);
    if (token.machine_id != record.machine_id) {
      return Status::InvalidArgument("field_invalid", "the token is for another machine than the attestation");
    }
    state_->CheckSessionIsTheRecords(record, now);
    Machine after = state_->RecordSuccess(record, token, tofu_pcrs_json);  // checks before it changes
    state_->sessions[record.session_id].used_at = now;
    return after;
  });
}

Status FakeStore::ConsumeSessionAndRecordFailure(const AttestationRecord& record, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    CheckRecord(record);
    state_->CheckSessionIsTheRecords(record, now);
    state_->RecordFailure(record);
    state_->sessions[record.session_id].used_at = now;
    return Status::Ok();
  });
}

Result<Machine> FakeStore::RecordAttestationSuccess(const AttestationRecord& record, const Token& token,
                                                    const std::optional<std::string>& tofu_pcrs_json) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckRecord(record);
    if (token.machine_id != record.machine_id) {
      return Status::InvalidArgument("field_invalid", "the token is for another machine than the attestation");
    }
    return state_->RecordSuccess(record, token, tofu_pcrs_json);
  });
}

Status FakeStore::RecordAttestationFailure(const AttestationRecord& record) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    CheckRecord(record);
    state_->RecordFailure(record);
    return Status::Ok();
  });
}

Result<AttestationRecord> FakeStore::LastSuccessfulAttestation(int64_t machine_id) {
  std::lock_guard lock(mu_);
  auto last = state_->LastSuccess(machine_id);
  if (!last) return Status::NotFound("attestation_unknown", "no successful attestation on record");
  return std::move(*last);
}

Result<std::vector<AttestationRecord>> FakeStore::RecentFailures(int limit) {
  std::lock_guard lock(mu_);
  std::vector<AttestationRecord> out;
  const size_t n = static_cast<size_t>(std::clamp(limit, 1, 10000));
  for (auto it = state_->attestations.rbegin(); it != state_->attestations.rend() && out.size() < n; ++it) {
    if (it->record.verdict == kVerdictRefused) out.push_back(it->record);
  }
  return out;
}

Status FakeStore::RecordBootObservation(const BootObservation& observation) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    const Machine& m = state_->MustMachine(observation.machine_id);
    BootObservation o = observation;
    o.hostname = m.hostname;
    o.tpm_manufacturer = m.tpm_manufacturer;
    o.tpm_model = m.tpm_model;
    state_->observations[m.id] = std::move(o);
    return Status::Ok();
  });
}

// --- CsrStore ------------------------------------------------------------------

namespace {

std::string CertificateDetail(const IssuedCertificate& cert) {
  return "{\"serial\":" + Quote(cert.serial) + ",\"kind\":" + Quote(cert.kind) +
         ",\"not_after\":" + std::to_string(cert.not_after) +
         ",\"tpm_resident\":" + (cert.tpm_resident ? "true" : "false") + "}";
}

}  // namespace

Result<Machine> FakeStore::RecordCertificateLocked(const IssuedCertificate& cert, const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    if (Status s = CheckCertificate(cert); !s.ok()) return s;
    Machine& m = state_->MustMachine(cert.machine_id);
    const bool client = cert.kind == kCertClient;
    if (client) {
      if (m.client_cert_issued_at) {
        Fail(Status::VerificationFailed("client_cert_already_issued",
                                        "a client certificate was already issued to '" + m.hostname +
                                            "' since its last reset"));
      }
      if (m.state != MachineState::kAttested && m.state != MachineState::kProvisioned) {
        Fail(Status::InvalidArgument("state_conflict", Is(m) + "; a client certificate needs attested or provisioned"));
      }
    } else if (m.state != MachineState::kProvisioned && m.state != MachineState::kJoined) {
      Fail(Status::InvalidArgument("state_conflict", Is(m) + "; a serving certificate needs provisioned or joined"));
    }
    for (const auto& c : state_->certificates) {
      if (c.cert.serial == cert.serial) Fail(Status::InvalidArgument("field_invalid", "the serial is taken"));
    }
    StoredCertificate stored{cert, state_->epochs[m.id]};
    stored.cert.hostname = m.hostname;
    stored.cert.issued_at = now;
    stored.cert.replaced_by.reset();
    stored.cert.since_reset = false;
    state_->certificates.push_back(std::move(stored));
    const MachineState from = m.state;
    if (client) {
      m.state = MachineState::kJoined;
      m.client_cert_issued_at = now;
      m.updated_at = now;
    }
    state_->Audit(actor, now, "certificate_issued", &m, from, m.state, CertificateDetail(cert));
    return m;
  });
}

Result<Machine> FakeStore::RecordCertificate(const IssuedCertificate& cert, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return RecordCertificateLocked(cert, actor, now);
}


Result<IssuedCertificate> FakeStore::FindClientCertificate(int64_t machine_id, const Bytes& public_key_sha256) {
  std::lock_guard lock(mu_);
  auto m = state_->machines.find(machine_id);
  if (m != state_->machines.end() && m->second.client_cert_issued_at) {
    for (auto it = state_->certificates.rbegin(); it != state_->certificates.rend(); ++it) {
      const IssuedCertificate& c = it->cert;
      if (c.machine_id == machine_id && c.kind == kCertClient && c.public_key_sha256 == public_key_sha256 &&
          c.issued_at >= *m->second.client_cert_issued_at) {
        return c;
      }
    }
  }
  return Status::NotFound("certificate_unknown", "no such client certificate");
}

Result<IssuedCertificate> FakeStore::GetCertificate(const std::string& serial) {
  std::lock_guard lock(mu_);
  for (const auto& c : state_->certificates) {
    if (c.cert.serial == serial) return state_->Filled(c);
  }
  return Status::NotFound("certificate_unknown", "no such certificate");
}

Result<std::vector<IssuedCertificate>> FakeStore::ListCertificates(const std::string& hostname, int limit) {
  std::lock_guard lock(mu_);
  std::vector<IssuedCertificate> out;
  const size_t n = static_cast<size_t>(std::clamp(limit, 1, 100000));
  for (auto it = state_->certificates.rbegin(); it != state_->certificates.rend() && out.size() < n; ++it) {
    if (hostname.empty() || it->cert.hostname == hostname) out.push_back(it->cert);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const IssuedCertificate& a, const IssuedCertificate& b) { return a.issued_at > b.issued_at; });
  return out;
}

Result<Machine> FakeStore::RecordRenewalLocked(const IssuedCertificate& cert, const std::string& replaces,
                                               const Actor& actor, int64_t now) {
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    if (Status s = CheckCertificate(cert); !s.ok()) return s;
    CheckSize("replaces", replaces.size(), 1, 64);
    Machine& m = state_->MustMachine(cert.machine_id);
    if (m.state != MachineState::kJoined) {
      Fail(Status::InvalidArgument("state_conflict", Is(m) + "; only a joined machine renews"));
    }
    StoredCertificate* old = nullptr;
    for (auto& c : state_->certificates) {
      if (c.cert.serial == replaces) old = &c;
      if (c.cert.serial == cert.serial) Fail(Status::InvalidArgument("field_invalid", "the serial is taken"));
    }
    if (old == nullptr || old->cert.machine_id != m.id || old->cert.kind != cert.kind ||
        old->epoch != state_->epochs[m.id]) {
      Fail(Status::VerificationFailed("renewal_proof_invalid",
                                      "the renewed certificate is not this machine's current " + cert.kind +
                                          " certificate"));
    }
    if (old->cert.replaced_by) {
      Fail(Status::VerificationFailed("renewal_proof_invalid", "the certificate was already renewed"));
    }
    old->cert.replaced_by = cert.serial;
    StoredCertificate stored{cert, state_->epochs[m.id]};
    stored.cert.hostname = m.hostname;
    stored.cert.issued_at = now;
    stored.cert.replaced_by.reset();
    stored.cert.since_reset = false;
    state_->certificates.push_back(std::move(stored));
    state_->Audit(actor, now, "certificate_renewed", &m, m.state, m.state,
                  "{\"serial\":" + Quote(cert.serial) + ",\"replaces\":" + Quote(replaces) +
                      ",\"kind\":" + Quote(cert.kind) + "}");
    return m;
  });
}

Result<Machine> FakeStore::RecordRenewal(const IssuedCertificate& cert, const std::string& replaces,
                                         const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return RecordRenewalLocked(cert, replaces, actor, now);
}


Status FakeStore::ConsumeCertifyNonceLocked(const Bytes& token_hash, int64_t now) {
  auto it = state_->tokens.find(token_hash);
  if (token_hash.empty() || it == state_->tokens.end()) return Status::NotFound("token_unknown", "unknown token");
  // One nonce, one use: the check and the mark under one lock.
  if (it->second.certify_nonce_used_at) {
    return Status::VerificationFailed("certify_nonce_used",
                                      "this attestation's nonce already certified a key for a CSR; attest again");
  }
  it->second.certify_nonce_used_at = now;
  return Status::Ok();
}

Status FakeStore::ConsumeCertifyNonce(const Bytes& token_hash, int64_t now) {
  std::lock_guard lock(mu_);
  return ConsumeCertifyNonceLocked(token_hash, now);
}

Result<Machine> FakeStore::RecordIssuedCertificate(const IssuedCertificateRecord& record, const Actor& actor,
                                                   int64_t now) {
  std::lock_guard lock(mu_);
  // One transaction: the fake rolls back by restoring a copy of its state.
  State before = *state_;
  if (record.certify_token_hash) {
    if (Status s = ConsumeCertifyNonceLocked(*record.certify_token_hash, now); !s.ok()) return s;
  }
  Result<Machine> recorded = record.replaces ? RecordRenewalLocked(record.certificate, *record.replaces, actor, now)
                                             : RecordCertificateLocked(record.certificate, actor, now);
  if (!recorded.ok()) *state_ = std::move(before);
  return recorded;
}


Result<CsrApprovalRequest> FakeStore::QueueCsrRequest(const CsrApprovalRequest& r, const CsrQueueLimits& limits,
                                                      const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<CsrApprovalRequest> {
    CheckActor(actor);
    if (r.kind != kCertClient && r.kind != kCertServing) {
      return Status::InvalidArgument("field_invalid", "a CSR request is client or serving");
    }
    CheckSize("public_key_sha256", r.public_key_sha256.size(), 1, kMaxHash);
    CheckSize("csr_pem", r.csr_pem.size(), 1, 64 * 1024);
    CheckSize("usages", r.usages.size(), 0, 16);
    Machine& m = state_->MustMachine(r.machine_id);
    const int64_t epoch = state_->epochs[m.id];
    int64_t mine = 0;
    int64_t all = 0;
    for (const auto& q : state_->csrs) {
      const bool current = q.epoch == state_->epochs[q.request.machine_id];
      if (q.request.machine_id == m.id && q.epoch == epoch && q.request.kind == r.kind &&
          q.request.public_key_sha256 == r.public_key_sha256) {
        return state_->Filled(q);  // the same key asks again: the same request
      }
      if (q.request.state == kCsrWaiting && current) {
        ++all;
        if (q.request.machine_id == m.id) ++mine;
      }
    }
    if (mine >= limits.max_waiting_per_machine) {
      Fail(Status::Unsupported("csr_flood_machine", "too many CSRs of this machine wait for an operator"));
    }
    if (all >= limits.max_waiting) {
      Fail(Status::Unsupported("csr_flood", "too many CSRs wait for an operator; come back later"));
    }
    StoredCsr q{r, epoch};
    q.request.id = state_->next_csr++;
    q.request.state = std::string(kCsrWaiting);
    q.request.deny_reason.clear();
    q.request.decided_by.clear();
    q.request.decided_at.reset();
    q.request.created_at = now;
    state_->csrs.push_back(q);
    state_->Audit(actor, now, "csr_waiting", &m, std::nullopt, std::nullopt,
                  "{\"id\":" + std::to_string(q.request.id) + ",\"kind\":" + Quote(r.kind) + "}");
    return state_->Filled(q);
  });
}

Result<CsrApprovalRequest> FakeStore::DecideCsrRequest(int64_t id, bool approve, const std::string& deny_reason,
                                                       const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<CsrApprovalRequest> {
    CheckActor(actor);
    if (!approve) {
      CheckSize("deny_reason", deny_reason.size(), 1, kMaxReason);
      if (!text::IsPrintableAscii(deny_reason)) {
        return Status::InvalidArgument("field_invalid", "a deny reason is printable ASCII");
      }
    }
    auto it = std::find_if(state_->csrs.begin(), state_->csrs.end(),
                           [&](const StoredCsr& q) { return q.request.id == id; });
    if (it == state_->csrs.end()) {
      return Status::NotFound("csr_request_unknown", "no CSR request " + std::to_string(id));
    }
    if (it->request.state != kCsrWaiting) {
      return Status::InvalidArgument("state_conflict",
                                     "CSR request " + std::to_string(id) + " is " + it->request.state + ", not waiting");
    }
    it->request.state = std::string(approve ? kCsrApproved : kCsrDenied);
    it->request.deny_reason = approve ? std::string() : deny_reason;
    it->request.decided_by = actor.name;
    it->request.decided_at = now;
    const Machine& m = state_->MustMachine(it->request.machine_id);
    std::string detail = "{\"id\":" + std::to_string(id) + ",\"kind\":" + Quote(it->request.kind);
    if (!approve) detail += ",\"reason\":" + Quote(deny_reason);
    state_->Audit(actor, now, approve ? "csr_approved" : "csr_denied", &m, std::nullopt, std::nullopt, detail + "}");
    return state_->Filled(*it);
  });
}

Result<std::vector<CsrApprovalRequest>> FakeStore::ListCsrRequests(bool all, int limit) {
  std::lock_guard lock(mu_);
  std::vector<CsrApprovalRequest> out;
  const size_t n = static_cast<size_t>(std::clamp(limit, 1, 100000));
  if (all) {
    for (auto it = state_->csrs.rbegin(); it != state_->csrs.rend() && out.size() < n; ++it) {
      out.push_back(state_->Filled(*it));
    }
  } else {
    for (const auto& q : state_->csrs) {
      if (out.size() >= n) break;
      CsrApprovalRequest r = state_->Filled(q);
      if (r.state == kCsrWaiting && r.current) out.push_back(std::move(r));
    }
  }
  return out;
}

// --- KubeApprovalStore ---------------------------------------------------------

namespace {

std::string KeyDetail(const AttestedKey& k) {
  return "{\"kind\":" + Quote(k.kind) + ",\"public_key_sha256\":" + Quote(hex::Encode(k.public_key_sha256)) +
         ",\"tpm_resident\":" + (k.tpm_resident ? "true" : "false") + "}";
}

std::string KubeCsrDetail(const KubeCsrDecision& d) {
  return "{\"name\":" + Quote(d.name) + ",\"uid\":" + Quote(d.uid) + ",\"kind\":" + Quote(d.kind) +
         ",\"purpose\":" + Quote(d.purpose) + ",\"reason\":" + Quote(d.reason) +
         ",\"public_key_sha256\":" + Quote(hex::Encode(d.public_key_sha256)) +
         ",\"requester\":" + Quote(d.requester) + "}";
}

bool MayRegisterKey(MachineState s) {
  return s == MachineState::kAttested || s == MachineState::kProvisioned || s == MachineState::kJoined;
}

// As kube_approvals.cc CheckJoinedInEpoch: an approved rotation or serving
// CSR needs a machine that joined in its current epoch.
void CheckJoinedInEpoch(const Machine& m, const KubeCsrDecision& d) {
  if (d.purpose == kKubePurposeJoin) return;
  if (m.state != MachineState::kJoined || !m.client_cert_issued_at) {
    Fail(Status::InvalidArgument(std::string(kKubeReasonNotJoined),
                                 Is(m) + " and has not joined since its last reset"));
  }
}

}  // namespace

AttestedKey* FakeStore::CurrentKeyLocked(int64_t machine_id, const std::string& kind, const Bytes& key_hash) {
  auto epoch = state_->epochs.find(machine_id);
  if (epoch == state_->epochs.end() || state_->machines.count(machine_id) == 0) return nullptr;
  for (auto& k : state_->attested_keys) {
    if (k.key.machine_id == machine_id && k.epoch == epoch->second && k.key.kind == kind &&
        k.key.public_key_sha256 == key_hash) {
      k.key.hostname = state_->machines[machine_id].hostname;
      k.key.current = true;
      return &k.key;
    }
  }
  return nullptr;
}

// The checks of an approved join, then its effects (storage/roles.h): a
// refusal changes nothing.
void FakeStore::ApplyApprovedJoinLocked(Machine& m, const KubeCsrDecision& d, int64_t now) {
  AttestedKey* key = CurrentKeyLocked(m.id, d.kind, d.public_key_sha256);
  if (key == nullptr || !key->used_by_uid.empty()) {
    Fail(Status::VerificationFailed("key_not_attested",
                                    "the CSR's key was not proven by '" + m.hostname +
                                        "' through an attested session since its last reset, or was used"));
  }
  if (m.client_cert_issued_at) {
    Fail(Status::VerificationFailed("client_cert_already_issued", "a client certificate was already issued to '" +
                                                                      m.hostname + "' since its last reset"));
  }
  if (!MayRegisterKey(m.state)) {
    Fail(Status::InvalidArgument("state_conflict", Is(m) + "; a node joins from attested or provisioned"));
  }
  key->used_by_uid = d.uid;
  m.state = MachineState::kJoined;
  m.client_cert_issued_at = now;
  m.updated_at = now;
}

Result<AttestedKey> FakeStore::RegisterAttestedKey(const AttestedKey& key,
                                                   const std::optional<Bytes>& certify_token_hash,
                                                   const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<AttestedKey> {
    CheckActor(actor);
    CheckAttestedKey(key);
    Machine& m = state_->MustMachine(key.machine_id);
    if (!MayRegisterKey(m.state)) {
      Fail(Status::InvalidArgument("state_conflict", Is(m) + "; a key is registered after attestation"));
    }
    if (AttestedKey* stored = CurrentKeyLocked(m.id, key.kind, key.public_key_sha256)) return *stored;
    // As kube_approvals.cc CheckKeyLimit.
    const int64_t since = m.last_attested_at.value_or(0);
    const auto registered = std::count_if(state_->attested_keys.begin(), state_->attested_keys.end(), [&](const StoredKey& k) {
      return k.key.machine_id == m.id && k.epoch == state_->epochs[m.id] && k.key.kind == key.kind &&
             k.key.registered_at >= since;
    });
    if (registered >= kMaxKeysPerKindPerAttestation) {
      Fail(Status::InvalidArgument("kubelet_key_limit", "attest again to register another " + key.kind + " key"));
    }
    if (certify_token_hash) {
      auto t = state_->tokens.find(*certify_token_hash);
      if (t == state_->tokens.end() || t->second.machine_id != m.id) {
        Fail(Status::NotFound("token_unknown", "unknown token"));
      }
      if (Status s = ConsumeCertifyNonceLocked(*certify_token_hash, now); !s.ok()) return s;
    }
    StoredKey stored{key, state_->epochs[m.id]};
    stored.key.hostname = m.hostname;
    stored.key.registered_at = now;
    stored.key.used_by_uid.clear();
    stored.key.current = true;
    state_->attested_keys.push_back(stored);
    state_->Audit(actor, now, "kubelet_key_registered", &m, m.state, m.state, KeyDetail(stored.key));
    return stored.key;
  });
}

Result<AttestedKey> FakeStore::FindAttestedKey(int64_t machine_id, const std::string& kind,
                                               const Bytes& public_key_sha256) {
  std::lock_guard lock(mu_);
  if (AttestedKey* k = CurrentKeyLocked(machine_id, kind, public_key_sha256)) return *k;
  return Status::NotFound("key_unknown", "no such key registered in the machine's current epoch");
}

Result<KubeCsrDecision> FakeStore::GetKubeCsr(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = state_->kube_csrs.find(uid);
  if (it == state_->kube_csrs.end()) return Status::NotFound("kube_csr_unknown", "no decision recorded for this CSR");
  KubeCsrDecision out = it->second;
  out.hostname = state_->MustMachine(out.machine_id).hostname;
  return out;
}

Result<KubeCsrDecision> FakeStore::RecordKubeCsr(const KubeCsrDecision& d, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<KubeCsrDecision> {
    CheckActor(actor);
    CheckKubeCsrDecision(d);
    Machine& m = state_->MustMachine(d.machine_id);
    if (state_->kube_csrs.count(d.uid) != 0) {
      Fail(Status::InvalidArgument("kube_csr_decided", "a decision on this CSR is already recorded"));
    }
    const MachineState from = m.state;
    if (d.decision == kCsrApproved && d.purpose == kKubePurposeJoin) ApplyApprovedJoinLocked(m, d, now);
    if (d.decision == kCsrApproved) CheckJoinedInEpoch(m, d);
    KubeCsrDecision out = d;
    out.hostname = m.hostname;
    out.created_at = now;
    out.decided_at = d.decision == kCsrWaiting ? std::nullopt : std::optional<int64_t>(now);
    state_->kube_csrs[out.uid] = out;
    state_->Audit(actor, now, "kubernetes_csr_" + out.decision, &m, from, m.state, KubeCsrDetail(out));
    return out;
  });
}

Result<KubeCsrDecision> FakeStore::DecideKubeCsr(const std::string& uid, bool approve, const std::string& reason,
                                                 const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<KubeCsrDecision> {
    CheckActor(actor);
    if (!approve) CheckDenyReason(reason);
    auto it = state_->kube_csrs.find(uid);
    if (it == state_->kube_csrs.end()) Fail(Status::NotFound("kube_csr_unknown", "no decision recorded for this CSR"));
    KubeCsrDecision& d = it->second;
    if (d.decision != kCsrWaiting) {
      Fail(Status::InvalidArgument("state_conflict", "the CSR " + d.name + " is " + d.decision + ", not waiting"));
    }
    Machine& m = state_->MustMachine(d.machine_id);
    const MachineState from = m.state;
    if (approve && d.purpose == kKubePurposeJoin) ApplyApprovedJoinLocked(m, d, now);
    if (approve) CheckJoinedInEpoch(m, d);
    d.decision = std::string(approve ? kCsrApproved : kCsrDenied);
    if (!approve) d.reason = reason;
    d.decided_by = actor.name;
    d.decided_at = now;
    d.hostname = m.hostname;
    state_->Audit(actor, now, "kubernetes_csr_" + d.decision, &m, from, m.state, KubeCsrDetail(d));
    return d;
  });
}

Result<std::vector<KubeCsrDecision>> FakeStore::ListKubeCsrs(bool waiting_only, int limit) {
  std::lock_guard lock(mu_);
  std::vector<KubeCsrDecision> all;
  for (const auto& [uid, d] : state_->kube_csrs) {
    if (waiting_only && d.decision != kCsrWaiting) continue;
    all.push_back(d);
    all.back().hostname = state_->MustMachine(d.machine_id).hostname;
  }
  // Oldest first (waiting_only) or newest first; ties by uid, as the SQL
  // backends order them.
  std::sort(all.begin(), all.end(), [&](const KubeCsrDecision& a, const KubeCsrDecision& b) {
    const bool older = a.created_at < b.created_at || (a.created_at == b.created_at && a.uid < b.uid);
    const bool newer = a.created_at > b.created_at || (a.created_at == b.created_at && a.uid > b.uid);
    return waiting_only ? older : newer;
  });
  if (all.size() > static_cast<size_t>(std::clamp(limit, 1, 100000))) all.resize(std::clamp(limit, 1, 100000));
  return all;
}

// --- IgnitionStore -------------------------------------------------------------

Result<Machine> FakeStore::RecordConfigServed(int64_t machine_id, const std::string& digest,
                                              const std::string& version, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckSize("digest", digest.size(), 1, 128);
    CheckSize("version", version.size(), 0, 32);
    Machine& m = state_->MustMachine(machine_id);
    if (m.state != MachineState::kAttested && m.state != MachineState::kProvisioned &&
        m.state != MachineState::kJoined) {
      Fail(Status::InvalidArgument("state_conflict", Is(m) + "; a config is served after attestation"));
    }
    const MachineState from = m.state;
    if (m.state == MachineState::kAttested) {
      m.state = MachineState::kProvisioned;
      m.updated_at = now;
    }
    state_->Audit(actor, now, "config_served", &m, from, m.state,
                  "{\"sha256\":" + Quote(digest) + ",\"version\":" + Quote(version) + "}");
    return m;
  });
}

Status FakeStore::RecordReport(const ProvisioningReportRecord& report) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    if (report.outcome != "ok" && report.outcome != "failed") {
      return Status::InvalidArgument("field_invalid", "a report's outcome is ok or failed");
    }
    ProvisioningReportRecord r = report;
    r.hostname = state_->MustMachine(report.machine_id).hostname;
    state_->reports[r.machine_id] = std::move(r);
    return Status::Ok();
  });
}

Result<ProvisioningReportRecord> FakeStore::LastReport(int64_t machine_id) {
  std::lock_guard lock(mu_);
  auto it = state_->reports.find(machine_id);
  if (it == state_->reports.end()) return Status::NotFound("report_unknown", "the machine never reported");
  return it->second;
}

Result<std::map<int64_t, ProvisioningReportRecord>> FakeStore::ListLastReports() {
  std::lock_guard lock(mu_);
  return state_->reports;
}

// --- PolicyStore, TrustStore ---------------------------------------------------

Result<Pool> FakeStore::SetPoolBootPolicy(const PoolPolicyChange&, const Actor&, int64_t) {
  return Unsupported("policy changes");
}

Result<std::vector<BootObservation>> FakeStore::ListBootObservations(const std::string& pool) {
  std::lock_guard lock(mu_);
  std::vector<BootObservation> out;
  for (const auto& [id, o] : state_->observations) {
    auto m = state_->machines.find(id);
    if (m != state_->machines.end() && m->second.pool == pool) out.push_back(o);
  }
  std::sort(out.begin(), out.end(),
            [](const BootObservation& a, const BootObservation& b) { return a.hostname < b.hostname; });
  return out;
}

Result<std::vector<Machine>> FakeStore::MarkStaleUntrusted(int64_t, const std::map<std::string, int64_t>&, int) {
  return Unsupported("the trust sweep");
}

Result<int64_t> FakeStore::CountUntrusted() {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& [id, m] : state_->machines) n += m.trust == kTrustUntrusted ? 1 : 0;
  return n;
}

// --- InventoryStore ------------------------------------------------------------

Result<Pool> FakeStore::PutPool(const Pool& pool, const Actor& actor, int64_t now,
                                const std::optional<Bytes>& first_token_hash,
                                const std::vector<PoolTemplateChange>& templates, PoolPutOutcome* outcome) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Pool> {
    CheckActor(actor);
    CheckPoolName(pool.name);
    for (const auto& t : templates) {
      if (t.which != kTemplatePublic && t.which != kTemplateAttested) {
        return Status::InvalidArgument("field_invalid", "a template is public or attested");
      }
    }
    auto it = state_->pools.find(pool.name);
    const bool created = it == state_->pools.end();
    Pool p = created ? Pool{} : it->second;
    p.name = pool.name;
    p.settings_json = pool.settings_json;
    p.boot_policy_json = pool.boot_policy_json;
    p.token_required = pool.token_required;
    if (created) p.created_at = now;
    p.updated_at = now;
    for (const auto& t : templates) {
      (t.which == kTemplatePublic ? p.public_template : p.attested_template) = t.template_json;
    }
    bool token_created = false;
    if (first_token_hash) {
      const bool has_current = std::any_of(state_->pool_tokens.begin(), state_->pool_tokens.end(),
                                           [&](const PoolToken& t) { return t.pool == p.name && !t.expires_at; });
      if (!has_current) {
        state_->pool_tokens.push_back(PoolToken{*first_token_hash, p.name, now, std::nullopt});
        token_created = true;
      }
    }
    state_->pools[p.name] = p;
    state_->Audit(actor, now, "pool_put", nullptr, std::nullopt, std::nullopt,
                  "{\"pool\":" + Quote(p.name) + ",\"created\":" + (created ? "true" : "false") + "}");
    if (outcome != nullptr) *outcome = PoolPutOutcome{created, token_created};
    return p;
  });
}

Result<Pool> FakeStore::SetPoolTemplate(const std::string& pool, std::string_view which,
                                        const std::optional<std::string>& template_json, const std::string& digest,
                                        const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Pool> {
    CheckActor(actor);
    if (which != kTemplatePublic && which != kTemplateAttested) {
      return Status::InvalidArgument("field_invalid", "a template is public or attested");
    }
    state_->MustPool(pool);
    Pool& p = state_->pools[pool];
    (which == kTemplatePublic ? p.public_template : p.attested_template) = template_json;
    p.updated_at = now;
    state_->Audit(actor, now, "pool_template_put", nullptr, std::nullopt, std::nullopt,
                  "{\"pool\":" + Quote(pool) + ",\"which\":" + Quote(std::string(which)) +
                      ",\"sha256\":" + Quote(digest) + "}");
    return p;
  });
}

Status FakeStore::RotatePoolToken(const std::string&, const Bytes&, int64_t, const Actor&, int64_t) {
  return Unsupported("token rotation");
}

// EnrollMerged's rules (store.h) on the maps, the same order of checks as
// the SQL backends' (storage/enrollment.cc); throws StoreError.
EnrollOutcome FakeStore::EnrollMergedIn(const Enrollment& given, const EnrollMerge& merge, size_t row,
                                        const Actor& actor, bool replace_ek, int64_t now) {
  Machine* old = nullptr;
  for (auto& [id, m] : state_->machines) {
    if (m.hostname == given.hostname) old = &m;
  }
  MachineState state = old ? old->state : given.state;
  if (old && old->ek_hash == given.ek_hash && old->state == MachineState::kPending &&
      given.state == MachineState::kEnrolled) {
    state = MachineState::kEnrolled;
  }
  Result<MergedEnrollment> merged = merge(row, old, state);
  if (!merged.ok()) Fail(merged.status());
  Enrollment in = merged->enrollment;
  in.hostname = given.hostname;
  in.ek_public = given.ek_public;
  in.ek_hash = given.ek_hash;
  in.state = given.state;
  CheckEnrollment(in);
  if (state_->pools.count(in.pool) == 0) Fail(Status::NotFound("pool_unknown", "no pool named '" + in.pool + "'"));
  for (auto& [id, m] : state_->machines) {
    if (m.ek_hash == in.ek_hash && &m != old) {
      Fail(Status::InvalidArgument("ek_in_use", "this EK is enrolled as " + m.hostname));
    }
  }
  const bool replaced = old != nullptr && old->ek_hash != in.ek_hash;
  if (replaced && !replace_ek) {
    Fail(Status::InvalidArgument("ek_conflict", "'" + in.hostname + "' is enrolled with another EK"));
  }
  if (old != nullptr && !replaced && merged->changed.empty()) return {*old, std::string(kEnrollUnchanged), {}};
  Machine m = old != nullptr ? *old : Machine{};
  const MachineState from = m.state;
  if (old == nullptr) {
    m.id = state_->next_machine++;
    m.created_at = now;
    state_->epochs[m.id] = 0;
  }
  m.hostname = in.hostname;
  m.pool = in.pool;
  m.addresses = in.addresses;
  m.policy_json = in.policy_json;
  m.vars_json = in.vars_json;
  if (old == nullptr || replaced || in.ek_certificate) {
    m.ek_certificate = in.ek_certificate;
    m.tpm_manufacturer = in.tpm_manufacturer;
    m.tpm_model = in.tpm_model;
    m.tpm_version = in.tpm_version;
  }
  m.ek_public = in.ek_public;
  m.ek_hash = in.ek_hash;
  m.state = old == nullptr || replaced ? in.state : state;
  if (replaced) {
    m.tofu_pcrs_json.reset();
    m.client_cert_issued_at.reset();
    ++state_->epochs[m.id];
    state_->DropCredentials(m.id);
    state_->DenyWaitingKubeCsrs(m.id, actor.name, now);
  }
  m.updated_at = now;
  state_->machines[m.id] = m;
  if (old == nullptr) {
    std::string relaxed;
    for (const auto& r : in.ek_relaxations) relaxed += (relaxed.empty() ? "" : ",") + Quote(r);
    state_->Audit(actor, now, "enroll", &m, std::nullopt, m.state,
                  in.ek_certificate && !relaxed.empty() ? "{\"ek_relaxed\":[" + relaxed + "]}" : "{}");
    return {m, std::string(kEnrollCreated), {}};
  }
  std::string changed;
  bool cert_changed = false;
  for (const auto& f : merged->changed) {
    changed += (changed.empty() ? "" : ",") + Quote(f);
    cert_changed = cert_changed || f == "ek_certificate";
  }
  // As the SQL stores write it (storage/enrollment.cc, AddEkRelaxations).
  std::string relaxed;
  for (const auto& r : in.ek_relaxations) relaxed += (relaxed.empty() ? "" : ",") + Quote(r);
  const bool name_relaxed = in.ek_certificate && !relaxed.empty() && (replaced || cert_changed);
  state_->Audit(actor, now, replaced ? "replace_ek" : "enroll_update", &m, from, m.state,
                "{\"changed\":[" + changed + "]" + (name_relaxed ? ",\"ek_relaxed\":[" + relaxed + "]" : "") + "}");
  if (!replaced) return {m, std::string(kEnrollUpdated), std::move(merged->changes)};
  std::vector<std::string> words{"ek replaced"};
  words.insert(words.end(), merged->changes.begin(), merged->changes.end());
  return {m, std::string(kEnrollReplacedEk), std::move(words)};
}

Result<EnrollOutcome> FakeStore::EnrollMerged(const Enrollment& e, const EnrollMerge& merge, const Actor& actor,
                                              bool replace_ek, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<EnrollOutcome> {
    CheckActor(actor);
    return EnrollMergedIn(e, merge, 0, actor, replace_ek, now);
  });
}

// All or nothing: the rows are applied to a copy of the state, which
// replaces it only when every row went in and this is no dry run.
Result<ImportReport> FakeStore::Import(const std::vector<ImportRow>& rows, const EnrollMerge& merge,
                                       const ImportOptions& options, const Actor& actor, int64_t now,
                                       const ImportProgress& progress) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<ImportReport> {
    CheckActor(actor);
    CheckNoImportDuplicates(rows);
    auto before = std::make_unique<State>(*state_);
    struct Restore {
      FakeStore* store;
      std::unique_ptr<State>* saved;
      bool keep = false;
      ~Restore() {
        if (!keep) std::swap(store->state_, *saved);
      }
    } restore{this, &before};
    ImportReport report;
    report.dry_run = options.dry_run;
    for (size_t i = 0; i < rows.size(); ++i) {
      EnrollOutcome o;
      try {
        o = EnrollMergedIn(rows[i].enrollment, merge, i, actor, /*replace_ek=*/false, now);
      } catch (const StoreError& err) {
        Fail(err.status().Annotate(rows[i].where + " (" + rows[i].enrollment.hostname + ")"));
      }
      ++(o.outcome == kEnrollCreated ? report.created : o.outcome == kEnrollUpdated ? report.updated
                                                                                     : report.unchanged);
      report.rows.push_back({rows[i].where, o.machine.hostname, std::move(o.outcome), std::move(o.changes)});
      if (progress) progress(i + 1, rows.size());
    }
    if (!rows.empty()) state_->Audit(actor, now, "import", nullptr, std::nullopt, std::nullopt, "{}");
    restore.keep = !options.dry_run;
    return report;
  });
}

Result<Machine> FakeStore::Approve(const std::string& hostname, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    Machine& m = state_->MustHost(hostname);
    return state_->TransitionIn(m, {MachineState::kPending}, MachineState::kEnrolled, actor, "approve", now);
  });
}

Result<Machine> FakeStore::Approve(const std::string& hostname, const ApprovalChanges& changes, const Actor& actor,
                                   int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    Machine& m = state_->MustHost(hostname);
    if (m.state != MachineState::kPending) Fail(Status::InvalidArgument("state_conflict", Is(m) + ", not pending"));
    const Enrollment e = ApprovedEnrollment(m, changes);
    state_->MustPool(e.pool);
    for (const auto& [id, other] : state_->machines) {
      if (id != m.id && other.hostname == e.hostname) {
        Fail(Status::InvalidArgument("hostname_taken", "'" + e.hostname + "' is already the hostname of a " +
                                                           std::string(StateName(other.state)) + " machine"));
      }
    }
    const Machine before = m;
    m.hostname = e.hostname;
    m.pool = e.pool;
    m.addresses = NormalizeAddresses(e.addresses);
    m.vars_json = e.vars_json;
    m.state = MachineState::kEnrolled;
    m.updated_at = now;
    state_->Audit(actor, now, "approve", &m, before.state, m.state,
                  "{\"old_hostname\":" + Quote(before.hostname) + ",\"hostname\":" + Quote(m.hostname) + "}");
    return m;
  });
}

Result<Machine> FakeStore::Revoke(const std::string& hostname, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    Machine& m = state_->MustHost(hostname);
    const std::vector<MachineState> from(std::begin(kAllMachineStates), std::end(kAllMachineStates));
    return state_->TransitionIn(m, from, MachineState::kRevoked, actor, "revoke", now);
  });
}

Result<Machine> FakeStore::Reset(const std::string& hostname, const Actor& actor, int64_t now, bool unrevoke) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    Machine& m = state_->MustHost(hostname);
    if (!Contains({MachineState::kAttested, MachineState::kProvisioned, MachineState::kJoined, MachineState::kRevoked},
                  m.state)) {
      Fail(Status::InvalidArgument("state_conflict", Is(m) + "; reset needs attested, provisioned, joined or revoked"));
    }
    if (m.state == MachineState::kRevoked && !unrevoke) Fail(RevokedRefusal(m.hostname));
    const MachineState from = m.state;
    m.state = MachineState::kEnrolled;
    m.tofu_pcrs_json.reset();
    m.client_cert_issued_at.reset();
    m.updated_at = now;
    ++state_->epochs[m.id];
    state_->DropCredentials(m.id);
    state_->DenyWaitingKubeCsrs(m.id, actor.name, now);
    state_->Audit(actor, now, "reset", &m, from, MachineState::kEnrolled,
                  from == MachineState::kRevoked ? "{\"unrevoked\":true}" : "{}");
    return m;
  });
}

Result<Machine> FakeStore::Transition(int64_t machine_id, const std::vector<MachineState>& from, MachineState to,
                                      const Actor& actor, const std::string& action, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    CheckState(to);
    for (MachineState f : from) CheckState(f);
    CheckSize("action", action.size(), 1, 64);
    Machine& m = state_->MustMachine(machine_id);
    return state_->TransitionIn(m, from, to, actor, action, now);
  });
}

namespace {

// machine_active unless `m` is pending, enrolled or revoked.
void CheckQuiet(const Machine& m, const std::string& verb) {
  if (!Contains({MachineState::kPending, MachineState::kEnrolled, MachineState::kRevoked}, m.state)) {
    Fail(Status::InvalidArgument("machine_active", Is(m) + "; " + verb + " needs pending, enrolled or revoked"));
  }
}

}  // namespace

Result<Machine> FakeStore::DeleteMachine(const std::string& hostname, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    const Machine m = state_->MustHost(hostname);
    CheckQuiet(m, "delete");
    state_->DropCredentials(m.id);
    std::erase_if(state_->attestations, [&](const auto& a) { return a.record.machine_id == m.id; });
    std::erase_if(state_->csrs, [&](const auto& c) { return c.request.machine_id == m.id; });
    std::erase_if(state_->attested_keys, [&](const auto& k) { return k.key.machine_id == m.id; });
    std::erase_if(state_->kube_csrs, [&](const auto& kv) { return kv.second.machine_id == m.id; });
    for (auto& c : state_->certificates) {
      if (c.cert.machine_id == m.id) c.epoch = -1;
    }
    state_->observations.erase(m.id);
    state_->reports.erase(m.id);
    state_->Audit(actor, now, "machine_deleted", &m, m.state, std::nullopt, "{}");
    state_->machines.erase(m.id);
    return m;
  });
}

Result<Machine> FakeStore::RenameMachine(const std::string& hostname, const std::string& new_hostname,
                                         const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<Machine> {
    CheckActor(actor);
    Machine& m = state_->MustHost(hostname);
    CheckQuiet(m, "rename");
    CheckHostname(new_hostname);
    if (new_hostname == hostname) return m;
    for (const auto& [id, other] : state_->machines) {
      if (other.hostname == new_hostname) {
        Fail(Status::InvalidArgument("hostname_taken", "'" + new_hostname + "' is the hostname of another machine"));
      }
    }
    m.hostname = new_hostname;
    for (auto& a : m.addresses) {
      if (a.kind == kAddressHostname && a.value == hostname) a.value = new_hostname;
    }
    m.addresses = NormalizeAddresses(m.addresses);
    m.updated_at = now;
    state_->Audit(actor, now, "machine_renamed", &m, m.state, m.state,
                  "{\"from\":" + Quote(hostname) + ",\"to\":" + Quote(new_hostname) + "}");
    return m;
  });
}

// --- EventStore: events are written by the SQL backends' triggers ---------------

Result<int64_t> FakeStore::SyncWebhooks(const std::vector<WebhookTarget>&, int64_t) { return Unsupported("events"); }
Result<std::vector<DueDelivery>> FakeStore::DueDeliveries(int64_t, int) { return Unsupported("events"); }
Result<std::vector<DueDelivery>> FakeStore::ClaimDueDeliveries(int64_t, int, int64_t) {
  return Unsupported("events");
}
Status FakeStore::RecordDeliveryAttempt(int64_t, const std::string&, bool, int64_t, const std::string&, int64_t) {
  return Unsupported("events");
}
Result<std::vector<Event>> FakeStore::ListEvents(const EventFilter&) { return Unsupported("events"); }
Result<int64_t> FakeStore::CountPendingDeliveries() { return Unsupported("events"); }
Result<int64_t> FakeStore::PurgeEvents(int64_t, int64_t) { return Unsupported("events"); }

// --- AuditStore ----------------------------------------------------------------

Status FakeStore::AuditAdminRefusal(const std::string& hostname, const std::string& detail_json, const Actor& actor,
                                    int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckOptJson("detail_json", detail_json);
    const Machine* m = nullptr;
    for (const auto& [id, candidate] : state_->machines) {
      if (candidate.hostname == hostname) m = &candidate;
    }
    state_->Audit(actor, now, "admin_refused", m, std::nullopt, std::nullopt, detail_json);
    return Status::Ok();
  });
}

Status FakeStore::AuditApplianceEvent(const std::string& action, const std::string& detail_json, const Actor& actor,
                                      int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    CheckActor(actor);
    CheckOptJson("detail_json", detail_json);
    state_->Audit(actor, now, action, nullptr, std::nullopt, std::nullopt, detail_json);
    return Status::Ok();
  });
}

Result<std::vector<AuditEntry>> FakeStore::ListAudit(const AuditFilter& filter) {
  std::lock_guard lock(mu_);
  const size_t limit = static_cast<size_t>(std::clamp(filter.limit, 1, 10000));
  std::vector<AuditEntry> matching;
  for (const auto& a : state_->audit) {
    if (filter.hostname && a.hostname != *filter.hostname) continue;
    if (a.id <= filter.since_id) continue;
    matching.push_back(a);
  }
  if (matching.size() > limit) {
    if (filter.since_id > 0) {
      matching.resize(limit);
    } else {
      matching.erase(matching.begin(), matching.end() - static_cast<std::ptrdiff_t>(limit));
    }
  }
  return matching;
}

Result<AuditChainReport> FakeStore::VerifyAuditChain(const std::optional<AuditAnchor>&) {
  return Unsupported("the audit chain");
}

// --- MaintenanceStore ----------------------------------------------------------

Result<PurgeCounts> FakeStore::PurgeExpired(int64_t now, int batch) {
  std::lock_guard lock(mu_);
  PurgeCounts counts;
  const int64_t limit = std::clamp(batch, 1, 100000);
  for (auto it = state_->sessions.begin(); it != state_->sessions.end() && counts.sessions < limit;) {
    if (it->second.expires_at <= now) {
      it = state_->sessions.erase(it);
      ++counts.sessions;
    } else {
      ++it;
    }
  }
  for (auto it = state_->tokens.begin(); it != state_->tokens.end() && counts.tokens < limit;) {
    if (it->second.expires_at <= now) {
      it = state_->tokens.erase(it);
      ++counts.tokens;
    } else {
      ++it;
    }
  }
  return counts;
}

Result<std::map<std::string, int64_t>> FakeStore::CountByState() {
  std::lock_guard lock(mu_);
  std::map<std::string, int64_t> out;
  for (MachineState s : kAllMachineStates) out[std::string(StateName(s))] = 0;
  for (const auto& [id, m] : state_->machines) ++out[std::string(StateName(m.state))];
  return out;
}

Result<int64_t> FakeStore::CountOpenSessions(int64_t now) {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& [id, s] : state_->sessions) n += !s.used_at && s.expires_at > now ? 1 : 0;
  return n;
}

FakeStore::WriteStats FakeStore::GetWriteStats() const {
  std::lock_guard lock(mu_);
  return state_->stats;
}

Status FakeStore::Backup(const std::string&) { return Unsupported("backups"); }

namespace {

// The SQL store's audit detail of a rotation: the caller's object with kind
// and both fingerprints (storage/ca_rotations.cc).
std::string RotationDetail(const std::string& detail_json, const CaRotation& r) {
  CheckOptJson("detail_json", detail_json);
  std::string inner = detail_json.empty() ? "{}" : detail_json;
  inner = inner.substr(0, inner.find_last_of('}'));
  const bool empty = inner.find_first_not_of(" \t\n{") == std::string::npos;
  return inner + (empty ? "" : ",") + "\"kind\":" + Quote(r.kind) + ",\"current_sha256\":" + Quote(r.current_sha256) +
         ",\"next_sha256\":" + Quote(r.next_sha256) + "}";
}

}  // namespace

Result<std::optional<CaRotation>> FakeStore::GetCaRotation(const std::string& kind) {
  std::lock_guard lock(mu_);
  auto it = state_->ca_rotations.find(kind);
  if (it == state_->ca_rotations.end()) return std::optional<CaRotation>();
  return std::optional<CaRotation>(it->second);
}

Result<CaRotation> FakeStore::PrepareCaRotation(const CaRotation& rotation, const std::string& detail_json,
                                                const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<CaRotation> {
    CheckActor(actor);
    if (rotation.kind != kCaKindAppliance || rotation.current_pem.empty() || rotation.next_pem.empty() ||
        rotation.current_sha256 == rotation.next_sha256) {
      return Status::InvalidArgument("field_invalid", "not a CA rotation");
    }
    if (state_->ca_rotations.count(rotation.kind)) {
      return Status::InvalidArgument("ca_rotation_in_progress", "a CA rotation is in progress already");
    }
    CaRotation r = rotation;
    r.stage = kCaStagePrepared;
    r.prepared_at = now;
    r.switched_at = std::nullopt;
    state_->Audit(actor, now, "ca_rotation_prepared", nullptr, std::nullopt, std::nullopt,
                  RotationDetail(detail_json, r));
    state_->ca_rotations[r.kind] = r;
    return r;
  });
}

Result<CaRotation> FakeStore::SwitchCaRotation(const std::string& kind, const std::string& next_sha256,
                                               const std::string& detail_json, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Result<CaRotation> {
    CheckActor(actor);
    auto it = state_->ca_rotations.find(kind);
    if (it == state_->ca_rotations.end()) return Status::InvalidArgument("ca_rotation_none", "no CA rotation");
    if (it->second.next_sha256 != next_sha256) {
      return Status::InvalidArgument("ca_next_mismatch", "another next CA than the recorded one");
    }
    CaRotation& r = it->second;
    if (!r.switched_at) r.switched_at = now;
    r.stage = kCaStageSwitched;
    state_->Audit(actor, now, "ca_rotation_switched", nullptr, std::nullopt, std::nullopt,
                  RotationDetail(detail_json, r));
    return r;
  });
}

Status FakeStore::RetireCaRotation(const std::string& kind, const std::string& next_sha256,
                                   const std::string& detail_json, const Actor& actor, int64_t now) {
  std::lock_guard lock(mu_);
  return Guard([&]() -> Status {
    CheckActor(actor);
    auto it = state_->ca_rotations.find(kind);
    if (it == state_->ca_rotations.end()) return Status::InvalidArgument("ca_rotation_none", "no CA rotation");
    if (it->second.next_sha256 != next_sha256) {
      return Status::InvalidArgument("ca_next_mismatch", "another next CA than the recorded one");
    }
    if (it->second.stage != kCaStageSwitched) {
      return Status::InvalidArgument("ca_rotation_stage", "retire comes after switch");
    }
    state_->Audit(actor, now, "ca_rotation_retired", nullptr, std::nullopt, std::nullopt,
                  RotationDetail(detail_json, it->second));
    state_->ca_rotations.erase(it);
    return Status::Ok();
  });
}

}  // namespace rackgate::storage::testing
