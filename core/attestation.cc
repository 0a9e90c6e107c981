// The attestation protocol's decisions: challenge, evidence, bearer tokens.
#include "core/attestation.h"

#include "core/appliance_ca.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>
#include <stdexcept>

#include "attest/boot_facts.h"
#include "attest/boot_policy.h"
#include "attest/credential.h"
#include "attest/ek_identity.h"
#include "attest/eventlog.h"
#include "attest/quote.h"
#include "core/csr_service.h"
#include "core/pool_settings.h"
#include "core/secrets.h"
#include "core/trust.h"
#include "base/log.h"
#include "storage/audit_detail.h"
#include "wire/boot_policy_json.h"
#include "wire/codec.h"
#include "wire/pcr_signature_json.h"
#include "base/hex.h"

namespace rackgate::core {

namespace {

using attest::Bytes;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("protocol");
  return log;
}

std::string Short(std::span<const uint8_t> ek_hash) { return hex::Encode(ek_hash).substr(0, 16); }

std::string Who(const storage::Machine& m) { return m.hostname + " ek=" + Short(m.ek_hash); }

// The PCR selection a machine must quote: the configured default, plus what
// its boot policy names (golden and TOFU PCRs, and the PCRs its rules read
// from the event log: attest::PcrsReadFromLog).
std::vector<attest::PcrSelection> Selection(const std::vector<attest::PcrSelection>& base,
                                            const attest::BootPolicy* policy, bool observe) {
  std::map<uint16_t, std::set<uint32_t>> want;
  for (const auto& s : base) want[s.hash_alg].insert(s.pcrs.begin(), s.pcrs.end());
  if (observe) {
    const uint16_t bank = base.empty() ? attest::kAlgSha256 : base.front().hash_alg;
    want[bank].insert(std::begin(kObservedPcrs), std::end(kObservedPcrs));
  }
  if (policy != nullptr) {
    for (const auto& [alg, bank] : policy->pcrs) {
      for (const auto& [pcr, v] : bank) want[alg].insert(pcr);
    }
    for (const auto& s : policy->tofu) want[s.hash_alg].insert(s.pcrs.begin(), s.pcrs.end());
    // The PCRs the rules read from the event log (attest::PcrsReadFromLog:
    // grub's command line in 8, the files it read in 9, systemd-boot's and
    // systemd-stub's command lines in 12, a UKI's sections in 11, ...).
    // Events in a PCR that is not quoted are unverified.
    const uint16_t bank = base.empty() ? attest::kAlgSha256 : base.front().hash_alg;
    for (uint32_t pcr : attest::PcrsReadFromLog(*policy)) want[bank].insert(pcr);
  }
  std::vector<attest::PcrSelection> out;
  for (const auto& [alg, pcrs] : want) out.push_back({alg, std::vector<uint32_t>(pcrs.begin(), pcrs.end())});
  return out;
}

// PCR values as stored (attestation records, TOFU values): the document
// `rackgatectl policy check --tofu-recorded` reads, {"pcrs": {...}}.
std::string PcrDocument(const attest::PcrValues& pcrs) {
  return "{\"pcrs\": " + wire::FormatPcrValuesJson(pcrs) + "}";
}

// A refusal of the evidence or the machine. A check's own refusal is passed
// on with its code: its reason's row (wire/reasons.def) makes it as final
// (403) as a forged quote.
Status Denied(std::string reason, std::string message) {  // reason-helper: VerificationFailed
  return Status::VerificationFailed(std::move(reason), std::move(message));
}

}  // namespace

Status StoreBusy(const Status& cause) {
  // fleet: a lost database keeps its reason, so an agent's log and the
  // refusal metrics tell a failover from load (docs/ha.md); status_http
  // answers it with a fixed message, never the server's words.
  if (cause.reason() == "db_unavailable") return Status::IoError("db_unavailable", "the database is unavailable");
  return Status::Unsupported("busy", "try again later");
}

AttestationService::AttestationService(storage::AttestationStore* store, const TrustAnchors* anchors,
                                       AttestationOptions options, Metrics* metrics, Clock clock)
    : store_(store),
      anchors_(anchors),
      options_(std::move(options)),
      metrics_(metrics),
      clock_(std::move(clock)),
      gate_(std::max(1, options_.max_open_sessions), std::max(1, options_.max_open_sessions_per_client)) {
  if (!clock_) {
    clock_ = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
}

void AttestationService::Count(const std::string& verdict, const std::string& reason) {
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_attestations_total", "Attestation decisions by verdict and reason.",
                         {{"verdict", verdict}, {"reason", reason}});
  }
}

Status AttestationService::Refuse(Status refusal, const std::string& who, bool waitable) {
  Log()->info("refused {}: {} ({})", who, refusal.reason(), refusal.message());
  Count(waitable ? "wait" : "refused", refusal.reason());
  return refusal;
}

Status AttestationService::RefuseAnonymous(const Status& refusal, const storage::Machine& machine,
                                           const Caller& caller) {
  const std::string address = ClientAddress(caller.address);
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_anonymous_refusals_total",
                         "Evidence refused before its sender proved possession of the machine's TPM, by reason.",
                         {{"reason", refusal.reason()}});
  }
  Count("refused", refusal.reason());
  auto summary = anonymous_.Record(machine.id, machine.hostname, refusal.reason(), address, clock_());
  if (summary) {
    WriteAnonymousSummary(*summary);
  } else {
    Log()->debug("anonymous refusal for {} from {}: {}", Who(machine), address, refusal.reason());
  }
  return refusal;
}

void AttestationService::WriteAnonymousSummary(const AnonymousSummary& summary) {
  storage::AuditDetail reasons;
  for (const auto& [reason, n] : summary.reasons) reasons.Int(reason, static_cast<int64_t>(n));
  const std::string reasons_json = reasons.Json();
  storage::AuditDetail detail;
  detail.Int("count", static_cast<int64_t>(summary.count))
      .Object("reasons", std::move(reasons))
      .Int("first_at", summary.first_at)
      .Int("last_at", summary.last_at)
      .Texts("from", summary.addresses);
  std::string from;
  for (const auto& a : summary.addresses) from += (from.empty() ? "" : ", ") + a;
  Log()->warn("anonymous refusals for {}: {} since {} from {} ({}); the machine's trust is unchanged",
              summary.hostname, summary.count, summary.first_at, from, reasons_json);
  if (Status s = store_->AuditMachineEvent(summary.machine_id, "anonymous_refusals", detail.Json(),
                                           storage::Actor{"rackgated", "refused before proof of the TPM"}, clock_());
      !s.ok()) {
    Log()->error("anonymous refusals of {} not audited: {}", summary.hostname, s.ToString());
  }
}

int AttestationService::FlushAnonymousRefusals() {
  const auto due = anonymous_.TakeDue(clock_());
  for (const auto& summary : due) WriteAnonymousSummary(summary);
  return static_cast<int>(due.size());
}

Result<AttestationService::Release> AttestationService::AuthorizeRelease(const std::optional<std::string>& token) {
  auto auth = Authenticate(token);
  if (!auth.ok()) return auth.status();
  return AuthorizeRelease(std::move(auth).value());
}

Result<AttestationService::Release> AttestationService::AuthorizeRelease(storage::Bearer bearer) {
  Release out{std::move(bearer), {}, {}};
  const storage::Machine& m = out.bearer.machine;
  // The pool was read with the token (one snapshot).
  out.pool = out.bearer.pool;
  auto settings = ParsePoolSettings(out.pool.settings_json);
  if (!settings.ok()) {
    Log()->error("pool {} settings unusable: {}", m.pool, settings.status().ToString());
    return Status::InvalidArgument("settings_invalid", "the pool's settings cannot be used");
  }
  out.settings = std::move(settings).value();
  // SECURITY: a token outlives the attestation that earned it; a later
  // failed attestation (or an age past the pool's) withdraws what the token
  // may still release.
  if (Status s = CheckTrust(m, out.settings, clock_()); !s.ok()) return s;
  return out;
}

Status AttestationService::Observe(const storage::Machine& machine, const wire::EvidenceRequest& req,
                                   const Verdict& verdict, bool has_policy, const std::string& who) {
  storage::BootObservation o;
  o.machine_id = machine.id;
  o.pool = machine.pool;
  o.at = clock_();
  if (req.event_log) o.event_log = *req.event_log;
  o.pcrs_json = PcrDocument(verdict.pcrs);
  o.verdict = !has_policy ? "none" : verdict.attested() ? "pass" : "fail";
  std::string rules;
  for (const auto& violation : verdict.violations) {
    o.violations.push_back(violation.rule + ":" + violation.reason);
    rules += (rules.empty() ? "" : ", ") + o.violations.back();
  }
  if (Status s = store_->RecordBootObservation(o); !s.ok()) {
    Log()->error("observation of {} not stored: {}", who, s.ToString());
    return StoreBusy(s);
  }
  if (metrics_ != nullptr) {
    metrics_->CounterInc("rackgate_boot_policy_observations_total",
                         "Boots kept by pools observing boot policy (not enforced), by pool and verdict.",
                         {{"pool", machine.pool}, {"verdict", o.verdict}});
  }
  // Loud on purpose: an observing pool must never pass for an enforcing one.
  Log()->warn("OBSERVE pool {}: boot policy NOT ENFORCED for {}: verdict {}{}{}", machine.pool, who, o.verdict,
              rules.empty() ? "" : ": ", rules);
  if (o.verdict == "pass") return Status::Ok();
  return Status::Unsupported("boot_policy_observing",
                             "the pool is observing boot policy; this machine waits for an operator to accept one");
}

Result<attest::EkCertInfo> AttestationService::CheckEkCertificate(std::span<const uint8_t> cert,
                                                                 const std::vector<Bytes>& intermediates,
                                                                 const attest::TpmPublic* ek_public) const {
  const auto anchors = anchors_->Get();
  const int64_t now = clock_();
  std::string key(cert.begin(), cert.end());
  for (const auto& i : intermediates) key.append(reinterpret_cast<const char*>(i.data()), i.size()).push_back('\0');
  key = Sha256Hex(key);
  std::optional<attest::EkCertInfo> info;
  {
    std::lock_guard<std::mutex> l(ek_cache_mu_);
    auto it = ek_cache_.find(key);
    if (it != ek_cache_.end() && it->second.anchors == anchors && now >= it->second.info.not_before &&
        now < it->second.info.not_after) {
      info = it->second.info;
    }
  }
  if (info) {
    info->der.assign(cert.begin(), cert.end());  // the cache keeps no copy (the key is its hash)
  } else {
    auto verified = attest::VerifyEkCertificate(*anchors, cert, now, intermediates);
    if (!verified.ok()) return verified.status();
    info = std::move(verified).value();
    EkVerdict verdict{anchors, *info};
    verdict.info.der.clear();
    verdict.info.der.shrink_to_fit();
    std::lock_guard<std::mutex> l(ek_cache_mu_);
    // Bounded: a fleet's worth; past that, start over rather than track age.
    if (ek_cache_.size() >= 100000) ek_cache_.clear();
    ek_cache_[key] = std::move(verdict);
  }
  if (ek_public != nullptr) {
    if (Status s = attest::CheckEkPublicMatchesCertificate(*ek_public, *info); !s.ok()) return s;
  }
  return *info;
}

Status AttestationService::Busy(const std::string& reason, const std::string& who) {  // reason-helper: Unsupported
  Count("wait", reason);
  Log()->debug("refused {}: {} (over the admission bound)", who, reason);
  return Status::Unsupported(reason, "the appliance is busy; come back after Retry-After");
}

AttestationService::PolicyInForce AttestationService::PolicyFor(const storage::Machine& m,
                                                                const storage::Pool& pool) {
  PolicyInForce out;
  // The pool's mode applies to every machine in it, whichever policy
  // judges the machine.
  out.observe = pool.boot_policy_mode == storage::kPolicyModeObserve;
  const std::optional<std::string>& text =
      m.policy_json && !m.policy_json->empty() ? m.policy_json : pool.boot_policy_json;
  if (text && !text->empty()) {
    auto parsed = policies_.Policy(*text);
    if (parsed.ok()) {
      out.policy = std::move(parsed).value();
    } else {
      out.unusable = parsed.status();
    }
  }
  return out;
}

Status AttestationService::ShedLoad(const Caller& caller) {
  // The appliance is behind (this request waited for a handler thread):
  // put off a new machine before even parsing what it sent.
  if (options_.busy_queue_delay_ms > 0 && caller.queued > std::chrono::milliseconds(options_.busy_queue_delay_ms)) {
    return Busy("busy", caller.address);
  }
  return Status::Ok();
}

// An EK no enrollment holds: told to wait (503) and shown to operators; with
// discovery on, a genuine TPM is recorded as pending for an operator to approve.
Status AttestationService::UnknownEk(const wire::ChallengeRequest& req, const attest::TpmPublic& ek,
                                     const Bytes& ek_hash, const Caller& caller, const std::string& who) {
  // Observability: an unknown EK that knocked, for `rackgatectl status`.
  auto knocked = [&](const std::string& reason) {
    std::optional<std::span<const uint8_t>> cert;
    if (req.ek_certificate) cert = std::span<const uint8_t>(*req.ek_certificate);
    unknown_eks_.Record(hex::Encode(ek_hash), ClientAddress(caller.address), reason, cert, clock_(), req.ek_public);
  };
  if (!options_.discovery || !req.ek_certificate) {
    knocked("machine_not_enrolled");
    return Refuse(Status::NotFound("machine_not_enrolled", "this machine is not enrolled yet"), who, true);
  }
  // Discovery: a genuine TPM (its certificate chains to a trusted root and
  // carries this EK) is recorded as pending for an operator to approve.
  auto info = CheckEkCertificate(*req.ek_certificate, req.ek_intermediates, &ek);
  if (!info.ok()) {
    // Not recorded, and told to wait as with discovery off
    // (docs/operations.md, 5b): a rack powered on before its vendor root
    // (or intermediate) is installed must keep asking, not give up. The
    // certificate's own reason goes to the log and `rackgatectl status`.
    knocked(info.status().reason());
    Log()->info("discovery skips {}: {} ({})", who, info.status().reason(), info.status().message());
    return Refuse(Status::NotFound("machine_not_enrolled", "this machine is not enrolled yet"), who, true);
  }
  storage::Enrollment e;
  e.hostname = "pending-" + Short(ek_hash);
  e.pool = options_.discovery_pool;
  e.ek_public = req.ek_public;
  e.ek_hash = ek_hash;
  e.ek_certificate = info->der;
  e.tpm_manufacturer = info->tpm_manufacturer;
  e.tpm_model = info->tpm_model;
  e.tpm_version = info->tpm_version;
  e.state = storage::MachineState::kPending;
  auto enrolled = store_->Enroll(e, storage::Actor{"discovery", "first challenge from " + caller.address},
                                 false, clock_());
  if (!enrolled.ok()) Log()->warn("discovery of {} not recorded: {}", who, enrolled.status().ToString());
  return Refuse(Status::NotFound("machine_pending", "this machine waits for an operator's approval"), who, true);
}

// MakeCredential over a fresh secret for the EK and the AK's name, and the
// session that the evidence must answer, stored (only the secret's hash).
Result<ChallengeResult> AttestationService::OpenSession(const wire::ChallengeRequest& req, const attest::TpmPublic& ek,
                                                        const attest::TpmPublic& ak, const storage::Machine& machine,
                                                        const std::vector<attest::PcrSelection>& selection,
                                                        const std::string& who) {
  Bytes secret = RandomBytes(32);
  const Bytes ak_name = attest::ObjectName(ak);
  auto cred = attest::MakeCredential(ek, ak_name, secret);
  if (!cred.ok()) {
    OPENSSL_cleanse(secret.data(), secret.size());
    return Refuse(cred.status(), who);
  }
  storage::Session session;
  session.id = wire::Base64UrlEncode(RandomBytes(18));
  session.machine_id = machine.id;
  session.nonce = RandomBytes(32);
  // Only the secret's hash is stored: a copy of the database does not let
  // anyone answer an open challenge.
  session.secret_hash = Sha256(secret);
  OPENSSL_cleanse(secret.data(), secret.size());
  session.ak_public = req.ak_public;
  session.ak_name = ak_name;
  session.pcr_selection = attest::FormatPcrSelectionList(selection);
  session.created_at = clock_();
  session.expires_at = session.created_at + options_.session_ttl_seconds;
  if (Status s = store_->CreateSession(session); !s.ok()) {
    Log()->error("session for {} not stored: {}", who, s.ToString());
    return StoreBusy(s);
  }
  Log()->info("challenge {}: session {} pcrs {}", who, session.id, session.pcr_selection);
  ChallengeResult out;
  out.session = session.id;
  out.nonce = session.nonce;
  out.pcr_selection = selection;
  out.credential = attest::EncodeCredentialFile(*cred);
  out.expires_in = options_.session_ttl_seconds;
  return out;
}

Result<ChallengeResult> AttestationService::Challenge(const std::function<Result<wire::ChallengeRequest>()>& decode,
                                                      const Caller& caller) {
  if (Status s = ShedLoad(caller); !s.ok()) return s;
  auto req = decode();
  if (!req.ok()) return req.status();
  return Challenge(*req, caller);
}

Result<ChallengeResult> AttestationService::Challenge(const wire::ChallengeRequest& req, const Caller& caller) {
  // Admission first: nothing below (database, EK chain, MakeCredential) runs
  // for a challenge the appliance could not see through.
  uint64_t ticket = 0;
  const int64_t admitted_at = clock_();
  switch (gate_.Admit(ClientAddress(caller.address), admitted_at, admitted_at + options_.session_ttl_seconds,
                      &ticket)) {
    case SessionGate::Verdict::kAdmitted: break;
    case SessionGate::Verdict::kFull: return Busy("busy", caller.address);
    case SessionGate::Verdict::kClientFull: return Busy("busy_client", caller.address);
  }
  struct Reservation {
    SessionGate* gate;
    uint64_t ticket;
    bool bound = false;
    ~Reservation() {
      if (!bound) gate->Release(ticket);
    }
  } reservation{&gate_, ticket};

  auto ek = attest::ParseTpm2bPublic(req.ek_public);
  if (!ek.ok()) return Status::InvalidArgument("field_invalid", "ek_public: " + ek.status().message());
  auto ak = attest::ParseTpm2bPublic(req.ak_public);
  if (!ak.ok()) return Status::InvalidArgument("field_invalid", "ak_public: " + ak.status().message());
  auto ek_hash = attest::EkKeyHash(*ek);
  if (!ek_hash.ok()) return Status::InvalidArgument("field_invalid", "ek_public: " + ek_hash.status().message());
  std::string who = "ek=" + Short(*ek_hash) + " from " + caller.address;

  // The machine and its pool, in one read (docs/performance.md, "Round
  // trips per joined machine").
  auto challenged = store_->ReadChallenge(*ek_hash);
  if (!challenged.ok()) {
    if (challenged.status().code() != Status::Code::kNotFound ||
        challenged.status().reason() != "machine_unknown") {
      Log()->error("store error for {}: {}", who, challenged.status().ToString());
      return StoreBusy(challenged.status());
    }
    return UnknownEk(req, *ek, *ek_hash, caller, who);
  }
  const storage::Machine* machine = &challenged->machine;
  who = Who(*machine);
  if (machine->state == storage::MachineState::kPending) {
    return Refuse(Status::NotFound("machine_pending", "this machine waits for an operator's approval"), who, true);
  }
  if (machine->state == storage::MachineState::kRevoked) return Refuse(Denied("machine_revoked", "this machine is revoked"), who);

  // The EK certificate: the one presented, else the one on record. Checked
  // at every challenge, so that removing a vendor root takes effect at once.
  std::optional<Bytes> cert = req.ek_certificate;
  if (!cert && machine->ek_certificate) cert = machine->ek_certificate;
  std::vector<std::string> ek_relaxations;
  if (cert) {
    auto info = CheckEkCertificate(*cert, req.ek_intermediates, &*ek);
    if (!info.ok()) return Refuse(info.status(), who);
    ek_relaxations = info->relaxations_used;
  } else if (options_.require_ek_certificate) {
    return Refuse(Denied("ek_cert_missing", "no EK certificate was presented or enrolled"), who);
  }

  if (Status s = attest::CheckAkPolicy(*ak); !s.ok()) return Refuse(s, who);
  auto ak_key = attest::VerifyKey::FromTpmPublic(*ak);
  if (!ak_key.ok()) return Status::InvalidArgument("field_invalid", "ak_public: " + ak_key.status().message());

  const PolicyInForce policy = PolicyFor(*machine, challenged->pool);
  if (!policy.unusable.ok()) {
    Log()->error("boot policy of {} is unusable: {}", who, policy.unusable.ToString());
    return Refuse(Status::Corruption("policy_invalid", "this machine's boot policy is being fixed"), who, true);
  }
  const auto selection = Selection(options_.default_pcr_selection, policy.policy.get(), policy.observe);

  auto out = OpenSession(req, *ek, *ak, *machine, selection, who);
  if (!out.ok()) return out.status();
  // The AK's key, kept for this session's evidence (built once per session).
  gate_.Bind(ticket, out->session,
             std::make_shared<const SessionAk>(SessionAk{req.ak_public, std::move(*ak_key), std::move(ek_relaxations)}));
  reservation.bound = true;
  return out;
}

Verdict AttestationService::Verify(const wire::EvidenceRequest& req, const EvidenceContext& ctx) {
  const storage::Session& session = *ctx.session;
  const storage::Machine& machine = *ctx.machine;
  Verdict v;
  v.machine_id = machine.id;
  v.hostname = machine.hostname;
  auto refuse = [&v](Status s) {
    v.outcome = Verdict::Outcome::kRefused;
    v.refusal = std::move(s);
    return v;
  };

  // Proof that the AK lives in the TPM holding the enrolled EK. Compared as
  // hashes in constant time; the message never says how it differed. First:
  // every refusal before it is anonymous (docs/trust.md), so nothing else is
  // judged, or told, to a sender who has not proven it holds the TPM.
  const Bytes got = Sha256(req.secret);
  if (!ConstantTimeEquals(got, session.secret_hash)) {
    return refuse(Denied("activation_failed", "the credential was not activated by the enrolled TPM"));
  }
  // SECURITY: from here on, a refusal is the machine's own (its TPM
  // answered); before here, anyone who knows its EK could have caused it.
  v.possession_proven = true;

  // Revoked (or back to pending) since its challenge: the machine's own
  // refusal, recorded as its history; a revoked machine has no trust to lose.
  if (machine.state == storage::MachineState::kRevoked) return refuse(Denied("machine_revoked", "this machine is revoked"));
  if (machine.state == storage::MachineState::kPending) {
    return refuse(Status::InvalidArgument("state_conflict", "this machine is not enrolled"));
  }

  // The AK's key: the one the challenge built, when it is this session's AK
  // byte for byte, else built again from the stored AK.
  std::optional<attest::VerifyKey> rebuilt;
  const attest::VerifyKey* key = nullptr;
  if (ctx.challenged_ak != nullptr && ctx.challenged_ak->ak_public == session.ak_public) {
    key = &ctx.challenged_ak->key;
  } else {
    auto ak = attest::ParseTpm2bPublic(session.ak_public);
    if (!ak.ok()) throw std::runtime_error("stored AK does not parse: " + ak.status().ToString());
    auto built = attest::VerifyKey::FromTpmPublic(*ak);
    if (!built.ok()) throw std::runtime_error("stored AK is not a key: " + built.status().ToString());
    key = &rebuilt.emplace(std::move(*built));
  }
  auto selection = attest::ParsePcrSelectionList(session.pcr_selection);
  if (!selection.ok()) throw std::runtime_error("stored selection does not parse");
  auto quote = attest::VerifyQuote(*key, req.quote, req.signature, req.pcrs, session.nonce, *selection);
  if (!quote.ok()) {
    // PCR values that do not cover the selection are a malformed request
    // (400); every other quote failure is a refusal.
    if (quote.status().reason() == "pcr_values_incomplete") return refuse(quote.status());
    return refuse(quote.status());
  }
  v.quote_verified = true;
  v.counters.reset_count = quote->clock.reset_count;
  v.counters.restart_count = quote->clock.restart_count;
  v.counters.clock = quote->clock.clock;
  v.counters.firmware_version = quote->firmware_version;
  v.pcrs = quote->pcrs;

  // The TPM's counters only go forward: a lower resetCount means an old
  // TPM state (a restored snapshot, a clone) is answering.
  if (const storage::AttestationRecord* last = ctx.last; last != nullptr) {
    if (v.counters.reset_count < last->reset_count) {
      return refuse(Denied("reset_count_regressed", "the TPM's reset counter went backwards"));
    }
    if (v.counters.reset_count == last->reset_count) {
      if (v.counters.restart_count < last->restart_count) {
        return refuse(Denied("restart_count_regressed", "the TPM's restart counter went backwards"));
      }
      if (v.counters.restart_count == last->restart_count && v.counters.clock < last->clock) {
        return refuse(Denied("clock_regressed", "the TPM's clock went backwards"));
      }
    }
  }

  std::optional<attest::EventLog> log;
  if (req.event_log) {
    auto parsed = attest::ParseEventLog(*req.event_log);
    if (!parsed.ok()) return refuse(parsed.status());
    auto replayed = attest::Replay(*parsed);
    if (!replayed.ok()) return refuse(replayed.status());
    if (Status s = attest::CompareLogWithQuote(*replayed, quote->pcrs); !s.ok()) return refuse(s);
    log = std::move(parsed).value();
  }

  if (ctx.policy_unusable) {
    return refuse(Status::Corruption("policy_invalid", "this machine's boot policy is being fixed"));
  }
  if (ctx.policy != nullptr) {
    attest::Evidence evidence;
    evidence.log = log ? &*log : nullptr;
    evidence.quoted = quote->pcrs;
    if (ctx.tofu_recorded != nullptr) evidence.tofu_recorded = *ctx.tofu_recorded;
    if (req.pcr_signature && ctx.policy->uki_signed) {
      // Read only for a uki_signed rule, its one reader. A malformed
      // document fails that rule, closed (as uki_signature_missing).
      auto signatures = wire::ParsePcrSignatureJson(*req.pcr_signature);
      if (signatures.ok()) {
        evidence.pcr_signatures = std::move(signatures).value();
      } else {
        Log()->info("pcr signature ignored: {}", signatures.status().message());
      }
    }
    attest::BootFacts facts = log ? attest::ExtractBootFacts(*log) : attest::BootFacts{};
    attest::Verdict verdict = attest::Evaluate(*ctx.policy, facts, evidence);
    if (!verdict.ok) {
      std::string rules;
      for (const auto& violation : verdict.violations) {
        rules += (rules.empty() ? "" : ", ") + violation.rule + ":" + violation.reason;
      }
      v.violations = std::move(verdict.violations);
      return refuse(Denied("boot_policy_violation", "the boot breaks policy rules: " + rules));
    }
    if (!verdict.tofu_to_record.empty()) v.tofu_to_record = std::move(verdict.tofu_to_record);
  }
  v.outcome = Verdict::Outcome::kAttested;
  return v;
}

// Why the evidence's session (or its machine) could not be read: a store
// failure waits; a session unknown, used or expired is refused, as is a
// machine deleted since its challenge.
Status AttestationService::EvidenceUnreadable(const Status& read, const std::string& who) {
  if (read.code() == Status::Code::kIoError) {
    Log()->error("store error for {}: {}", who, read.ToString());
    return StoreBusy(read);
  }
  if (read.reason() == "machine_unknown") {
    return Refuse(Status::NotFound("machine_unknown", "the session's machine is gone"), who);
  }
  return Refuse(read, who);
}

// The machine attested: the session consumed, the attestation recorded and
// a bearer token issued, in one store write.
Result<EvidenceResult> AttestationService::RecordSuccess(Verdict verdict, storage::AttestationRecord record,
                                                         const storage::Session& session,
                                                         const storage::Machine& machine, int64_t arrived,
                                                         std::chrono::steady_clock::time_point started,
                                                         const std::string& who) {
  const std::string token_text = NewToken();
  storage::Token row;
  row.hash = TokenHash(token_text);
  row.machine_id = machine.id;
  row.session_id = session.id;
  row.issued_at = clock_();
  row.expires_at = row.issued_at + options_.token_ttl_seconds;
  // A TPM2_Certify of a kubelet key, made later with this session's nonce by
  // this AK, is checked against these.
  row.nonce = session.nonce;
  row.ak_public = session.ak_public;
  record.verdict = "ok";
  std::optional<std::string> tofu_json;
  if (verdict.tofu_to_record) tofu_json = PcrDocument(*verdict.tofu_to_record);
  auto updated = store_->ConsumeSessionAndRecordSuccess(record, row, tofu_json, arrived);
  if (!updated.ok()) {
    // SECURITY: of two racing copies of one evidence, one records and gets
    // the token; the other is refused as a used session.
    if (updated.status().code() == Status::Code::kVerificationFailed) return Refuse(updated.status(), who);
    Log()->error("attestation of {} not stored: {}", who, updated.status().ToString());
    return StoreBusy(updated.status());
  }
  Count("ok", "");
  LogAttestationTrust(machine, true, "");  // docs/trust.md
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (metrics_ != nullptr) {
    metrics_->HistogramObserve("rackgate_attestation_duration_seconds", "Evidence verification time.", {}, seconds);
  }
  Log()->info("attested {}: state {}, reset {} restart {}, {} PCRs", who, storage::StateName(updated->state),
              record.reset_count, record.restart_count,
              verdict.pcrs.empty() ? 0 : verdict.pcrs.begin()->second.size());
  EvidenceResult out;
  out.verdict = std::move(verdict);
  out.token = token_text;
  out.expires_in = options_.token_ttl_seconds;
  out.hostname = updated->hostname;
  out.state = std::string(storage::StateName(updated->state));
  // From the bundle's cache: no database read per attestation.
  if (ca_bundle_ != nullptr) out.ca_bundle = ca_bundle_->Pem();
  return out;
}

Result<EvidenceResult> AttestationService::Evidence(const wire::EvidenceRequest& req, const Caller& caller) {
  const auto started = std::chrono::steady_clock::now();
  std::string who = "session " + req.session.substr(0, 8) + "… from " + caller.address;
  // The session's place is free again whatever the verdict.
  const std::shared_ptr<const SessionAk> challenged_ak = gate_.Finish(req.session);

  // What the verdict needs, in one read before any judging: the session
  // (unused, unexpired), its machine and its last good counters. The session
  // is consumed by the write that records the verdict, in the same
  // transaction (docs/storage.md); a return without a verdict consumes it
  // alone (ConsumeAlone): a session answers one attempt.
  const int64_t arrived = clock_();
  auto inputs = store_->ReadEvidence(req.session, arrived);
  if (!inputs.ok()) return EvidenceUnreadable(inputs.status(), who);
  const storage::Session* session = &inputs->session;
  const storage::Machine* machine = &inputs->machine;
  who = Who(*machine);
  const auto consume_alone = [&](Status answer) -> Status {
    if (auto used = store_->ConsumeSession(session->id, arrived); !used.ok()) {
      if (used.status().code() == Status::Code::kIoError) return StoreBusy(used.status());
      return Refuse(used.status(), who);
    }
    return answer;
  };
  const PolicyInForce policy = PolicyFor(*machine, inputs->pool);
  if (!policy.unusable.ok()) Log()->error("boot policy of {} is unusable: {}", who, policy.unusable.ToString());
  std::shared_ptr<const attest::PcrValues> tofu;
  if (machine->tofu_pcrs_json) tofu = policies_.TofuValues(*machine->tofu_pcrs_json);

  EvidenceContext context;
  context.session = session;
  context.machine = machine;
  context.last = inputs->last ? &*inputs->last : nullptr;
  context.policy = policy.policy.get();
  context.policy_unusable = !policy.unusable.ok();
  context.challenged_ak = challenged_ak.get();
  context.tofu_recorded = tofu.get();
  Verdict verdict = Verify(req, context);

  // SECURITY: only proof moves trust (docs/trust.md). A refusal before the
  // sender proved it holds this machine's TPM is anonymous: it is counted
  // and summarised, and the machine's trust, state, history and events are
  // left alone. Recording it as the machine's failure would let anyone who
  // knows an EK (a public certificate) make any machine untrusted.
  if (!verdict.attested() && !verdict.possession_proven) {
    return consume_alone(RefuseAnonymous(verdict.refusal, *machine, caller));
  }

  // One store write for the outcome.
  storage::AttestationRecord record;
  record.machine_id = machine->id;
  record.session_id = session->id;
  record.at = clock_();
  if (verdict.quote_verified) {
    record.reset_count = verdict.counters.reset_count;
    record.restart_count = verdict.counters.restart_count;
    record.clock = verdict.counters.clock;
    record.firmware_version = verdict.counters.firmware_version;
    record.pcrs_json = PcrDocument(verdict.pcrs);
  }
  // The machine's own refused attestation, as its history, its trust and
  // its events record it (docs/trust.md); `answer` is what it is told.
  const auto record_failure = [&](const Status& answer, bool waitable) -> Status {
    const Status& refusal = verdict.refusal;
    record.verdict = "refused";
    record.reason = refusal.reason();
    for (const auto& violation : verdict.violations) record.reasons.push_back(violation.rule + ":" + violation.reason);
    if (record.reasons.empty()) record.reasons.push_back(refusal.reason());
    if (Status s = store_->ConsumeSessionAndRecordFailure(record, arrived); !s.ok()) {
      // A session used meanwhile (a racing copy of this request) is that
      // request's to answer; a store failure stores nothing, not even the
      // session's use: the refusal stands, and the session expires unused.
      if (s.code() != Status::Code::kIoError && s.reason().rfind("session_", 0) == 0) {
        return Refuse(s, who);
      }
      Log()->error("failure record for {} not stored: {}", who, s.ToString());
    } else {
      LogAttestationTrust(*machine, false, record.reason);  // docs/trust.md
    }
    return Refuse(answer, who, waitable);
  };

  // An observing pool (docs/policy.md, "Observe"): the machine proved who
  // it is, so its boot is kept, and a boot the policy in force does not
  // pass (or any boot, when no policy is in force) waits instead of being
  // refused. SECURITY: observing never releases more than enforcing would.
  // A boot the policy refuses is recorded exactly as enforcing records it
  // (untrusted: a token from an earlier boot releases nothing more); only
  // the answer differs (503 boot_policy_observing, so the machine waits for
  // an operator's policy instead of giving up).
  const bool policy_refused = !verdict.attested() && verdict.refusal.reason() == "boot_policy_violation";
  if (policy.observe && (verdict.attested() || policy_refused)) {
    if (Status s = Observe(*machine, req, verdict, context.policy != nullptr, who); !s.ok()) {
      if (s.reason() != "boot_policy_observing") return consume_alone(s);  // the store failed
      if (policy_refused) return record_failure(s, true);
      return consume_alone(Refuse(s, who, true));
    }
  }

  if (!verdict.attested()) {
    const Status& refusal = verdict.refusal;
    // An unusable policy is the operator's to fix: the machine waits, and
    // nothing is held against it.
    if (refusal.reason() == "policy_invalid") return consume_alone(Refuse(refusal, who, true));
    for (const auto& violation : verdict.violations) {
      Log()->info("policy violation {}: {} {} ({})", who, violation.rule, violation.reason, violation.message);
    }
    return record_failure(refusal, false);
  }

  // An EK certificate accepted only by an anchor's relaxation is named in
  // the machine's record (docs/ek-vendors.md): the operator's choice stays
  // visible with every attestation it let through.
  for (const auto& r : EkRelaxationsOf(challenged_ak.get(), *machine)) record.reasons.push_back("ek_relaxed:" + r);
  return RecordSuccess(std::move(verdict), std::move(record), *session, *machine, arrived, started, who);
}

std::vector<std::string> AttestationService::EkRelaxationsOf(const SessionAk* challenged,
                                                             const storage::Machine& machine) const {
  if (challenged != nullptr) return challenged->ek_relaxations;
  // The challenge was answered by another appliance (docs/ha.md): its
  // in-memory note is not here. The certificate on record is the one it
  // checked unless the agent presented one; judged again with these anchors.
  if (!machine.ek_certificate) return {};
  auto info = CheckEkCertificate(*machine.ek_certificate, {}, nullptr);
  return info.ok() ? info->relaxations_used : std::vector<std::string>{};
}

Result<storage::Bearer> AttestationService::Authenticate(const std::optional<std::string>& token) {
  if (!token) return Status::InvalidArgument("token_missing", "send Authorization: Bearer <token>");
  if (token->size() > 128) return Status::NotFound("token_unknown", "unknown token");
  auto bearer = store_->LookupToken(TokenHash(*token), clock_());
  if (!bearer.ok()) {
    if (bearer.status().code() == Status::Code::kIoError) return StoreBusy(bearer.status());
    return bearer.status();
  }
  return std::move(bearer).value();
}

Result<MachineView> AttestationService::WhoAmI(const std::optional<std::string>& token) {
  auto auth = Authenticate(token);
  if (!auth.ok()) return auth.status();
  const storage::Machine& m = auth->machine;
  MachineView view;
  view.hostname = m.hostname;
  view.pool = m.pool;
  view.state = std::string(storage::StateName(m.state));
  // What the machine's pool asks of it: the agent makes a TPM-resident
  // client key when the pool requires one.
  auto settings = ParsePoolSettings(auth->pool.settings_json);
  view.require_tpm_key = settings.ok() && settings->require_tpm_key;
  // When the agent asks to renew (docs/csr.md, "Renewal").
  view.renew_fraction = settings.ok() ? settings->renew_fraction : PoolSettings{}.renew_fraction;
  // Who issues the kubelet's certificates (docs/kubernetes.md).
  view.kubelet_certificates = settings.ok() && settings->approver_mode ? "approver" : "signer";
  // Where the kubelet finds its cluster (docs/agent.md, "Where the API
  // server and node addresses come from"): the pool's API server, and the
  // machine's enrolled IP addresses, exactly those its serving CSR may carry
  // (the same MachineFactsOf the CSR rules check against).
  if (settings.ok()) view.apiserver = settings->apiserver;
  view.addresses = MachineFactsOf(m).ip_addresses;
  return view;
}

}  // namespace rackgate::core
