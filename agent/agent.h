// The node's path (DESIGN.md, docs/protocol.md) as steps: attest (challenge,
// ActivateCredential, quote, evidence → bearer token), config (the attested
// Ignition config, written and/or applied), csr (kubelet client and serving
// certificates, kubeconfig). A 503 or an unreachable appliance sends the
// agent back to the challenge after a wait; steps already done are not
// repeated. One log line per step on stderr. Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_AGENT_H_
#define RACKGATE_AGENT_AGENT_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/agent.h is internal to rackgate-agent"
#endif

#include <chrono>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/client.h"
#include "agent/csr.h"
#include "agent/ek.h"
#include "agent/failure.h"
#include "agent/exchange.h"
#include "agent/failover.h"
#include "agent/session.h"
#include "agent/tpm.h"
#include "wire/protocol.h"

namespace rackgate::agent {

struct CertificatePlan;

// The flags' defaults (main.cc; --install-root carries what differs).
inline constexpr char kDefaultTcti[] = "device:/dev/tpmrm0";
inline constexpr char kDefaultEventLog[] = "/sys/kernel/security/tpm0/binary_bios_measurements";
inline constexpr char kDefaultPcrSignature[] = "/run/systemd/tpm2-pcr-signature.json";
inline constexpr char kDefaultKubeletDir[] = "/var/lib/kubelet/pki";
inline constexpr char kDefaultKubeconfig[] = "/var/lib/kubelet/kubeconfig";

struct AgentOptions {
  EkPreference ek = EkPreference::kAny;
  // The CA file the client trusts (--ca): replaced with the appliance's CA
  // bundle after an evidence exchange when it differs (docs/agent.md, "The
  // appliance CA follows a rotation"); "" never replaces anything.
  std::string ca_file;
  AkAlg ak = AkAlg::kEcc;
  std::string eventlog_path;  // "" sends no event log
  // The `systemd-measure sign` document systemd-stub left for the booted
  // system; "" sends none. Missing, too large or malformed: none is sent
  // (a policy's uki_signed rule then refuses with uki_signature_missing).
  std::string pcr_signature_path;
  bool step_config = false;
  bool step_csr = false;
  // Where the config is written (at most kMaxConfigOuts; none: not
  // written). With several, a missing or read-only directory is skipped
  // (config_out.h).
  std::vector<std::string> config_outs;
  std::string apply_root;  // "" applies nothing
  // Without the config step: the root whose config an earlier run fetched
  // (its stamp, renewal.h), checked against the machine the appliance
  // identifies (CheckDiskConfig); "" checks none. --install-root passes
  // --config-root=/ to later boots.
  std::string config_root;
  std::string kubelet_dir;
  std::string kubeconfig;
  std::string apiserver;
  // Approver mode (docs/kubernetes.md): the kubelet's bootstrap kubeconfig.
  // Given: the agent files the kubelet's first client CSR in the API server
  // with it and writes the issued certificate and the kubelet's kubeconfig,
  // as a kubelet with --rotate-certificates needs; "": the key is left as
  // kubelet-client.key.tmp for the kubelet's own TLS bootstrap.
  std::string bootstrap_kubeconfig;
  std::vector<std::string> node_ips;
  bool tpm_key = false;
  std::chrono::seconds max_wait{3600};
  // --session FILE: an earlier run's attestation to use instead of
  // attesting (session.h); "" attests. --session-out FILE: where the run's
  // attestation goes once its steps succeeded; "" writes none.
  std::string session_in;
  std::string session_out;
};

// How the agent sleeps and reads the clock; tests may replace both.
struct AgentClock {
  std::function<std::time_t()> now;
  std::function<void(std::chrono::milliseconds)> sleep;
  std::function<double()> unit_random;  // uniform in [0, 1)
};
AgentClock SystemClock();

class Agent {
 public:
  // `tpm` and `transport` are BORROWED and must outlive the agent.
  // REQUIRES: !endpoints.empty().
  Agent(AgentOptions options, Tpm* tpm, std::vector<Endpoint> endpoints, const Transport* transport,
        AgentClock clock);
  // The failover's log line refers back to this agent.
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs every selected step, waiting and starting again from the
  // challenge on 503s and unreachable appliances for at most max_wait in
  // all. A step whose appliance failed is asked of the next appliance at
  // once (failover.h); a failed evidence starts again from a fresh challenge
  // on the next one. Returns the process exit code (failure.h).
  int Run();

  // What the run's last attestation established, for --install-root: the
  // machine the appliance identified ("" before any), the EK that attested,
  // and whether this run fetched the attested config.
  std::string attested_hostname() const { return last_token_ ? last_token_->hostname : ""; }
  std::optional<EkKind> attested_ek() const { return attested_ek_; }
  bool config_fetched() const { return config_fetched_; }

 private:
  struct Attestation {
    wire::Token token;
    Bytes nonce;
    // Kept loaded for TPM2_Certify in the csr step; a carried attestation's
    // is loaded from ak_blobs when a TPM key needs it (LoadCarriedAk).
    TpmObject ak;
    KeyBlobs ak_blobs;
    AkAlg ak_alg = AkAlg::kEcc;
    EkKind ek = EkKind::kRsa2048;
    std::time_t expires_at = 0;  // wall clock
    bool carried = false;        // from --session, not this run's
  };

  Outcome<Done> RunOnce();
  Outcome<Attestation> Attest();
  // --session: reads (and removes) the carried session into carried_, or
  // logs why the run attests afresh.
  void TakeCarriedSession();
  // The carried session as this run's attestation (used once).
  Attestation UseCarried();
  // A carried attestation's AK, loaded under the EK recreated (for
  // TPM2_Certify); a no-op when it is loaded.
  Status LoadCarriedAk(Attestation* a);
  // Whether failure `f` of a step made with the carried token sends the run
  // back to a fresh attestation (once): the appliance refused the token
  // (401), or the carried AK would not load.
  bool AttestAfresh(const Failure& f);
  // --session-out: writes the run's attestation; a failure is a log line.
  void WriteSessionOut();
  Outcome<Done> Config(const Attestation& a);
  Outcome<Done> Csr(Attestation* a);
  // Removes the kubelet's certificates (and the client key's files) that
  // were issued to another machine than `hostname` (renewal.h,
  // RemoveCertificatesOfAnother); a log line and a report entry each.
  Outcome<Done> RemoveFilesOfAnother(const std::string& hostname);
  // The client key a CSR is made for: software (key_pem) or TPM-resident
  // (blobs), made once per run (client_key_, client_blobs_).
  struct ClientKey {
    PkeyPtr public_key;
    std::string key_pem;  // software key only; wiped once written
    KeyBlobs blobs;       // TPM key only
  };

  Outcome<Done> ClientCertificate(Attestation* a, const wire::MachineRecord& machine, bool tpm_key);
  // Whether the client certificate in the kubelet dir is kept or renewed;
  // *current_blobs gets the current TPM-resident key's blobs, if it is one.
  CertificatePlan PlanClientCertificate(const std::string& expected_cn, bool joined, double renew_fraction,
                                        std::optional<KeyBlobs>* current_blobs);
  Result<ClientKey> NewClientKey(bool tpm_key);
  // Renewal: the held certificate's key signs for `new_key` (req->renewal).
  Status AddClientRenewalProof(const Attestation& a, const CertificatePlan& held,
                               const std::optional<KeyBlobs>& current_blobs, double renew_fraction,
                               evp_pkey_st* new_key, wire::CsrRequest* req);
  // The TPM key signs the CSR and the AK certifies it (req->csr_pem,
  // req->tpm_key); the key is loaded for this and flushed again.
  Status SignClientCsrWithTpm(const Attestation& a, const CsrSubject& subject, const ClientKey& key,
                              wire::CsrRequest* req);
  // Writes the CA, the TPM key's blobs and the certificate (with the
  // software key) into the kubelet dir; the pair's path.
  Result<std::string> WriteClientCertificate(const std::string& cert_pem, const std::string& ca_pem,
                                             const ClientKey& key, bool tpm_key);
  Outcome<Done> ServingCertificate(const Attestation& a, const wire::MachineRecord& machine);
  // The current TPM-resident client key (its blobs beside the certificate)
  // signs `digest`; the key is loaded under a fresh SRK and flushed again.
  Result<Bytes> SignWithTpmClientKey(const KeyBlobs& blobs, std::span<const uint8_t> digest);
  // POSTs the run's provisioning report when a token was ever obtained;
  // best effort: a failure is a log line, never the run's outcome.
  void Report(int exit_status, const Failure* failure);
  Outcome<wire::IssuedCertificate> SubmitCsr(const Attestation& a, const wire::CsrRequest& request);
  // Approver mode: registers the kubelet's bootstrap key (docs/kubernetes.md).
  Outcome<Done> ApproverKey(const Attestation& a, const wire::MachineRecord& machine);
  // Approver mode with --bootstrap-kubeconfig: files `csr_pem` (the
  // registered key's) in the API server as the bootstrapper, waits for the
  // cluster to issue it, and writes the kubelet's certificate, the CA and
  // its kubeconfig.
  Outcome<Done> BootstrapThroughApi(const std::string& csr_pem, evp_pkey_st* key, const std::string& hostname,
                                    const std::string& key_sha256_hex);
  // GET when `body` is empty, else POST; on every appliance in turn until
  // one answers (Failover::Call), or only the current one (`once`).
  Outcome<HttpResponse> Call(const char* method, const std::string& path, const std::string& body,
                             const std::vector<std::string>& headers, bool once = false);
  Outcome<std::optional<Bytes>> ReadEventLog();
  std::optional<std::string> ReadPcrSignature();

  void Log(const std::string& outcome, const std::string& details) const;
  void LogFailure(const Failure& f, const std::string& extra = "") const;
  // Writes the evidence answer's CA bundle over options_.ca_file when it
  // differs; one log line when it did or could not. Never fails the run.
  void FollowCaBundle(const std::string& bundle) const;

  AgentOptions options_;
  Tpm* tpm_;
  AgentClock clock_;
  Failover failover_;

  std::string step_ = "attest";
  std::string machine_ = "-";  // EK identity prefix, for log lines
  bool config_done_ = false;
  bool client_done_ = false;
  bool serving_done_ = false;
  bool config_fetched_ = false;
  // This run removed a client certificate of another machine's.
  bool removed_other_client_ = false;
  std::optional<EkKind> attested_ek_;
  // --session: the carried attestation until a run uses it; whether the
  // current attestation is it, and whether the run went back to a fresh
  // one already. --session-out: the run's attestation, to be written.
  std::optional<CarriedSession> carried_;
  bool using_carried_ = false;
  bool carried_given_up_ = false;
  std::optional<CarriedSession> session_out_;
  // The latest token of this run (for the provisioning report) and what the
  // run did, in order (wire::ProvisioningReport::done).
  std::optional<wire::Token> last_token_;
  std::vector<std::string> done_;
  std::string client_cert_path_;
  std::string client_key_path_;
  // The software client key, kept across retries within this run: when the
  // answer to a client CSR is lost, the same key asks again and rackgated
  // sends the same certificate (docs/csr.md) instead of refusing a second.
  PkeyPtr client_key_;
  // The same for a TPM-resident client key (its blobs) and the serving key:
  // a CSR that waits (503) is asked again with the same key.
  std::optional<KeyBlobs> client_blobs_;
  PkeyPtr serving_key_;
};

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_AGENT_H_
