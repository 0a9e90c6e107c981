// A machine's second and later runs: the kubelet certificates already on
// disk read back and judged (keep, renew, or ask for a first one), the
// renewal proof signed by the current key, the first-boot stamp of the
// attested config, and the provisioning report's body. Pure but for the
// file reads and the stamp's write. Internal to rackgate-agent; see
// docs/agent.md ("Reboots and renewal").
#ifndef RACKGATE_AGENT_RENEWAL_H_
#define RACKGATE_AGENT_RENEWAL_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/renewal.h is internal to rackgate-agent"
#endif

#include <ctime>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/csr.h"
#include "base/status.h"
#include "wire/protocol.h"

namespace rackgate::agent {

// A certificate the kubelet holds: <dir>/<prefix>-current.pem.
struct HeldCertificate {
  std::string certificate_pem;  // the first certificate, re-encoded
  PkeyPtr public_key;           // the certificate's
  PkeyPtr private_key;          // null when the file has none (TPM-resident key)
  // The subject's one commonName ("system:node:NAME"); "" when it has none
  // or several.
  std::string subject_cn;
  std::time_t not_before = 0;
  std::time_t not_after = 0;
};

// Reads <dir>/<prefix>-current.pem (certificate first, then the key when
// the key is in software). kNotFound ("certificate_missing") when there is
// no such file; kInvalidArgument ("certificate_invalid") when it does not
// parse, or holds a key that is not the certificate's.
Result<HeldCertificate> ReadHeldCertificate(const std::string& dir, const char* prefix);
// The same for one file at `path` (a kubelet PEM pair, or a certificate).
Result<HeldCertificate> ReadHeldCertificateFile(const std::string& path);

enum class CertificateAction {
  kKeep,   // valid, and not yet in its renewal window
  kRenew,  // in the last `renew_fraction` of its validity, or expired
};
// Renewal opens when at most renew_fraction of [not_before, not_after] is
// left at `now` (the appliance's rule, wire::MachineRecord::renew_fraction),
// or once the certificate expired. A fraction outside (0, 1] is read as the
// default third. A certificate with not_after <= not_before is due.
CertificateAction DecideCertificate(std::time_t not_before, std::time_t not_after, std::time_t now,
                                    double renew_fraction);

// What to do with one of the kubelet's certificates on this run.
struct CertificatePlan {
  std::optional<HeldCertificate> cert;  // absent: ask for a first certificate
  bool renew = false;                   // with cert: renew it (else keep it)
  // For the log: first, certificate_missing, certificate_invalid,
  // other_machine, key_mismatch, valid, due, expired.
  std::string why;
};
// A joined machine's certificate on disk (<dir>/<prefix>-current.pem) is
// kept while valid and not due, renewed when due or expired; anything else
// (not joined, missing, unreadable, issued to another machine: a subject
// CN that is not `expected_cn`, `key_matches` false) asks for a first
// certificate, which the appliance refuses for a joined machine's client
// certificate until an operator's reset (a wiped disk). `key_matches`
// checks a key that is not in the file (the TPM-resident client key); a
// key in the file was checked against the certificate when read.
CertificatePlan PlanCertificate(const std::string& dir, const char* prefix, const std::string& expected_cn,
                                bool joined, std::time_t now,
                                double renew_fraction,
                                const std::function<bool(const HeldCertificate&)>& key_matches);

// A machine's files belong to the machine that attested (docs/agent.md,
// "A disk in another machine"): removes from `dir` every
// <prefix>-*.pem file whose certificate names another machine (a subject
// CN that is not `expected_cn`, "system:node:" + the hostname the
// appliance identified this boot), and <prefix>-current.pem when it then
// points at nothing. Files that hold no readable certificate are left to
// PlanCertificate. Returns the other names found (sorted, each once),
// empty when nothing was removed; kIoError io_failed when a file could not
// be removed.
Result<std::vector<std::string>> RemoveCertificatesOfAnother(const std::string& dir, const char* prefix,
                                                             const std::string& expected_cn);

// SHA-256 of the key's SubjectPublicKeyInfo (DER).
Bytes SpkiSha256(evp_pkey_st* key);

// The proof that goes with a renewal CSR: the current certificate and the
// current key's signature (by `current_signer`, over SHA-256 of
// wire::RenewalSignedMessage(nonce, SpkiSha256(new_key))). The signature is
// verified against the current certificate's key before it is returned, as
// the appliance will (a TPM signer's answer included). `new_key` is
// BORROWED. The signer's failure as it is; kVerificationFailed
// ("renewal_signature_invalid") when the signature does not verify.
Result<wire::RenewalProof> MakeRenewalProof(const HeldCertificate& current, std::span<const uint8_t> nonce,
                                            evp_pkey_st* new_key, const DigestSigner& current_signer);

// The first-boot stamp: the attested config is applied under `apply_root`
// once, and this file records that it was (docs/agent.md):
// <apply_root>/var/lib/rackgate-agent/config-applied.
// The stamp's path inside the apply root.
inline constexpr char kConfigStampInRoot[] = "/var/lib/rackgate-agent/config-applied";
std::string ConfigStampPath(const std::string& apply_root);
bool ConfigStampExists(const std::string& apply_root);
// Writes the stamp (ConfigStampText, 0644), atomically, creating its
// directory when missing.
Status WriteConfigStamp(const std::string& apply_root, const std::string& hostname, std::time_t now);
// "applied_at=<unix time> hostname=<name>\n".
std::string ConfigStampText(const std::string& hostname, std::time_t now);

// The stamp as written: when, and for which machine.
struct ConfigStamp {
  std::time_t applied_at = 0;
  std::string hostname;
};
// Reads the stamp under `root`. kNotFound ("config_stamp_missing") when
// there is none; kInvalidArgument ("config_stamp_invalid") when it is not
// the one line ConfigStampText writes.
Result<ConfigStamp> ReadConfigStamp(const std::string& root);

// Whether the config on this disk (its stamp, as ReadConfigStamp read it)
// may stand as the config of the machine the appliance identified this
// boot (the token's `hostname` and `state`), for a run without the config
// step (--config-root). OK when the stamp names `hostname` and the
// appliance has provisioned the machine (provisioned or joined). Else
// kVerificationFailed, each message naming the fix:
//   config_of_another_machine  the stamp names another machine (a disk
//                              moved between machines);
//   config_not_provisioned     the appliance has not provisioned this
//                              machine (enrolled or attested: new, or
//                              reset), or the stamp is missing or
//                              unreadable: never treated as provisioned.
Status CheckDiskConfig(const Result<ConfigStamp>& stamp, const std::string& hostname, const std::string& state);

// The provisioning report of one run (wire::ProvisioningReport): outcome
// "ok" when exit_status is 0, else "failed" with the failure's reason and
// message (made printable, cut to wire::kMaxReportMessage); `done` cut to
// wire::kMaxReportDone entries.
wire::ProvisioningReport MakeReport(const std::string& step, int exit_status, const std::string& reason,
                                    const std::string& message, const std::vector<std::string>& done);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_RENEWAL_H_
