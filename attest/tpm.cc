// TPM2B_PUBLIC parsing, object names and PCR selection lists.
#include "attest/tpm.h"

#include <tss2/tss2_mu.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>

#include "attest/digest.h"
#include "base/hex.h"

namespace rackgate::attest {

size_t DigestSize(uint16_t hash_alg) {
  switch (hash_alg) {
    case kAlgSha1: return 20;
    case kAlgSha256: return 32;
    case kAlgSha384: return 48;
    case kAlgSha512: return 64;
    default: return 0;
  }
}

std::string HashAlgName(uint16_t hash_alg) {
  switch (hash_alg) {
    case kAlgSha1: return "sha1";
    case kAlgSha256: return "sha256";
    case kAlgSha384: return "sha384";
    case kAlgSha512: return "sha512";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "0x%04x", hash_alg);
      return buf;
    }
  }
}

uint16_t HashAlgFromName(std::string_view name) {
  if (name == "sha1") return kAlgSha1;
  if (name == "sha256") return kAlgSha256;
  if (name == "sha384") return kAlgSha384;
  if (name == "sha512") return kAlgSha512;
  return kAlgNull;
}

namespace {

Status Malformed(std::string message) {
  return Status::InvalidArgument("tpm2b_public_malformed", std::move(message));
}

Bytes ToBytes(const uint8_t* p, size_t n) { return Bytes(p, p + n); }

}  // namespace

Result<TpmPublic> ParseTpm2bPublic(std::span<const uint8_t> data) {
  // A TPM2B_PUBLIC is at most 2 + sizeof(TPMT_PUBLIC) on the wire; refuse
  // anything larger before handing it to the unmarshaller.
  if (data.size() < 2 || data.size() > 2 + sizeof(TPMT_PUBLIC)) {
    return Malformed("TPM2B_PUBLIC of " + std::to_string(data.size()) + " bytes");
  }
  const size_t declared = (static_cast<size_t>(data[0]) << 8) | data[1];
  if (declared != data.size() - 2) {
    return Malformed("TPM2B_PUBLIC size field " + std::to_string(declared) + " but " +
                     std::to_string(data.size() - 2) + " bytes follow");
  }
  TPM2B_PUBLIC in = {};
  size_t offset = 0;
  TSS2_RC rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(data.data(), data.size(), &offset, &in);
  if (rc != TSS2_RC_SUCCESS) return Malformed("TPMT_PUBLIC does not unmarshal");
  // A structure must be consumed exactly: trailing bytes inside the TPM2B
  // would be covered by the name but ignored by us.
  if (offset != data.size()) return Malformed("trailing bytes after TPMT_PUBLIC");

  const TPMT_PUBLIC& p = in.publicArea;
  TpmPublic out;
  out.type = p.type;
  out.name_alg = p.nameAlg;
  out.attributes = p.objectAttributes;
  out.auth_policy = ToBytes(p.authPolicy.buffer, p.authPolicy.size);
  out.marshalled = Bytes(data.begin() + 2, data.end());
  if (EvpMd(out.name_alg) == nullptr) {
    return Status::Unsupported("key_type_unsupported",
                               "name algorithm " + HashAlgName(out.name_alg) + " is not supported");
  }
  switch (p.type) {
    case TPM2_ALG_RSA: {
      const TPMS_RSA_PARMS& r = p.parameters.rsaDetail;
      out.symmetric_alg = r.symmetric.algorithm;
      if (r.symmetric.algorithm != TPM2_ALG_NULL) {
        out.symmetric_key_bits = r.symmetric.keyBits.sym;
        out.symmetric_mode = r.symmetric.mode.sym;
      }
      out.scheme = r.scheme.scheme;
      if (r.scheme.scheme != TPM2_ALG_NULL) out.scheme_hash = r.scheme.details.anySig.hashAlg;
      out.rsa_key_bits = r.keyBits;
      out.rsa_exponent = r.exponent == 0 ? 65537 : r.exponent;
      out.rsa_modulus = ToBytes(p.unique.rsa.buffer, p.unique.rsa.size);
      if (out.rsa_modulus.size() * 8 != r.keyBits) {
        return Malformed("RSA modulus of " + std::to_string(out.rsa_modulus.size()) +
                         " bytes for keyBits " + std::to_string(r.keyBits));
      }
      break;
    }
    case TPM2_ALG_ECC: {
      const TPMS_ECC_PARMS& e = p.parameters.eccDetail;
      out.symmetric_alg = e.symmetric.algorithm;
      if (e.symmetric.algorithm != TPM2_ALG_NULL) {
        out.symmetric_key_bits = e.symmetric.keyBits.sym;
        out.symmetric_mode = e.symmetric.mode.sym;
      }
      out.scheme = e.scheme.scheme;
      if (e.scheme.scheme != TPM2_ALG_NULL) out.scheme_hash = e.scheme.details.anySig.hashAlg;
      out.ecc_curve = e.curveID;
      out.ecc_x = ToBytes(p.unique.ecc.x.buffer, p.unique.ecc.x.size);
      out.ecc_y = ToBytes(p.unique.ecc.y.buffer, p.unique.ecc.y.size);
      break;
    }
    default:
      return Status::Unsupported("key_type_unsupported",
                                 "object type " + HashAlgName(p.type) + " is not RSA or ECC");
  }
  return out;
}

Bytes ObjectName(const TpmPublic& pub) {
  Bytes name = {static_cast<uint8_t>(pub.name_alg >> 8), static_cast<uint8_t>(pub.name_alg)};
  Bytes h = Hash(pub.name_alg, {pub.marshalled});
  name.insert(name.end(), h.begin(), h.end());
  return name;
}

Result<std::vector<PcrSelection>> ParsePcrSelectionList(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("pcr_list_malformed",
                                   "PCR list '" + std::string(text) + "': " + why);
  };
  std::vector<PcrSelection> out;
  std::set<uint16_t> banks;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('+', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view part = text.substr(pos, end - pos);
    size_t colon = part.find(':');
    if (colon == std::string_view::npos) return bad("expected BANK:N,N,...");
    PcrSelection sel;
    sel.hash_alg = HashAlgFromName(part.substr(0, colon));
    if (sel.hash_alg == kAlgNull) return bad("unknown bank '" + std::string(part.substr(0, colon)) + "'");
    if (!banks.insert(sel.hash_alg).second) return bad("bank listed twice");
    std::string_view nums = part.substr(colon + 1);
    size_t npos = 0;
    while (npos <= nums.size()) {
      size_t comma = nums.find(',', npos);
      if (comma == std::string_view::npos) comma = nums.size();
      std::string_view num = nums.substr(npos, comma - npos);
      uint32_t v = 0;
      auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
      if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || v > 23) {
        return bad("bad PCR index '" + std::string(num) + "'");
      }
      sel.pcrs.push_back(v);
      npos = comma + 1;
    }
    std::sort(sel.pcrs.begin(), sel.pcrs.end());
    sel.pcrs.erase(std::unique(sel.pcrs.begin(), sel.pcrs.end()), sel.pcrs.end());
    out.push_back(std::move(sel));
    pos = end + 1;
  }
  return out;
}

std::string FormatPcrSelectionList(const std::vector<PcrSelection>& sel) {
  std::string out;
  for (const auto& s : sel) {
    if (!out.empty()) out += '+';
    out += HashAlgName(s.hash_alg) + ':';
    for (size_t i = 0; i < s.pcrs.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(s.pcrs[i]);
    }
  }
  return out;
}

}  // namespace rackgate::attest
