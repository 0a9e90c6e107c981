// The attestation protocol: challenge, evidence, bearer tokens.
#include "daemon/attestation.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "attest/boot_facts.h"
#include "attest/boot_policy.h"
#include "attest/credential.h"
#include "attest/ek_identity.h"
#include "attest/eventlog.h"
#include "attest/quote.h"
#include "wire/boot_policy_json.h"
#include "wire/codec.h"
#include "daemon/log.h"
#include "daemon/pool_settings.h"
#include "daemon/secrets.h"
#include "daemon/metrics.h"
#include "wire/protocol.h"

namespace rackgate::daemon {

namespace {

using attest::Bytes;
using nlohmann::json;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("protocol");
  return log;
}

std::string Short(std::span<const uint8_t> ek_hash) { return attest::HexString(ek_hash).substr(0, 16); }

std::string Who(const storage::Machine& m) { return m.hostname + " ek=" + Short(m.ek_hash); }

// The PCR selection a machine must quote: the configured default, plus what
// its boot policy names (golden and TOFU PCRs, and the kernel command line's
// PCRs when a rule reads it).
std::vector<attest::PcrSelection> Selection(const std::vector<attest::PcrSelection>& base,
                                            const attest::BootPolicy* policy) {
  std::map<uint16_t, std::set<uint32_t>> want;
  for (const auto& s : base) want[s.hash_alg].insert(s.pcrs.begin(), s.pcrs.end());
  if (policy != nullptr) {
    for (const auto& [alg, bank] : policy->pcrs) {
      for (const auto& [pcr, v] : bank) want[alg].insert(pcr);
    }
    for (const auto& s : policy->tofu) want[s.hash_alg].insert(s.pcrs.begin(), s.pcrs.end());
    if (policy->kernel_cmdline) {
      uint16_t bank = base.empty() ? attest::kAlgSha256 : base.front().hash_alg;
      for (uint32_t pcr : {8u, 9u}) want[bank].insert(pcr);
    }
  }
  std::vector<attest::PcrSelection> out;
  for (const auto& [alg, pcrs] : want) out.push_back({alg, std::vector<uint32_t>(pcrs.begin(), pcrs.end())});
  return out;
}

// The boot policy that applies to a machine: its own, else its pool's.
// nullopt when neither sets one; an error when the stored text is unusable.
Result<std::optional<attest::BootPolicy>> PolicyFor(storage::Store* store, const storage::Machine& m) {
  std::string text;
  if (m.policy_json && !m.policy_json->empty()) {
    text = *m.policy_json;
  } else {
    auto pool = store->GetPool(m.pool);
    if (pool.ok() && pool->boot_policy_json && !pool->boot_policy_json->empty()) text = *pool->boot_policy_json;
  }
  if (text.empty() || text == "null" || text == "{}") return std::optional<attest::BootPolicy>();
  auto p = wire::ParseBootPolicy(text);
  if (!p.ok()) return p.status();
  return std::optional<attest::BootPolicy>(std::move(p).value());
}

// PCR values as stored (attestation records, TOFU values): the document
// `rackgatectl policy check --tofu-recorded` reads, {"pcrs": {...}}.
std::string PcrDocument(const attest::PcrValues& pcrs) {
  return "{\"pcrs\": " + wire::FormatPcrValuesJson(pcrs) + "}";
}

json MachineJson(const storage::Machine& m) {
  return json{{"hostname", m.hostname}, {"pool", m.pool}, {"state", std::string(storage::StateName(m.state))}};
}

}  // namespace

AttestationService::AttestationService(storage::Store* store, const TrustAnchors* anchors,
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

Response AttestationService::Refuse(int status, const std::string& reason, const std::string& message,
                                    const std::string& who, bool waitable) {
  Log()->info("refused {}: {} ({})", who, reason, message);
  Count(waitable ? "wait" : "refused", reason);
  if (waitable) return Response::Error(status, reason, message, options_.retry_after_seconds);
  return Response::Error(status, reason, message);
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

Response AttestationService::Busy(const std::string& reason, const std::string& who) {
  Count("wait", reason);
  Log()->debug("refused {}: {} (over the admission bound)", who, reason);
  // Jitter, so that a rack told to come back does not come back at once.
  const int base = options_.busy_retry_after_seconds;
  const int wait = base + static_cast<int>(RandomBytes(1)[0] % static_cast<unsigned>(base + 1));
  return Response::Error(503, reason, "the appliance is busy; come back after Retry-After", wait);
}

Response AttestationService::Challenge(const Request& request) {
  // The appliance is behind (this request waited for a handler thread):
  // put off a new machine before even parsing what it sent.
  if (options_.busy_queue_delay_ms > 0 && request.queued > std::chrono::milliseconds(options_.busy_queue_delay_ms)) {
    return Busy("busy", request.peer_address);
  }
  auto req = wire::ParseChallengeRequest(request.body);
  if (!req.ok()) return Response::Error(400, req.status().reason(), req.status().message());
  // Admission first: nothing below (database, EK chain, MakeCredential) runs
  // for a challenge the appliance could not see through.
  uint64_t ticket = 0;
  const int64_t admitted_at = clock_();
  switch (gate_.Admit(ClientAddress(request.peer_address), admitted_at,
                      admitted_at + options_.session_ttl_seconds, &ticket)) {
    case SessionGate::Verdict::kAdmitted: break;
    case SessionGate::Verdict::kFull: return Busy("busy", request.peer_address);
    case SessionGate::Verdict::kClientFull: return Busy("busy_client", request.peer_address);
  }
  struct Reservation {
    SessionGate* gate;
    uint64_t ticket;
    bool bound = false;
    ~Reservation() {
      if (!bound) gate->Release(ticket);
    }
  } reservation{&gate_, ticket};

  auto ek = attest::ParseTpm2bPublic(req->ek_public);
  if (!ek.ok()) return Response::Error(400, "field_invalid", "ek_public: " + ek.status().message());
  auto ak = attest::ParseTpm2bPublic(req->ak_public);
  if (!ak.ok()) return Response::Error(400, "field_invalid", "ak_public: " + ak.status().message());
  auto ek_hash = attest::EkKeyHash(*ek);
  if (!ek_hash.ok()) return Response::Error(400, "field_invalid", "ek_public: " + ek_hash.status().message());
  std::string who = "ek=" + Short(*ek_hash) + " from " + request.peer_address;

  auto machine = store_->FindMachineByEkHash(*ek_hash);
  if (!machine.ok()) {
    if (machine.status().code() != Status::Code::kNotFound) {
      Log()->error("store error for {}: {}", who, machine.status().ToString());
      return Response::Error(503, "busy", "try again later", options_.retry_after_seconds);
    }
    if (!options_.discovery || !req->ek_certificate) {
      return Refuse(503, "machine_not_enrolled", "this machine is not enrolled yet", who, true);
    }
    // Discovery: a genuine TPM (its certificate chains to a trusted root and
    // carries this EK) is recorded as pending for an operator to approve.
    auto info = CheckEkCertificate(*req->ek_certificate, req->ek_intermediates, &*ek);
    if (!info.ok()) return Refuse(403, info.status().reason(), info.status().message(), who);
    storage::Enrollment e;
    e.hostname = "pending-" + Short(*ek_hash);
    e.pool = options_.discovery_pool;
    e.ek_public = req->ek_public;
    e.ek_hash = *ek_hash;
    e.ek_certificate = info->der;
    e.tpm_manufacturer = info->tpm_manufacturer;
    e.tpm_model = info->tpm_model;
    e.tpm_version = info->tpm_version;
    e.state = storage::MachineState::kPending;
    auto enrolled = store_->Enroll(e, storage::Actor{"discovery", "first challenge from " + request.peer_address},
                                   false, clock_());
    if (!enrolled.ok()) Log()->warn("discovery of {} not recorded: {}", who, enrolled.status().ToString());
    return Refuse(503, "machine_pending", "this machine waits for an operator's approval", who, true);
  }
  who = Who(*machine);
  if (machine->state == storage::MachineState::kPending) {
    return Refuse(503, "machine_pending", "this machine waits for an operator's approval", who, true);
  }
  if (machine->state == storage::MachineState::kRevoked) {
    return Refuse(403, "machine_revoked", "this machine is revoked", who);
  }

  // The EK certificate: the one presented, else the one on record. Checked
  // at every challenge, so that removing a vendor root takes effect at once.
  std::optional<Bytes> cert = req->ek_certificate;
  if (!cert && machine->ek_certificate) cert = machine->ek_certificate;
  if (cert) {
    auto info = CheckEkCertificate(*cert, req->ek_intermediates, &*ek);
    if (!info.ok()) return Refuse(403, info.status().reason(), info.status().message(), who);
  } else if (options_.require_ek_certificate) {
    return Refuse(403, "ek_cert_missing", "no EK certificate was presented or enrolled", who);
  }

  if (Status s = attest::CheckAkPolicy(*ak); !s.ok()) return Refuse(403, s.reason(), s.message(), who);
  auto ak_key = attest::VerifyKey::FromTpmPublic(*ak);
  if (!ak_key.ok()) return Response::Error(400, "field_invalid", "ak_public: " + ak_key.status().message());

  auto policy = PolicyFor(store_, *machine);
  if (!policy.ok()) {
    Log()->error("boot policy of {} is unusable: {}", who, policy.status().ToString());
    return Refuse(503, "policy_invalid", "this machine's boot policy is being fixed", who, true);
  }
  const auto selection =
      Selection(options_.default_pcr_selection, policy->has_value() ? &**policy : nullptr);

  Bytes secret = RandomBytes(32);
  const Bytes ak_name = attest::ObjectName(*ak);
  auto cred = attest::MakeCredential(*ek, ak_name, secret);
  if (!cred.ok()) {
    OPENSSL_cleanse(secret.data(), secret.size());
    return Refuse(403, cred.status().reason(), cred.status().message(), who);
  }
  storage::Session session;
  session.id = wire::Base64UrlEncode(RandomBytes(18));
  session.machine_id = machine->id;
  session.nonce = RandomBytes(32);
  // Only the secret's hash is stored: a copy of the database does not let
  // anyone answer an open challenge.
  session.secret_hash = Sha256(secret);
  OPENSSL_cleanse(secret.data(), secret.size());
  session.ak_public = req->ak_public;
  session.ak_name = ak_name;
  session.pcr_selection = attest::FormatPcrSelectionList(selection);
  session.created_at = clock_();
  session.expires_at = session.created_at + options_.session_ttl_seconds;
  if (Status s = store_->CreateSession(session); !s.ok()) {
    Log()->error("session for {} not stored: {}", who, s.ToString());
    return Response::Error(503, "busy", "try again later", options_.retry_after_seconds);
  }
  gate_.Bind(ticket, session.id);
  reservation.bound = true;
  Log()->info("challenge {}: session {} pcrs {}", who, session.id, session.pcr_selection);
  json body = {{"session", session.id},
               {"nonce", wire::HexEncode(session.nonce)},
               {"pcr_selection", session.pcr_selection},
               {"credential", wire::Base64Encode(attest::EncodeCredentialFile(*cred))},
               {"expires_in", options_.session_ttl_seconds}};
  return Response::Json(200, body.dump());
}

Response AttestationService::Evidence(const Request& request) {
  const auto started = std::chrono::steady_clock::now();
  auto req = wire::ParseEvidenceRequest(request.body);
  if (!req.ok()) return Response::Error(400, req.status().reason(), req.status().message());
  std::string who = "session " + req->session.substr(0, 8) + "… from " + request.peer_address;
  // The session's place is free again whatever the verdict.
  gate_.Finish(req->session);

  // Consumed first and whatever follows: a session answers one attempt.
  auto session = store_->ConsumeSession(req->session, clock_());
  if (!session.ok()) {
    if (session.status().code() == Status::Code::kIoError) {
      Log()->error("store error for {}: {}", who, session.status().ToString());
      return Response::Error(503, "busy", "try again later", options_.retry_after_seconds);
    }
    return Refuse(403, session.status().reason(), session.status().message(), who);
  }
  auto machine = store_->GetMachineById(session->machine_id);
  if (!machine.ok()) return Refuse(403, "machine_unknown", "the session's machine is gone", who);
  who = Who(*machine);

  storage::AttestationRecord record;
  record.machine_id = machine->id;
  record.session_id = session->id;
  record.at = clock_();
  auto fail = [&](int status, const std::string& reason, const std::string& message,
                  std::vector<std::string> reasons = {}) {
    record.verdict = "refused";
    record.reason = reason;
    record.reasons = reasons.empty() ? std::vector<std::string>{reason} : std::move(reasons);
    if (Status s = store_->RecordAttestationFailure(record); !s.ok()) {
      Log()->error("failure record for {} not stored: {}", who, s.ToString());
    }
    return Refuse(status, reason, message, who);
  };

  if (machine->state == storage::MachineState::kRevoked) return fail(403, "machine_revoked", "this machine is revoked");
  if (machine->state == storage::MachineState::kPending) {
    return fail(403, "state_conflict", "this machine is not enrolled");
  }

  // Proof that the AK lives in the TPM holding the enrolled EK. Compared as
  // hashes in constant time; the message never says how it differed.
  const Bytes got = Sha256(req->secret);
  if (!ConstantTimeEquals(got, session->secret_hash)) {
    return fail(403, "activation_failed", "the credential was not activated by the enrolled TPM");
  }

  auto ak = attest::ParseTpm2bPublic(session->ak_public);
  if (!ak.ok()) throw std::runtime_error("stored AK does not parse: " + ak.status().ToString());
  auto key = attest::VerifyKey::FromTpmPublic(*ak);
  if (!key.ok()) throw std::runtime_error("stored AK is not a key: " + key.status().ToString());
  auto selection = attest::ParsePcrSelectionList(session->pcr_selection);
  if (!selection.ok()) throw std::runtime_error("stored selection does not parse");
  auto quote = attest::VerifyQuote(*key, req->quote, req->signature, req->pcrs, session->nonce, *selection);
  if (!quote.ok()) {
    const int status = quote.status().code() == Status::Code::kInvalidArgument &&
                               quote.status().reason() == "pcr_values_incomplete"
                           ? 400
                           : 403;
    return fail(status, quote.status().reason(), quote.status().message());
  }
  record.reset_count = quote->clock.reset_count;
  record.restart_count = quote->clock.restart_count;
  record.clock = quote->clock.clock;
  record.firmware_version = quote->firmware_version;
  record.pcrs_json = PcrDocument(quote->pcrs);

  // The TPM's counters only go forward: a lower resetCount means an old
  // TPM state (a restored snapshot, a clone) is answering.
  auto last = store_->LastSuccessfulAttestation(machine->id);
  if (last.ok()) {
    if (quote->clock.reset_count < last->reset_count) {
      return fail(403, "reset_count_regressed", "the TPM's reset counter went backwards");
    }
    if (quote->clock.reset_count == last->reset_count) {
      if (quote->clock.restart_count < last->restart_count) {
        return fail(403, "restart_count_regressed", "the TPM's restart counter went backwards");
      }
      if (quote->clock.restart_count == last->restart_count && quote->clock.clock < last->clock) {
        return fail(403, "clock_regressed", "the TPM's clock went backwards");
      }
    }
  } else if (last.status().code() != Status::Code::kNotFound) {
    Log()->error("store error for {}: {}", who, last.status().ToString());
    return Response::Error(503, "busy", "try again later", options_.retry_after_seconds);
  }

  std::optional<attest::EventLog> log;
  if (req->event_log) {
    auto parsed = attest::ParseEventLog(*req->event_log);
    if (!parsed.ok()) return fail(403, parsed.status().reason(), parsed.status().message());
    auto replayed = attest::Replay(*parsed);
    if (!replayed.ok()) return fail(403, replayed.status().reason(), replayed.status().message());
    if (Status s = attest::ComparePcrs(*replayed, quote->pcrs); !s.ok()) return fail(403, s.reason(), s.message());
    log = std::move(parsed).value();
  }

  auto policy = PolicyFor(store_, *machine);
  if (!policy.ok()) {
    Log()->error("boot policy of {} is unusable: {}", who, policy.status().ToString());
    return Response::Error(503, "policy_invalid", "this machine's boot policy is being fixed",
                           options_.retry_after_seconds);
  }
  std::optional<attest::PcrValues> tofu_to_record;
  if (policy->has_value()) {
    attest::Evidence evidence;
    evidence.log = log ? &*log : nullptr;
    evidence.quoted = quote->pcrs;
    if (machine->tofu_pcrs_json && !machine->tofu_pcrs_json->empty()) {
      auto recorded = wire::ParsePcrValuesJson(*machine->tofu_pcrs_json);
      if (recorded.ok()) evidence.tofu_recorded = std::move(recorded).value();
    }
    attest::BootFacts facts = log ? attest::ExtractBootFacts(*log) : attest::BootFacts{};
    attest::Verdict verdict = attest::Evaluate(**policy, facts, evidence);
    if (!verdict.ok) {
      std::vector<std::string> reasons;
      std::string rules;
      for (const auto& v : verdict.violations) {
        reasons.push_back(v.rule + ":" + v.reason);
        rules += (rules.empty() ? "" : ", ") + v.rule + ":" + v.reason;
        Log()->info("policy violation {}: {} {} ({})", who, v.rule, v.reason, v.message);
      }
      return fail(403, "boot_policy_violation", "the boot breaks policy rules: " + rules, reasons);
    }
    if (!verdict.tofu_to_record.empty()) tofu_to_record = verdict.tofu_to_record;
  }

  const std::string token_text = NewToken();
  storage::Token row;
  row.hash = TokenHash(token_text);
  row.machine_id = machine->id;
  row.session_id = session->id;
  row.issued_at = clock_();
  row.expires_at = row.issued_at + options_.token_ttl_seconds;
  // A TPM2_Certify of a kubelet key, made later with this session's nonce by
  // this AK, is checked against these.
  row.nonce = session->nonce;
  row.ak_public = session->ak_public;
  record.verdict = "ok";
  std::optional<std::string> tofu_json;
  if (tofu_to_record) tofu_json = PcrDocument(*tofu_to_record);
  auto updated = store_->RecordAttestationSuccess(record, row, tofu_json);
  if (!updated.ok()) {
    Log()->error("attestation of {} not stored: {}", who, updated.status().ToString());
    return Response::Error(503, "busy", "try again later", options_.retry_after_seconds);
  }
  Count("ok", "");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (metrics_ != nullptr) {
    metrics_->HistogramObserve("rackgate_attestation_duration_seconds", "Evidence verification time.", {}, seconds);
  }
  Log()->info("attested {}: state {}, reset {} restart {}, {} PCRs", who, storage::StateName(updated->state),
              record.reset_count, record.restart_count, quote->pcrs.empty() ? 0 : quote->pcrs.begin()->second.size());
  json body = {{"token", token_text},
               {"expires_in", options_.token_ttl_seconds},
               {"hostname", updated->hostname},
               {"state", std::string(storage::StateName(updated->state))}};
  return Response::Json(200, body.dump());
}

std::variant<storage::Bearer, Response> AttestationService::Authenticate(const Request& request) {
  const auto token = request.BearerToken();
  if (!token) return Response::Error(401, "token_missing", "send Authorization: Bearer <token>");
  if (token->size() > 128) return Response::Error(401, "token_unknown", "unknown token");
  auto bearer = store_->LookupToken(TokenHash(*token), clock_());
  if (!bearer.ok()) {
    const std::string& reason = bearer.status().reason();
    if (bearer.status().code() == Status::Code::kIoError) {
      return Response::Error(503, "busy", "try again later", options_.retry_after_seconds);
    }
    return Response::Error(reason == "token_revoked" ? 403 : 401, reason, bearer.status().message());
  }
  return std::move(bearer).value();
}

Response AttestationService::WhoAmI(const Request& request) {
  auto auth = Authenticate(request);
  if (auto* r = std::get_if<Response>(&auth)) return std::move(*r);
  const storage::Machine& m = std::get<storage::Bearer>(auth).machine;
  json body = MachineJson(m);
  // What the machine's pool asks of it: the agent makes a TPM-resident
  // client key when the pool requires one.
  auto pool = store_->GetPool(m.pool);
  if (!pool.ok()) return Response::Error(503, "busy", "try again later", options_.retry_after_seconds);
  auto settings = ParsePoolSettings(pool->settings_json);
  body["require_tpm_key"] = settings.ok() && settings->require_tpm_key;
  return Response::Json(200, body.dump());
}

}  // namespace rackgate::daemon
