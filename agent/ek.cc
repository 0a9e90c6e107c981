// EK selection and EK certificates from NV.
#include "agent/ek.h"

#include <cstddef>
#include <set>
#include <utility>

#include "attest/ek_identity.h"
#include "attest/ek_nv.h"

namespace rackgate::agent {

std::optional<EkPreference> ParseEkPreference(std::string_view arg) {
  std::optional<EkPreference> p;
  if (arg == "rsa") {
    p.emplace(EkPreference::kRsa);
  } else if (arg == "ecc") {
    p.emplace(EkPreference::kEcc);
  } else if (auto kind = EkKindFromName(arg)) {
    p.emplace(EkPreference::Only(*kind));
  }
  return p;
}

std::string EkPreferenceArg(const EkPreference& p) {
  if (p.kind) return EkKindName(*p.kind);
  switch (p.family) {
    case EkPreference::kRsa: return "rsa";
    case EkPreference::kEcc: return "ecc";
    case EkPreference::kAny: break;
  }
  return "";
}

std::vector<EkKind> EkKindsFor(const EkPreference& p) {
  if (p.kind) return {*p.kind};
  std::vector<EkKind> kinds;
  for (EkKind kind : kEkKindsByPreference) {
    if (p.family == EkPreference::kRsa && !EkIsRsa(kind)) continue;
    if (p.family == EkPreference::kEcc && EkIsRsa(kind)) continue;
    kinds.push_back(kind);
  }
  return kinds;
}

Result<EkChoice> ChooseEk(NvIndexReader* nv, EkPreference preference) {
  const std::vector<EkKind> order = EkKindsFor(preference);
  // One TPM2_GetCapability over the low and the high range.
  auto present = nv->ListNvIndices(kNvEkCertFirst, kNvEkCertLast);
  if (!present.ok()) return present.status();
  const std::set<uint32_t> have(present->begin(), present->end());

  EkChoice choice;
  choice.kind = order.front();
  for (EkKind kind : order) {
    if (!have.count(EkCertNvIndex(kind))) continue;
    auto data = nv->ReadNv(EkCertNvIndex(kind));
    if (!data.ok()) return data.status();
    // The DER alone, as the appliance takes it: the stored-certificate
    // header and the index's padding are stripped here.
    auto der = attest::EkCertificateDerFromNv(*data);
    if (!der.ok()) continue;  // an index without a certificate in it
    choice.kind = kind;
    choice.certificate = std::move(der).value();
    break;
  }
  if (!choice.certificate) return choice;

  // The chain is a help for the appliance, never required (it verifies the
  // certificate to its own anchors, and any intermediate sent is only a
  // candidate): any failure here leaves the rest out.
  auto chain = nv->ListNvIndices(kNvEkChainFirst, kNvEkChainLast);
  if (chain.ok()) {
    std::vector<Bytes> contents;
    for (uint32_t index : *chain) {
      if (contents.size() >= kMaxChainIndices) break;
      auto data = nv->ReadNv(index);
      // A gap would join the halves of different certificates: stop.
      if (!data.ok()) break;
      contents.push_back(std::move(data).value());
    }
    choice.intermediates = EkChainFromNv(contents, kMaxIntermediates);
  }
  return choice;
}

namespace {

enum class DerStart { kNone, kCutOff, kWhole };

// Where the DER SEQUENCE that `data` starts with ends, from its outer header
// alone: kWhole and its size (header included) when `data` holds all of it,
// kCutOff when `data` ends inside it (the header included), kNone when
// `data` does not start one (padding) or it would be over `limit` bytes.
std::pair<DerStart, size_t> DerSequenceAt(std::span<const uint8_t> data, size_t limit) {
  if (data.empty() || data[0] != 0x30) return {DerStart::kNone, 0};
  if (data.size() < 2) return {DerStart::kCutOff, 0};
  size_t header = 2;
  size_t length = data[1];
  if (length >= 0x80) {
    const size_t n = length & 0x7f;
    // Indefinite lengths are BER, never DER; 3 length bytes reach 16 MiB,
    // far past any certificate.
    if (n == 0 || n > 3) return {DerStart::kNone, 0};
    header += n;
    if (data.size() < header) return {DerStart::kCutOff, 0};
    length = 0;
    for (size_t i = 0; i < n; ++i) length = (length << 8) | data[2 + i];
  }
  if (length > limit || header > limit - length) return {DerStart::kNone, 0};
  if (data.size() - header < length) return {DerStart::kCutOff, header + length};
  return {DerStart::kWhole, header + length};
}

}  // namespace

std::vector<Bytes> EkChainFromNv(const std::vector<Bytes>& indices, size_t max) {
  std::vector<Bytes> out;
  // The first part of a certificate that goes on in the next index; never
  // over kMaxChainCertBytes (DerSequenceAt refuses longer ones).
  Bytes pending;
  for (const Bytes& index : indices) {
    if (out.size() >= max) break;
    Bytes data = std::move(pending);
    pending.clear();
    data.insert(data.end(), index.begin(), index.end());
    std::span<const uint8_t> rest(data);
    while (!rest.empty() && out.size() < max) {
      const auto [state, size] = DerSequenceAt(rest, kMaxChainCertBytes);
      if (state == DerStart::kWhole) {
        out.emplace_back(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(size));
        rest = rest.subspan(size);
        continue;
      }
      if (state == DerStart::kCutOff) pending.assign(rest.begin(), rest.end());
      break;  // kNone: the index's padding; the next index starts afresh
    }
  }
  return out;
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
