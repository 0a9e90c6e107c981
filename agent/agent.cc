// The agent's steps against the appliance, and the wait-and-restart loop.
#include "agent/agent.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <thread>

#include "agent/apply.h"
#include "agent/backoff.h"
#include "agent/ca_bundle.h"
#include "agent/config_out.h"
#include "agent/csr.h"
#include "agent/kubelet.h"
#include "base/text.h"
#include "kube/client.h"
#include "kube/kubeconfig.h"
#include "agent/renewal.h"
#include "attest/boot_facts.h"
#include "attest/ek_identity.h"
#include "attest/quote.h"
#include "base/files.h"
#include "wire/pcr_signature_json.h"
#include "base/hex.h"

namespace rackgate::agent {

namespace {

// A measured-boot log is tens of KiB; a firmware with a runaway log is not
// worth holding up the boot for (the appliance refuses if its policy needs one).
constexpr size_t kMaxEventLogBytes = 1u << 20;
// A quote is retried when a PCR changed between TPM2_Quote and
// TPM2_PCR_Read (something is still measuring); after this many the TPM is
// declared unusable for now.
constexpr int kQuoteAttempts = 3;

constexpr char kClientSigner[] = "kubernetes.io/kube-apiserver-client-kubelet";
constexpr char kServingSigner[] = "kubernetes.io/kubelet-serving";
constexpr char kNodesOrganization[] = "system:nodes";
constexpr char kNodeCnPrefix[] = "system:node:";

long long MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

std::string Seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

Failure Unusable(const Status& s) { return Failure::Refused("bad_response", s.ToString()); }

// The API server's answer as the agent ends on it: unreachable or busy is
// waited out (exit 4); anything else needs an operator (exit 3).
Failure KubeFailure(const Status& s) {
  if (s.reason() == "kube_unavailable") return Failure::Retry(s.reason(), s.message());
  return Failure::Refused(s.reason(), s.message());
}

// Why a CSR was denied or failed, from its conditions (another client's
// text: made printable and cut).
std::string ConditionText(const kube::Csr& c) {
  for (const auto& cond : c.conditions) {
    if (cond.type == "Denied" || cond.type == "Failed") {
      return text::PrintableAscii(cond.reason, 80) +
             (cond.message.empty() ? "" : " (" + text::PrintableAscii(cond.message, 200) + ")");
    }
  }
  return "no reason given";
}

void Wipe(std::string* s) {
  if (!s->empty()) OPENSSL_cleanse(s->data(), s->size());
}
void Wipe(Bytes* b) {
  if (!b->empty()) OPENSSL_cleanse(b->data(), b->size());
}

std::string AuthHeader(const wire::Token& t) { return "Authorization: Bearer " + t.token; }

}  // namespace

AgentClock SystemClock() {
  auto rng = std::make_shared<std::mt19937_64>(std::random_device{}());
  return AgentClock{
      [] { return std::time(nullptr); },
      [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); },
      [rng] { return std::uniform_real_distribution<double>(0.0, 1.0)(*rng); },
  };
}

Agent::Agent(AgentOptions options, Tpm* tpm, std::vector<Endpoint> endpoints, const Transport* transport,
             AgentClock clock)
    : options_(std::move(options)),
      tpm_(tpm),
      clock_(std::move(clock)),
      failover_(std::move(endpoints), transport, clock_.now, clock_.unit_random(),
                [this](const std::string& line) { Log("note", line); }) {}

void Agent::Log(const std::string& outcome, const std::string& details) const {
  std::fprintf(stderr, "rackgate-agent: step=%s machine=%s %s%s%s\n", step_.c_str(), machine_.c_str(),
               outcome.c_str(), details.empty() ? "" : " ", details.c_str());
}

void Agent::LogFailure(const Failure& f, const std::string& extra) const {
  std::string d;
  if (f.http_status != 0) d += "status=" + std::to_string(f.http_status) + " ";
  d += "reason=" + text::PrintableAscii(f.reason, 64);
  if (!f.message.empty()) d += " message=\"" + text::PrintableAscii(f.message, 600) + "\"";
  if (!extra.empty()) d += " " + extra;
  Log(f.KindName(), d);
}

void Agent::FollowCaBundle(const std::string& bundle) const {
  // An appliance before 0.2.0 sends none; the file then stays as it is.
  if (bundle.empty() || options_.ca_file.empty()) return;
  auto r = UpdateCaFile(options_.ca_file, bundle);
  if (!r.ok()) {
    Log("note", "ca_file=" + text::PrintableAscii(options_.ca_file, 200) + " kept reason=" + r.status().reason() +
                    " message=\"" + text::PrintableAscii(r.status().message(), 200) + "\"");
  } else if (*r == CaFileUpdate::kReplaced) {
    size_t certs = 0;
    for (size_t at = bundle.find("-----BEGIN CERTIFICATE-----"); at != std::string::npos;
         at = bundle.find("-----BEGIN CERTIFICATE-----", at + 1)) {
      ++certs;
    }
    Log("note", "ca_file=" + text::PrintableAscii(options_.ca_file, 200) +
                    " replaced with the appliance's CA bundle (" + std::to_string(certs) + " certificates)");
  }
}

int Agent::Run() {
  const auto deadline = std::chrono::steady_clock::now() + options_.max_wait;
  int backoff_attempt = 0;
  if (!options_.session_in.empty()) TakeCarriedSession();
  for (;;) {
    auto r = RunOnce();
    if (r.ok()) {
      WriteSessionOut();
      Report(kExitOk, nullptr);
      return kExitOk;
    }
    const Failure& f = r.failure();
    if (AttestAfresh(f)) continue;
    if (MovesOn(f) && failover_.CanMoveOn()) continue;  // the next appliance, at once (a failed evidence)
    if (f.kind != Failure::Kind::kWait && f.kind != Failure::Kind::kRetry) {
      LogFailure(f);
      Report(f.ExitCode(), &f);
      return f.ExitCode();
    }
    std::chrono::milliseconds delay;
    if (f.kind == Failure::Kind::kWait) {
      // The appliance answered: the network is fine, start backoff afresh.
      backoff_attempt = 0;
      delay = WaitDelay(f.retry_after_seconds, clock_.unit_random());
    } else {
      delay = BackoffDelay(backoff_attempt++, clock_.unit_random());
    }
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) {
      LogFailure(f, "gave_up max_wait=" + std::to_string(options_.max_wait.count()) + "s");
      Report(kExitUnreachable, &f);
      return kExitUnreachable;
    }
    delay = std::min(delay, remaining);
    LogFailure(f, "retry_in=" + Seconds(delay));
    clock_.sleep(delay);
    failover_.NewRound();
  }
}

void Agent::Report(int exit_status, const Failure* failure) {
  if (!last_token_) return;  // nothing to authenticate the report with
  const std::string step = step_;
  const wire::ProvisioningReport report = MakeReport(step, exit_status, failure ? failure->reason : "",
                                                     failure ? failure->message : "", done_);
  step_ = "report";
  const std::string body = wire::EncodeProvisioningReport(report);
  auto resp = failover_.CallAny("/v1/machine/report", &body, {AuthHeader(*last_token_)});
  if (!resp.ok()) {
    Log("note", "report not sent: " + text::PrintableAscii(resp.status().ToString(), 200));
  } else if (resp->status < 200 || resp->status > 299) {
    Log("note", "report not taken: status=" + std::to_string(resp->status));
  } else {
    Log("ok", "outcome=" + report.outcome + " last_step=" + step + " exit=" + std::to_string(exit_status) +
                  " done=" + std::to_string(report.done.size()));
  }
  step_ = step;
}

void Agent::TakeCarriedSession() {
  auto s = TakeSession(options_.session_in, clock_.now());
  if (s.ok()) {
    carried_ = std::move(s).value();
    return;
  }
  // The message names the file and what is wrong, never the token.
  Log("note", "session=" + text::PrintableAscii(options_.session_in, 200) + " not_used reason=" +
                  s.status().reason() + " message=\"" + text::PrintableAscii(s.status().message(), 300) +
                  "\": attesting afresh");
}

Agent::Attestation Agent::UseCarried() {
  step_ = "attest";
  CarriedSession s = std::move(*carried_);
  carried_.reset();
  machine_ = s.machine;
  Attestation a;
  a.token = std::move(s.token);
  a.nonce = std::move(s.nonce);
  a.ak_blobs = std::move(s.ak);
  a.ak_alg = s.ak_alg;
  a.ek = s.ek;
  a.expires_at = s.expires_at;
  a.carried = true;
  // What --install-root takes from an attestation, as the first run had it.
  last_token_ = a.token;
  attested_ek_ = s.ek;
  if (s.config_fetched) config_fetched_ = true;
  using_carried_ = true;
  Log("ok", "carried=" + text::PrintableAscii(options_.session_in, 200) + " hostname=" + a.token.hostname +
                " state=" + a.token.state + " ek=" + EkKindName(s.ek) +
                " config_fetched=" + (s.config_fetched ? "yes" : "no") +
                " expires_in=" + std::to_string(a.expires_at - clock_.now()) + "s");
  return a;
}

Status Agent::LoadCarriedAk(Attestation* a) {
  if (a->ak.loaded()) return Status::Ok();
  auto ek = tpm_->CreateEk(a->ek);
  if (!ek.ok()) return ek.status();
  auto ak = tpm_->LoadAk(*ek, a->ak_blobs);
  if (!ak.ok()) {
    return Status::TpmError("carried_ak_unusable", "the carried session's AK does not load under the " +
                                                       EkKindName(a->ek) + " EK: " + ak.status().message());
  }
  // swtpm has three object slots: the csr step needs two more.
  ek->object.Flush();
  a->ak = std::move(ak).value();
  return Status::Ok();
}

bool Agent::AttestAfresh(const Failure& f) {
  if (!using_carried_ || carried_given_up_) return false;
  if (f.http_status != 401 && f.reason != "carried_ak_unusable") return false;
  carried_given_up_ = true;
  using_carried_ = false;
  LogFailure(f, "carried_session=given_up: attesting afresh");
  return true;
}

void Agent::WriteSessionOut() {
  if (options_.session_out.empty() || !session_out_) return;
  const std::string step = step_;
  step_ = "session";
  session_out_->config_fetched = config_fetched_;
  // Not the run's outcome: a later --session run that finds no session
  // attests afresh, which costs time, not correctness.
  if (Status s = WriteSession(options_.session_out, *session_out_); !s.ok()) {
    Log("note", "session not written reason=" + s.reason() + " message=\"" +
                    text::PrintableAscii(s.message(), 300) + "\": a later --session run attests afresh");
  } else {
    Log("ok", "written=" + text::PrintableAscii(options_.session_out, 200) +
                  " expires_in=" + std::to_string(session_out_->expires_at - clock_.now()) + "s");
  }
  step_ = step;
}

Outcome<Done> Agent::RunOnce() {
  auto a = carried_ ? Outcome<Attestation>(UseCarried()) : Attest();
  if (!a.ok()) return a.failure();
  // Before anything is kept or the run can stop: nothing issued to another
  // machine stays on this disk.
  if (options_.step_csr) {
    auto r = RemoveFilesOfAnother(a->token.hostname);
    if (!r.ok()) return r.failure();
  }
  if (options_.step_config && !config_done_) {
    auto c = Config(*a);
    if (!c.ok()) return c.failure();
  } else if (!options_.step_config && !options_.config_root.empty()) {
    step_ = "config";
    if (Status s = CheckDiskConfig(ReadConfigStamp(options_.config_root), a->token.hostname, a->token.state);
        !s.ok()) {
      return Failure::Refused(s.reason(), s.message());
    }
  }
  if (options_.step_csr) {
    auto c = Csr(&*a);
    if (!c.ok()) return c.failure();
  }
  if (!options_.session_out.empty()) {
    session_out_ = CarriedSession{a->token, a->expires_at, machine_, a->ek, config_fetched_, a->nonce, a->ak_alg,
                                  a->ak_blobs};
  }
  return Done{};
}

Outcome<HttpResponse> Agent::Call(const char* method, const std::string& path, const std::string& body,
                                  const std::vector<std::string>& headers, bool once) {
  const std::string* json = std::string_view(method) == "GET" ? nullptr : &body;
  return once ? failover_.CallOnce(path, json, headers) : failover_.Call(path, json, headers);
}

Outcome<std::optional<Bytes>> Agent::ReadEventLog() {
  if (options_.eventlog_path.empty()) return std::optional<Bytes>();
  struct stat st;
  if (::stat(options_.eventlog_path.c_str(), &st) != 0 && errno == ENOENT) {
    Log("note", "no event log at " + options_.eventlog_path + "; sending none");
    return std::optional<Bytes>();
  }
  // Read to end of file: securityfs reports a size of 0.
  auto log = ReadFile(options_.eventlog_path, kMaxEventLogBytes);
  if (!log.ok()) {
    if (log.status().reason() == "file_too_large") {
      Log("note", "event log at " + options_.eventlog_path + " is over 1 MiB; sending none");
      return std::optional<Bytes>();
    }
    return Failure::FromStatus(log.status());
  }
  return std::optional<Bytes>(std::move(log).value());
}

std::optional<std::string> Agent::ReadPcrSignature() {
  if (options_.pcr_signature_path.empty()) return std::nullopt;
  struct stat st;
  if (::stat(options_.pcr_signature_path.c_str(), &st) != 0 && errno == ENOENT) {
    return std::nullopt;  // not booted from a signed UKI: the usual case
  }
  auto text = ReadFile(options_.pcr_signature_path, wire::kMaxPcrSignatureSize);
  if (!text.ok()) {
    Log("note", "PCR signature at " + options_.pcr_signature_path + " unreadable (" +
                    text.status().reason() + "); sending none");
    return std::nullopt;
  }
  std::string doc(text->begin(), text->end());
  // Checked here so that a damaged file costs only a uki_signed rule, never
  // the whole evidence (the appliance refuses a body it cannot read).
  if (auto parsed = wire::ParsePcrSignatureJson(doc); !parsed.ok()) {
    Log("note", "PCR signature at " + options_.pcr_signature_path + " is malformed (" +
                    parsed.status().message() + "); sending none");
    return std::nullopt;
  }
  return doc;
}

Outcome<Agent::Attestation> Agent::Attest() {
  step_ = "attest";
  using_carried_ = false;
  const auto t0 = std::chrono::steady_clock::now();

  auto choice = ChooseEk(tpm_, options_.ek);
  if (!choice.ok()) return Failure::FromStatus(choice.status());
  auto ek = tpm_->CreateEk(choice->kind);
  if (!ek.ok()) return Failure::FromStatus(ek.status());
  {
    auto pub = attest::ParseTpm2bPublic(ek->object.tpm2b_public());
    auto id = pub.ok() ? attest::EkKeyHash(*pub) : Result<Bytes>(pub.status());
    if (!id.ok()) return Failure::FromStatus(Status::TpmError("tpm_bad_answer", id.status().message()));
    machine_ = hex::Encode(*id).substr(0, 16);
  }
  if (choice->certificate) {
    if (Status s = CheckEkMatchesCertificate(ek->object.tpm2b_public(), *choice->certificate); !s.ok()) {
      return Failure::FromStatus(s);
    }
  }
  auto ak = tpm_->CreateAk(*ek, options_.ak);
  if (!ak.ok()) return Failure::FromStatus(ak.status());

  wire::ChallengeRequest creq;
  creq.ek_public = ek->object.tpm2b_public();
  creq.ek_certificate = choice->certificate;
  creq.ek_intermediates = choice->intermediates;
  creq.ak_public = ak->object.tpm2b_public();
  auto resp = Call("POST", "/v1/attest/challenge", wire::EncodeChallengeRequest(creq), {});
  if (!resp.ok()) return resp.failure();
  auto challenge = UsableAnswer(wire::DecodeChallenge(resp->body));
  if (!challenge.ok()) return challenge.failure();
  auto credential = attest::DecodeCredentialFile(challenge->credential);
  if (!credential.ok()) return Unusable(credential.status());

  // Proof that this AK lives beside this EK: only this TPM can unwrap it.
  auto secret = tpm_->ActivateCredential(ak->object, *ek, *credential);
  if (!secret.ok()) return Failure::FromStatus(secret.status());
  // swtpm has three object slots: the EK's is needed later (SRK, key, AK).
  ek->object.Flush();

  wire::EvidenceRequest ev;
  ev.session = challenge->session;
  ev.secret = std::move(secret).value();
  for (int attempt = 1;; ++attempt) {
    auto quote = tpm_->Quote(ak->object, challenge->nonce, challenge->pcr_selection);
    if (!quote.ok()) return Failure::FromStatus(quote.status());
    // Read exactly what the TPM quoted (it drops banks it does not have),
    // and check the values against the quote's own digest: a PCR extended
    // between the two commands would make the appliance refuse the quote.
    auto parsed = attest::ParseTpmsAttest(quote->attest);
    if (!parsed.ok()) return Failure::FromStatus(Status::TpmError("tpm_bad_answer", parsed.status().message()));
    auto pcrs = tpm_->ReadPcrs(parsed->pcr_select);
    if (!pcrs.ok()) return Failure::FromStatus(pcrs.status());
    auto digest = attest::ComputePcrDigest(attest::kAlgSha256, parsed->pcr_select, *pcrs);
    if (digest.ok() && *digest == parsed->pcr_digest) {
      ev.quote = std::move(quote->attest);
      ev.signature = std::move(quote->signature);
      ev.pcrs = std::move(pcrs).value();
      break;
    }
    if (attempt == kQuoteAttempts) {
      Wipe(&ev.secret);
      return Failure::FromStatus(
          Status::TpmError("pcrs_changing", "PCR values kept changing between TPM2_Quote and TPM2_PCR_Read"));
    }
  }
  auto log = ReadEventLog();
  if (!log.ok()) {
    Wipe(&ev.secret);
    return log.failure();
  }
  ev.event_log = std::move(*log);
  ev.pcr_signature = ReadPcrSignature();
  const std::string log_note = ev.event_log ? std::to_string(ev.event_log->size()) + "B" : "none";

  std::string body = wire::EncodeEvidenceRequest(ev);
  // The secret is single-use and its session is consumed by this request,
  // but it is still not left lying around in freed memory.
  Wipe(&ev.secret);
  // Only where the challenge was made: a failed evidence may have consumed
  // its session, so the next appliance starts from a fresh challenge.
  // The token's expiry is counted from before it was asked for.
  const std::time_t asked_at = clock_.now();
  resp = Call("POST", "/v1/attest/evidence", body, {}, /*once=*/true);
  Wipe(&body);
  if (!resp.ok()) return resp.failure();
  auto token = UsableAnswer(wire::DecodeToken(resp->body));
  if (!token.ok()) return token.failure();

  Log("ok", "hostname=" + token->hostname + " state=" + token->state + " ek=" + EkKindName(choice->kind) +
                (choice->certificate ? "" : "(no-cert)") + " ak=" + (options_.ak == AkAlg::kRsa ? "rsa" : "ecc") +
                " pcrs=" + attest::FormatPcrSelectionList(challenge->pcr_selection) + " eventlog=" + log_note +
                (ev.pcr_signature ? " pcr_signature=sent" : "") +
                " ms=" + std::to_string(MillisSince(t0)));
  last_token_ = *token;
  FollowCaBundle(token->ca_bundle);
  attested_ek_ = choice->kind;
  Attestation a;
  a.token = std::move(token).value();
  a.nonce = challenge->nonce;
  a.ak = std::move(ak->object);
  a.ak_blobs = std::move(ak->blobs);
  a.ak_alg = options_.ak;
  a.ek = choice->kind;
  a.expires_at = asked_at + a.token.expires_in;
  return a;
}

Outcome<Done> Agent::Config(const Attestation& a) {
  step_ = "config";
  const auto t0 = std::chrono::steady_clock::now();
  // Applied once, on the first boot. A machine the appliance still sees
  // before its config (enrolled or attested: new, or reset by an operator)
  // gets it again whatever the stamp says.
  // The stamp must also name the machine the appliance identified: a disk
  // moved from another machine gets this machine's config applied over
  // the other's.
  if (!options_.apply_root.empty() && ConfigStampExists(options_.apply_root)) {
    const Status mine = CheckDiskConfig(ReadConfigStamp(options_.apply_root), a.token.hostname, a.token.state);
    if (mine.ok()) {
      Log("ok", "kept=" + ConfigStampPath(options_.apply_root) + " state=" + a.token.state);
      done_.push_back("config_kept");
      config_done_ = true;
      return Done{};
    }
    if (mine.reason() == "config_of_another_machine") {
      Log("note", "config=replaced reason=config_of_another_machine message=\"" +
                      text::PrintableAscii(mine.message(), 300) + "\"");
      done_.push_back("config_of_another_machine_replaced");
    }
  }
  auto resp = Call("GET", "/v1/machine/config", "",
                   {AuthHeader(a.token), std::string("Accept: ") + kIgnitionAccept});
  if (!resp.ok()) return resp.failure();
  // Validated completely before anything is written or applied.
  auto plan = ParseIgnitionConfig(resp->body);
  if (!plan.ok()) return Failure::Refused(plan.status().reason(), plan.status().message());
  std::string details = "bytes=" + std::to_string(resp->body.size()) + " version=" + plan->version;
  if (!options_.config_outs.empty()) {
    // 0600: the attested config carries the machine's secrets.
    const auto* data = reinterpret_cast<const uint8_t*>(resp->body.data());
    auto written = WriteConfigOuts(options_.config_outs, std::span<const uint8_t>(data, resp->body.size()),
                                   [this](const std::string& line) { Log("note", line); });
    if (!written.ok()) return Failure::FromStatus(written.status());
    std::string list;
    for (const auto& w : *written) list += (list.empty() ? "" : ",") + w;
    details += " written=" + list;
    done_.push_back("config_written");
  }
  if (!options_.apply_root.empty()) {
    // The stamp is checked with the config: nothing is applied that could
    // not be marked as applied.
    if (Status s = ApplyIgnition(*plan, options_.apply_root, {kConfigStampInRoot}); !s.ok()) {
      return Failure::FromStatus(s);
    }
    details += " applied=" + options_.apply_root + " files=" + std::to_string(plan->files.size()) +
               " directories=" + std::to_string(plan->directories.size()) +
               " links=" + std::to_string(plan->links.size()) + " units=" + std::to_string(plan->units.size());
    if (!plan->not_applied.empty()) {
      std::string list;
      for (const auto& n : plan->not_applied) list += (list.empty() ? "" : ",") + n;
      details += " not_applied=\"" + list + "\"";
    }
    if (Status s = WriteConfigStamp(options_.apply_root, a.token.hostname, clock_.now()); !s.ok()) {
      return Failure::FromStatus(s);
    }
    done_.push_back("config_applied");
  }
  Wipe(&resp->body);
  Log("ok", details + " ms=" + std::to_string(MillisSince(t0)));
  config_done_ = true;
  config_fetched_ = true;
  return Done{};
}

Outcome<wire::IssuedCertificate> Agent::SubmitCsr(const Attestation& a, const wire::CsrRequest& request) {
  auto resp = Call("POST", "/v1/machine/csr", wire::EncodeCsrRequest(request), {AuthHeader(a.token)});
  if (!resp.ok()) return resp.failure();
  return UsableAnswer(wire::DecodeIssuedCertificate(resp->body));
}

Outcome<Done> Agent::RemoveFilesOfAnother(const std::string& hostname) {
  const std::string cn = kNodeCnPrefix + hostname;
  for (const char* prefix : {kClientPrefix, kServerPrefix}) {
    const bool client = std::string_view(prefix) == kClientPrefix;
    auto others = RemoveCertificatesOfAnother(options_.kubelet_dir, prefix, cn);
    if (!others.ok()) return Failure::FromStatus(others.status());
    if (others->empty()) continue;
    std::string names;
    for (const auto& o : *others) names += (names.empty() ? "" : ",") + text::PrintableAscii(o, 80);
    if (client) {
      // The other machine's client key goes with its certificate: its TPM
      // blobs (another TPM's) and a bootstrap key it registered.
      std::error_code ec;
      for (const char* f : {kClientTpmPublic, kClientTpmPrivate, kBootstrapKeyFile}) {
        std::filesystem::remove(std::filesystem::path(options_.kubelet_dir) / f, ec);
      }
      removed_other_client_ = true;
    }
    Log("note", std::string("certificate=") + (client ? "client" : "serving") + " removed issued_to=\"" + names +
                    "\" this_machine=\"" + cn + "\": the disk holds another machine's; a new one is asked for");
    done_.push_back(std::string(client ? "client" : "serving") + "_certificate_of_another_machine_removed");
  }
  return Done{};
}

Outcome<Done> Agent::Csr(Attestation* a) {
  step_ = "csr";
  auto resp = Call("GET", "/v1/machine", "", {AuthHeader(a->token)});
  if (!resp.ok()) return resp.failure();
  auto machine = UsableAnswer(wire::DecodeMachineRecord(resp->body));
  if (!machine.ok()) return machine.failure();
  // Approver mode: the kubelet files its own CSRs and the cluster signs.
  if (machine->kubelet_certificates == "approver") return ApproverKey(*a, *machine);
  // --apiserver, else the pool's setting from the appliance (docs/agent.md,
  // "Where the API server and node addresses come from").
  const std::string apiserver = ChosenApiserver(options_.apiserver, *machine);
  if (!ValidApiserverUrl(apiserver)) {
    return Failure::Refused("apiserver_missing",
                            "the machine's pool has rackgate sign kubelet certificates and names no API server: "
                            "set the pool's `apiserver` setting (rackgatectl pool put " + machine->pool +
                                " --settings FILE with \"apiserver\": \"https://HOST:PORT\"), or pass --apiserver "
                                "https://HOST:PORT");
  }
  if (!client_done_) {
    // --tpm-key, or the pool asks for it.
    auto c = ClientCertificate(a, *machine, options_.tpm_key || machine->require_tpm_key);
    if (!c.ok()) return c.failure();
  }
  if (!serving_done_) {
    auto s = ServingCertificate(*a, *machine);
    if (!s.ok()) return s.failure();
  }
  const std::string ca = (std::filesystem::path(options_.kubelet_dir) / kCaFile).string();
  const std::string kubeconfig =
      RenderKubeconfig(apiserver, ca, client_cert_path_, client_key_path_);
  const std::filesystem::path kc(options_.kubeconfig);
  if (Status s = WriteInDir(kc.parent_path().string(), kc.filename().string(), kubeconfig, 0600); !s.ok()) {
    return Failure::FromStatus(s);
  }
  Log("ok", "kubeconfig=" + options_.kubeconfig + " apiserver=" + apiserver +
                (options_.apiserver.empty() ? " from=pool" : " from=flag"));
  return Done{};
}

namespace {

std::string CurrentPath(const std::string& dir, const char* prefix) {
  return (std::filesystem::path(dir) / (std::string(prefix) + "-current.pem")).string();
}

}  // namespace

// Approver mode (docs/kubernetes.md): the kubelet bootstraps through the API
// server and the cluster's signer issues. The agent makes the key of the
// kubelet's first client CSR, proves it to the appliance under this
// attestation (the CSR's self-signature with the session's token), and
// leaves it where the kubelet's TLS bootstrap takes its key from
// (<kubelet-dir>/kubelet-client.key.tmp). It signs nothing and writes no
// kubeconfig: the bootstrap kubeconfig comes with the attested config.
Outcome<Done> Agent::ApproverKey(const Attestation& a, const wire::MachineRecord& machine) {
  step_ = "kubelet_key";
  const std::string& dir = options_.kubelet_dir;
  std::error_code ec;
  if (std::filesystem::exists(CurrentPath(dir, kClientPrefix), ec)) {
    Log("ok", "kubelet_key=kept: the kubelet has its client certificate (" + CurrentPath(dir, kClientPrefix) + ")");
    done_.push_back("kubelet_certificate_kept");
    return Done{};
  }
  if (options_.tpm_key || machine.require_tpm_key) {
    return Failure::Refused("tpm_key_unusable",
                            "approver mode hands the kubelet a key file; a TPM-resident key cannot be one: "
                            "drop require_tpm_key from the pool (or --tpm-key) for kubelet_certificates approver");
  }
  const std::string path = (std::filesystem::path(dir) / kBootstrapKeyFile).string();
  // A key left by an earlier try or run (the kubelet has not used it yet)
  // is registered again rather than replaced: the kubelet may have read it.
  PkeyPtr key;
  if (auto held = ReadFile(path, 16 * 1024); held.ok()) {
    auto parsed = PrivateKeyFromPem(std::string_view(reinterpret_cast<const char*>(held->data()), held->size()));
    if (parsed.ok()) key = std::move(parsed).value();
    Wipe(&*held);
  }
  // A new key is written before it is registered: a registration that
  // waits (a manual pool's 503 csr_awaiting_approval) is asked again with
  // the same key, the one the operator approves.
  if (!key) {
    key = GenerateP256Key();
    std::string pem = PrivateKeyPem(key.get());
    Status s = WriteInDir(dir, kBootstrapKeyFile, pem, 0600);
    Wipe(&pem);
    if (!s.ok()) return Failure::FromStatus(s);
  }
  CsrSubject subject{kNodesOrganization, kNodeCnPrefix + machine.hostname, {}, {}};
  auto csr = BuildCsrPem(subject, key.get(), SoftwareSigner(key.get()));
  if (!csr.ok()) return Failure::FromStatus(csr.status());
  wire::CsrRequest req;
  req.signer = kClientSigner;
  req.usages = {"digital signature", "client auth"};
  req.csr_pem = std::move(csr).value();
  auto resp = Call("POST", "/v1/machine/kubelet-key", wire::EncodeCsrRequest(req), {AuthHeader(a.token)});
  if (!resp.ok()) return resp.failure();
  auto registered = UsableAnswer(wire::DecodeKubeletKeyRegistered(resp->body));
  if (!registered.ok()) return registered.failure();
  Log("ok", "kubelet_key=registered key_sha256=" + registered->key_sha256.substr(0, 16) + " path=" + path);
  done_.push_back("kubelet_key_registered");
  if (!options_.bootstrap_kubeconfig.empty()) {
    auto b = BootstrapThroughApi(req.csr_pem, key.get(), machine.hostname, registered->key_sha256);
    if (!b.ok()) return b.failure();
  }
  client_done_ = serving_done_ = true;
  return Done{};
}

// A kubelet with --rotate-certificates makes a new in-memory key for its
// bootstrap CSR (client-go's certificate manager) and never reads
// kubelet-client.key.tmp, so its CSR would carry a key nobody attested. The
// agent therefore files the CSR of the registered key itself, as the
// kubelet would (the bootstrap kubeconfig's user, the kubelet's signer and
// usages), under a name derived from the key so that a second run finds the
// first one's CSR; the kubelet then starts with a valid certificate and
// only rotates it.
Outcome<Done> Agent::BootstrapThroughApi(const std::string& csr_pem, evp_pkey_st* key, const std::string& hostname,
                                         const std::string& key_sha256_hex) {
  step_ = "kubelet_bootstrap";
  auto creds = kube::LoadKubeconfig(options_.bootstrap_kubeconfig);
  if (!creds.ok()) return Failure::Refused(creds.status().reason(), creds.status().message());
  const std::string server = creds->server;
  const std::string ca_pem = creds->ca_pem;
  auto client = kube::Client::Create(std::move(creds).value());
  if (!client.ok()) return Failure::Refused(client.status().reason(), client.status().message());
  kube::CsrRequest r;
  r.name = "node-csr-rackgate-" + key_sha256_hex.substr(0, 32);
  r.signer_name = kClientSigner;
  r.request_pem = csr_pem;
  r.usages = {"digital signature", "key encipherment", "client auth"};
  auto filed = client->CreateCsr(r);
  if (!filed.ok() && filed.status().reason() != "kube_conflict") return KubeFailure(filed.status());
  const auto deadline = std::chrono::steady_clock::now() + options_.max_wait;
  std::string cert_pem;
  for (;;) {
    auto c = client->GetCsr(r.name);
    if (!c.ok()) return KubeFailure(c.status());
    // SECURITY: the name is predictable (a 409 when a first run filed it,
    // or when someone else did) and the bootstrap token may create CSRs:
    // wait only on a CSR of our key, the kubelet's signer and no usage we
    // did not ask for, checked on every read (it may be re-created).
    Status own = CheckOwnCsr(c->request_pem, key);
    if (own.ok() && c->signer_name != kClientSigner) {
      own = Status::VerificationFailed("kubelet_csr_not_ours", "it asks signer " +
                                                                   text::PrintableAscii(c->signer_name, 80));
    }
    for (const auto& u : c->usages) {
      if (own.ok() && std::find(r.usages.begin(), r.usages.end(), u) == r.usages.end()) {
        own = Status::VerificationFailed("kubelet_csr_not_ours", "it asks usage " + text::PrintableAscii(u, 40));
      }
    }
    if (!own.ok()) {
      // The fix first: the agent's log line is cut at 300 characters.
      return Failure::Refused("kubelet_csr_not_ours",
                              "kubectl delete csr " + r.name + ", then run the agent again: that CSR is not this "
                              "agent's (" + own.message() + "; filed by '" + text::PrintableAscii(c->username, 60) +
                                  "', uid " + text::PrintableAscii(c->uid, 40) + ")");
    }
    if (c->Denied() || c->Failed()) {
      return Failure::Refused("kubelet_csr_denied", "the kubelet's CSR " + r.name + " was " +
                                                        (c->Denied() ? "denied" : "not issued") + ": " +
                                                        ConditionText(*c));
    }
    if (c->has_certificate) {
      cert_pem = c->certificate_pem;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Failure::Retry("kubelet_csr_pending", "the kubelet's CSR " + r.name +
                                                       " was not approved and issued within --max-wait");
    }
    clock_.sleep(std::chrono::seconds(1));
  }
  auto cert = CheckIssuedCertificate(cert_pem, key, kNodeCnPrefix + hostname);
  if (!cert.ok()) return Unusable(cert.status());
  std::string key_pem = PrivateKeyPem(key);
  auto path = WriteKubeletPair(options_.kubelet_dir, kClientPrefix, *cert, key_pem, clock_.now());
  Wipe(&key_pem);
  if (!path.ok()) return Failure::FromStatus(path.status());
  if (Status s = WriteInDir(options_.kubelet_dir, kCaFile, ca_pem, 0644); !s.ok()) return Failure::FromStatus(s);
  const std::string ca = (std::filesystem::path(options_.kubelet_dir) / kCaFile).string();
  const std::filesystem::path kc(options_.kubeconfig);
  if (Status s = WriteInDir(kc.parent_path().string(), kc.filename().string(),
                            RenderKubeconfig(server, ca, *path, *path), 0600);
      !s.ok()) {
    return Failure::FromStatus(s);
  }
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(options_.kubelet_dir) / kBootstrapKeyFile, ec);
  Log("ok", "kubelet_csr=" + r.name + " issued path=" + *path + " kubeconfig=" + options_.kubeconfig);
  done_.push_back("kubelet_certificate_written");
  return Done{};
}

namespace {

Result<KeyBlobs> ReadClientBlobs(const std::string& dir) {
  auto pub = ReadFile((std::filesystem::path(dir) / kClientTpmPublic).string(), 4096);
  if (!pub.ok()) return pub.status();
  auto priv = ReadFile((std::filesystem::path(dir) / kClientTpmPrivate).string(), 4096);
  if (!priv.ok()) return priv.status();
  return KeyBlobs{std::move(pub).value(), std::move(priv).value()};
}

}  // namespace

Result<Bytes> Agent::SignWithTpmClientKey(const KeyBlobs& blobs, std::span<const uint8_t> digest) {
  auto srk = tpm_->CreateSrk();
  if (!srk.ok()) return srk.status();
  auto key = tpm_->LoadKey(*srk, blobs);
  if (!key.ok()) return key.status();
  srk->Flush();
  auto sig = tpm_->SignDigest(*key, digest);
  if (!sig.ok()) return sig.status();
  return EcdsaDerFromTpmtSignature(*sig);
}

CertificatePlan Agent::PlanClientCertificate(const std::string& expected_cn, bool joined, double renew_fraction,
                                             std::optional<KeyBlobs>* current_blobs) {
  return PlanCertificate(options_.kubelet_dir, kClientPrefix, expected_cn, joined, clock_.now(), renew_fraction,
                         [&](const HeldCertificate& c) {
                           if (c.private_key) return true;  // checked against the certificate when read
                           auto blobs = ReadClientBlobs(options_.kubelet_dir);
                           if (!blobs.ok()) return false;
                           auto pub = PublicKeyFromTpm2bPublic(blobs->tpm2b_public);
                           if (!pub.ok() || EVP_PKEY_eq(pub->get(), c.public_key.get()) != 1) return false;
                           *current_blobs = std::move(blobs).value();
                           return true;
                         });
}

Result<Agent::ClientKey> Agent::NewClientKey(bool tpm_key) {
  ClientKey key;
  if (!tpm_key) {
    if (!client_key_) client_key_ = GenerateP256Key();
    EVP_PKEY_up_ref(client_key_.get());  // a second owner of the same key
    key.public_key = PkeyPtr(client_key_.get());
    key.key_pem = PrivateKeyPem(key.public_key.get());
    return key;
  }
  // The key is born in the TPM under a fresh SRK (owner hierarchy), and
  // the AK that just attested vouches for it with TPM2_Certify over the
  // session's nonce: the appliance learns the key is TPM-resident and
  // belongs to this attestation. Made once per run: a CSR that waits is
  // asked again with the same key.
  if (!client_blobs_) {
    auto srk = tpm_->CreateSrk();
    if (!srk.ok()) return srk.status();
    auto created = tpm_->CreateKey(*srk, ClientKeyTemplate());
    if (!created.ok()) return created.status();
    client_blobs_ = std::move(created).value();
  }
  key.blobs = *client_blobs_;
  auto pub = PublicKeyFromTpm2bPublic(key.blobs.tpm2b_public);
  if (!pub.ok()) return Status::TpmError("tpm_bad_answer", pub.status().message());
  key.public_key = std::move(pub).value();
  return key;
}

Status Agent::AddClientRenewalProof(const Attestation& a, const CertificatePlan& held,
                                    const std::optional<KeyBlobs>& current_blobs, double renew_fraction,
                                    evp_pkey_st* new_key, wire::CsrRequest* req) {
  // The current key signs for the new one, over this session's nonce
  // (docs/agent.md). Signed before the new TPM key is loaded: swtpm has
  // three object slots and the AK holds one.
  DigestSigner current;
  if (held.cert->private_key) {
    current = SoftwareSigner(held.cert->private_key.get());
  } else {
    const KeyBlobs cb = *current_blobs;
    current = [this, cb](std::span<const uint8_t> digest) { return SignWithTpmClientKey(cb, digest); };
  }
  Log("note", "certificate=client renewing=" + held.why + " not_after=" + std::to_string(held.cert->not_after) +
                  " renew_fraction=" + std::to_string(renew_fraction));
  auto proof = MakeRenewalProof(*held.cert, a.nonce, new_key, current);
  if (!proof.ok()) return proof.status();
  req->renewal = std::move(proof).value();
  return Status::Ok();
}

Status Agent::SignClientCsrWithTpm(const Attestation& a, const CsrSubject& subject, const ClientKey& key,
                                   wire::CsrRequest* req) {
  auto srk = tpm_->CreateSrk();
  if (!srk.ok()) return srk.status();
  auto loaded = tpm_->LoadKey(*srk, key.blobs);
  if (!loaded.ok()) return loaded.status();
  srk->Flush();
  auto certified = tpm_->Certify(*loaded, a.ak, a.nonce);
  if (!certified.ok()) return certified.status();
  TpmObject* object = &*loaded;
  DigestSigner signer = [this, object](std::span<const uint8_t> digest) -> Result<Bytes> {
    auto sig = tpm_->SignDigest(*object, digest);
    if (!sig.ok()) return sig.status();
    return EcdsaDerFromTpmtSignature(*sig);
  };
  auto csr = BuildCsrPem(subject, key.public_key.get(), signer);
  if (!csr.ok()) {
    return csr.status().code() == Status::Code::kTpmError ? csr.status()
                                                            : Status::TpmError("csr_failed", csr.status().ToString());
  }
  req->csr_pem = std::move(csr).value();
  req->tpm_key = wire::TpmKeyProof{key.blobs.tpm2b_public, std::move(certified->attest),
                                   std::move(certified->signature)};
  return Status::Ok();
}

Result<std::string> Agent::WriteClientCertificate(const std::string& cert_pem, const std::string& ca_pem,
                                                  const ClientKey& key, bool tpm_key) {
  if (Status s = WriteInDir(options_.kubelet_dir, kCaFile, ca_pem, 0644); !s.ok()) return s;
  if (tpm_key) {
    const std::string_view pub(reinterpret_cast<const char*>(key.blobs.tpm2b_public.data()),
                               key.blobs.tpm2b_public.size());
    const std::string_view priv(reinterpret_cast<const char*>(key.blobs.tpm2b_private.data()),
                                key.blobs.tpm2b_private.size());
    if (Status s = WriteInDir(options_.kubelet_dir, kClientTpmPublic, pub, 0600); !s.ok()) return s;
    if (Status s = WriteInDir(options_.kubelet_dir, kClientTpmPrivate, priv, 0600); !s.ok()) return s;
  }
  return WriteKubeletPair(options_.kubelet_dir, kClientPrefix, cert_pem,
                          tpm_key ? std::nullopt : std::optional<std::string_view>(key.key_pem), clock_.now());
}

Outcome<Done> Agent::ClientCertificate(Attestation* a, const wire::MachineRecord& machine, bool tpm_key) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& hostname = machine.hostname;
  const bool joined = a->token.state == "joined";
  // The current key when it is TPM-resident: its blobs beside the
  // certificate, and its public area must be the certificate's key.
  std::optional<KeyBlobs> current_blobs;
  CertificatePlan held =
      PlanClientCertificate(kNodeCnPrefix + hostname, joined, machine.renew_fraction, &current_blobs);
  if (held.cert && !held.renew) {
    client_cert_path_ = CurrentPath(options_.kubelet_dir, kClientPrefix);
    client_key_path_ = held.cert->private_key ? client_cert_path_ : "";
    Log("ok", "certificate=client kept not_after=" + std::to_string(held.cert->not_after) +
                  " path=" + client_cert_path_);
    done_.push_back("client_certificate_kept");
    client_done_ = true;
    return Done{};
  }

  CsrSubject subject{kNodesOrganization, kNodeCnPrefix + hostname, {}, {}};
  wire::CsrRequest req;
  req.signer = kClientSigner;
  req.usages = {"digital signature", "client auth"};
  auto key = NewClientKey(tpm_key);
  if (!key.ok()) return Failure::FromStatus(key.status());
  if (held.cert) {
    if (Status s = AddClientRenewalProof(*a, held, current_blobs, machine.renew_fraction, key->public_key.get(), &req);
        !s.ok()) {
      Wipe(&key->key_pem);
      return Failure::FromStatus(s);
    }
  }
  if (tpm_key) {
    if (Status s = LoadCarriedAk(a); !s.ok()) return Failure::FromStatus(s);
    if (Status s = SignClientCsrWithTpm(*a, subject, *key, &req); !s.ok()) return Failure::FromStatus(s);
  } else {
    auto csr = BuildCsrPem(subject, key->public_key.get(), SoftwareSigner(key->public_key.get()));
    if (!csr.ok()) {
      Wipe(&key->key_pem);
      return Failure::FromStatus(csr.status());
    }
    req.csr_pem = std::move(csr).value();
  }

  auto issued = SubmitCsr(*a, req);
  if (!issued.ok()) {
    Wipe(&key->key_pem);
    if (removed_other_client_ && issued.failure().reason == "client_cert_already_issued") {
      // This machine joined with another disk; the one in it was another
      // machine's. Only the operator's reset lets it join again.
      Failure f = issued.failure();
      f.message += "; this disk held another machine's client certificate (removed), not " + hostname +
                   "'s: rackgatectl reset " + hostname + " lets it join again with this disk";
      return f;
    }
    return issued.failure();
  }
  auto cert = CheckIssuedCertificate(issued->certificate_pem, key->public_key.get(), subject.common_name);
  auto ca = NormalizeCertificatesPem(issued->ca_pem);
  if (!cert.ok() || !ca.ok()) {
    Wipe(&key->key_pem);
    return Unusable(cert.ok() ? ca.status() : cert.status());
  }
  auto path = WriteClientCertificate(*cert, *ca, *key, tpm_key);
  Wipe(&key->key_pem);
  if (!path.ok()) return Failure::FromStatus(path.status());
  client_cert_path_ = *path;
  // With a TPM key there is no key file: kubelet needs a TPM-aware signer
  // (docs/agent.md).
  client_key_path_ = tpm_key ? "" : *path;
  step_ = "csr";
  Log("ok", std::string("certificate=client key=") + (tpm_key ? "tpm" : "software") +
                (held.cert ? " renewed=" + held.why : "") + " serial=" + issued->serial +
                " not_after=" + std::to_string(issued->not_after) + " path=" + *path +
                " ms=" + std::to_string(MillisSince(t0)));
  done_.push_back(held.cert ? "client_certificate_renewed" : "client_certificate_written");
  client_done_ = true;
  return Done{};
}

Outcome<Done> Agent::ServingCertificate(const Attestation& a, const wire::MachineRecord& machine) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& hostname = machine.hostname;
  CertificatePlan held =
      PlanCertificate(options_.kubelet_dir, kServerPrefix, kNodeCnPrefix + hostname, a.token.state == "joined",
                      clock_.now(), machine.renew_fraction,
                      [](const HeldCertificate& c) { return c.private_key != nullptr; });
  if (held.cert && !held.renew) {
    Log("ok", "certificate=serving kept not_after=" + std::to_string(held.cert->not_after) +
                  " path=" + CurrentPath(options_.kubelet_dir, kServerPrefix));
    done_.push_back("serving_certificate_kept");
    serving_done_ = true;
    return Done{};
  }
  // --node-ip, else the machine's enrolled IP addresses from the appliance.
  CsrSubject subject{kNodesOrganization, kNodeCnPrefix + hostname, {hostname},
                     ChosenNodeIps(options_.node_ips, machine)};
  // Kept across retries within this run, as the client key is.
  if (!serving_key_) serving_key_ = GenerateP256Key();
  evp_pkey_st* key = serving_key_.get();
  std::string key_pem = PrivateKeyPem(key);
  auto csr = BuildCsrPem(subject, key, SoftwareSigner(key));
  if (!csr.ok()) {
    Wipe(&key_pem);
    return Failure::FromStatus(csr.status());
  }
  wire::CsrRequest req;
  req.signer = kServingSigner;
  req.usages = {"digital signature", "server auth"};
  req.csr_pem = std::move(csr).value();
  if (held.cert) {
    Log("note", "certificate=serving renewing=" + held.why + " not_after=" + std::to_string(held.cert->not_after) +
                    " renew_fraction=" + std::to_string(machine.renew_fraction));
    auto proof = MakeRenewalProof(*held.cert, a.nonce, key,
                                  SoftwareSigner(held.cert->private_key.get()));
    if (!proof.ok()) {
      Wipe(&key_pem);
      return Failure::FromStatus(proof.status());
    }
    req.renewal = std::move(proof).value();
  }
  auto issued = SubmitCsr(a, req);
  if (!issued.ok()) {
    Wipe(&key_pem);
    return issued.failure();
  }
  auto cert = CheckIssuedCertificate(issued->certificate_pem, key, subject.common_name);
  if (!cert.ok()) {
    Wipe(&key_pem);
    return Unusable(cert.status());
  }
  auto path = WriteKubeletPair(options_.kubelet_dir, kServerPrefix, *cert, key_pem, clock_.now());
  Wipe(&key_pem);
  if (!path.ok()) return Failure::FromStatus(path.status());
  Log("ok", "certificate=serving" + (held.cert ? " renewed=" + held.why : std::string()) +
                " serial=" + issued->serial + " not_after=" + std::to_string(issued->not_after) +
                " path=" + *path + " ms=" + std::to_string(MillisSince(t0)));
  done_.push_back(held.cert ? "serving_certificate_renewed" : "serving_certificate_written");
  serving_done_ = true;
  return Done{};
}

}  // namespace rackgate::agent
