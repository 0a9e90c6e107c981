// EK certificates an operator brings: verified, put on record by EK; and the
// EKs that lack one.
#include "core/ek_cert_service.h"

#include <algorithm>
#include <utility>

#include "attest/ek_cert.h"
#include "attest/ek_identity.h"
#include "base/hex.h"
#include "base/log.h"
#include "core/attestation.h"
#include "core/enrollment_merge.h"
#include "wire/codec.h"
#include "wire/protocol.h"

namespace rackgate::core {

namespace {

using attest::Bytes;

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("admin");
  return log;
}

// How far back an unknown EK counts as still knocking.
constexpr int64_t kUnknownEkWindowSeconds = 24 * 3600;

std::string Short(const Bytes& ek_hash) { return hex::Encode(ek_hash).substr(0, 16); }

Status MachineUnknown(const Bytes& ek_hash) {
  return Status::NotFound(kEkCertMachineUnknown,
                          "no machine is enrolled with this certificate's EK (ek " + Short(ek_hash) +
                              "); enroll it with the certificate: `rackgatectl enroll --hostname NAME --pool POOL "
                              "--ek-cert FILE`");
}

// The operator's file name as the audit row says it: at most 200 bytes,
// printable ASCII (anything else '?'), so that it reads as one line.
std::string SourceText(const std::string& source) {
  std::string out = source.substr(0, 200);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

}  // namespace

EkCertService::EkCertService(storage::InventoryStore* inventory, const AttestationService* attestation)
    : inventory_(inventory), attestation_(attestation) {}

Result<wire::EkCertImportAnswer> EkCertService::Import(const wire::EkCertImportRequest& request,
                                                       const storage::Actor& actor) {
  auto der = wire::Base64Decode(request.certificate_base64, wire::kMaxCertificate);
  if (!der) return Status::InvalidArgument("field_invalid", "certificate is not base64");
  // SECURITY: verified against the anchors in force now, as an enrollment
  // with the certificate is, before anything is read or written; the
  // identity is the certified key itself, so the certificate can only ever
  // land on the machine that holds that EK.
  auto info = attestation_->CheckEkCertificate(*der, {}, nullptr);
  if (!info.ok()) return info.status();
  auto ek_hash = attest::EkKeyHashFromCertificate(info->der);
  if (!ek_hash.ok()) return ek_hash.status();
  auto found = inventory_->FindMachineByEkHash(*ek_hash);
  if (!found.ok()) {
    if (found.status().code() == Status::Code::kNotFound) return MachineUnknown(*ek_hash);
    return found.status();
  }

  storage::Enrollment e;
  e.hostname = found->hostname;
  e.ek_hash = *ek_hash;
  e.ek_public = found->ek_public;
  e.ek_certificate = info->der;
  e.tpm_manufacturer = info->tpm_manufacturer;
  e.tpm_model = info->tpm_model;
  e.tpm_version = info->tpm_version;
  e.ek_relaxations = info->relaxations_used;
  EnrollFields fields;  // only the certificate: everything else is kept
  fields.pool = false;
  fields.addresses = false;
  fields.vars = false;
  fields.policy = false;
  // Decided again inside the store's transaction, on the machine as it is
  // there: bound to the EK, not to the hostname read above (a rename or a
  // delete in between must not move the certificate to another machine).
  const auto merge = [&e = std::as_const(e), &fields, &ek_hash, &der = info->der](size_t, const storage::Machine* stored,
                                                              storage::MachineState state)
      -> Result<storage::MergedEnrollment> {
    if (stored == nullptr || stored->ek_hash != *ek_hash) return MachineUnknown(*ek_hash);
    if (stored->ek_certificate && *stored->ek_certificate != der) {
      return Status::InvalidArgument(
          kEkCertOnRecord, "'" + stored->hostname +
                               "' has another EK certificate on record; to replace it, enroll it with this one: "
                               "`rackgatectl enroll --hostname " + stored->hostname + " --ek-cert FILE`");
    }
    return MergeEnrollment(e, fields, stored, state);
  };
  storage::Actor a = actor;
  a.why = "EK certificate imported" + (request.source.empty() ? std::string() : " from " + SourceText(request.source));
  auto o = inventory_->EnrollMerged(e, merge, a, false, attestation_->Now());
  if (!o.ok()) return o.status();
  const storage::Machine& m = o->machine;
  wire::EkCertImportAnswer out;
  out.outcome = o->outcome == storage::kEnrollUnchanged ? "unchanged" : "stored";
  out.hostname = m.hostname;
  out.ek_hash = hex::Encode(m.ek_hash);
  out.issuer = info->issuer;
  out.anchor = info->anchor_sha256;
  out.relaxations = info->relaxations_used;
  out.summary = m.hostname + ": EK certificate " + (out.outcome == "stored" ? "now on record" : "already on record") +
                " (issuer " + info->issuer + ")";
  for (const auto& r : out.relaxations) out.summary += "; accepted with relaxation " + r;
  Log()->info("{} imported the EK certificate of {} ek={}: {}", a.name, m.hostname, Short(m.ek_hash), out.outcome);
  return out;
}

Result<wire::EkCertMissingList> EkCertService::Missing() {
  wire::EkCertMissingList out;
  out.require_ek_certificate = attestation_->require_ek_certificate();
  auto machines = inventory_->ListMachines();
  if (!machines.ok()) return machines.status();
  std::sort(machines->begin(), machines->end(),
            [](const storage::Machine& a, const storage::Machine& b) { return a.hostname < b.hostname; });
  for (const auto& m : *machines) {
    if (m.ek_certificate) continue;
    wire::EkCertMissingView v;
    v.hostname = m.hostname;
    v.state = std::string(storage::StateName(m.state));
    v.ek_hash = hex::Encode(m.ek_hash);
    if (!m.ek_public.empty()) v.ek_public_base64 = wire::Base64Encode(m.ek_public);
    out.missing.push_back(std::move(v));
  }
  for (const UnknownEk& u : attestation_->unknown_eks().SeenSince(attestation_->Now() - kUnknownEkWindowSeconds)) {
    if (!u.cert_issuer.empty() || !u.cert_subject.empty()) continue;  // it sent one
    wire::EkCertMissingView v;
    v.ek_hash = u.ek_hash;
    if (!u.ek_public.empty()) v.ek_public_base64 = wire::Base64Encode(u.ek_public);
    v.reason = u.reason;
    v.last_seen = u.last_seen;
    v.address = u.address;
    out.missing.push_back(std::move(v));
  }
  return out;
}

}  // namespace rackgate::core
