// EK selection and EK certificates from NV.
#include "agent/ek.h"

#include <set>

#include "attest/ek_identity.h"
#include "attest/ek_nv.h"

namespace rackgate::agent {

Result<EkChoice> ChooseEk(Tpm* tpm, EkPreference preference) {
  std::vector<EkKind> order;
  if (preference != EkPreference::kEcc) order.push_back(EkKind::kRsa2048);
  if (preference != EkPreference::kRsa) {
    order.push_back(EkKind::kEccP256);
    order.push_back(EkKind::kEccP384);
  }
  auto present = tpm->ListNvIndices(kNvEkCertRsa2048, kNvEkCertEccP384);
  if (!present.ok()) return present.status();
  const std::set<uint32_t> have(present->begin(), present->end());

  EkChoice choice;
  choice.kind = order.front();
  for (EkKind kind : order) {
    if (!have.count(EkCertNvIndex(kind))) continue;
    auto nv = tpm->ReadNv(EkCertNvIndex(kind));
    if (!nv.ok()) return nv.status();
    // The DER alone, as the appliance takes it: the stored-certificate
    // header and the index's padding are stripped here.
    auto der = attest::EkCertificateDerFromNv(*nv);
    if (!der.ok()) continue;  // an index without a certificate in it
    choice.kind = kind;
    choice.certificate = std::move(der).value();
    break;
  }
  if (!choice.certificate) return choice;

  // The chain is a help for the appliance, never required: any failure
  // here leaves it out.
  auto chain = tpm->ListNvIndices(kNvEkChainFirst, kNvEkChainLast);
  if (chain.ok()) {
    for (uint32_t index : *chain) {
      if (choice.intermediates.size() >= kMaxIntermediates) break;
      auto nv = tpm->ReadNv(index);
      if (!nv.ok()) continue;
      for (auto& c : attest::SplitDerCertificates(*nv, kMaxIntermediates - choice.intermediates.size())) {
        choice.intermediates.push_back(std::move(c));
      }
    }
  }
  return choice;
}

Status CheckEkMatchesCertificate(std::span<const uint8_t> ek_tpm2b_public, std::span<const uint8_t> cert_der) {
  auto pub = attest::ParseTpm2bPublic(ek_tpm2b_public);
  if (!pub.ok()) return Status::TpmError("tpm_bad_answer", "the TPM's EK public area does not parse");
  auto from_tpm = attest::EkKeyHash(*pub);
  auto from_cert = attest::EkKeyHashFromCertificate(cert_der);
  if (!from_tpm.ok()) return Status::TpmError("tpm_bad_answer", from_tpm.status().message());
  if (!from_cert.ok()) {
    return Status::TpmError("ek_cert_malformed", "the EK certificate in NV: " + from_cert.status().message());
  }
  if (*from_tpm != *from_cert) {
    return Status::TpmError("ek_template_mismatch",
                            "the EK made from the TCG template is not the key in the EK certificate");
  }
  return Status::Ok();
}

}  // namespace rackgate::agent
