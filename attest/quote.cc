// AK policy, TPMS_ATTEST/TPMT_SIGNATURE parsing, quote and certify verification.
#include "attest/quote.h"

#include <openssl/crypto.h>
#include <openssl/rsa.h>
#include <tss2/tss2_mu.h>

#include <algorithm>
#include <stdexcept>

#include "attest/digest.h"
#include "attest/keys.h"

namespace rackgate::attest {

Status CheckAkPolicy(const TpmPublic& ak) {
  auto fail = [](const char* reason, const char* msg) {  // reason-helper: VerificationFailed
    return Status::VerificationFailed(reason, msg);
  };
  const uint32_t a = ak.attributes;
  // A restricted signing key only signs digests the TPM computed itself or
  // data that does not start with TPM_GENERATED, so it cannot be made to sign
  // a forged TPMS_ATTEST. An unrestricted key could sign anything.
  if (!(a & kAttrSign) || !(a & kAttrRestricted)) {
    return fail("ak_not_restricted_signing", "AK is not a restricted signing key");
  }
  if (a & kAttrDecrypt) return fail("ak_decrypt_key", "AK is also a decryption key");
  // fixedTPM/fixedParent: the key cannot be duplicated to another TPM, so a
  // signature proves the TPM that holds the EK made it (with ActivateCredential).
  if (!(a & kAttrFixedTpm)) return fail("ak_not_fixed_tpm", "AK is not fixedTPM");
  if (!(a & kAttrFixedParent)) return fail("ak_not_fixed_parent", "AK is not fixedParent");
  // sensitiveDataOrigin: the TPM generated the private key; nobody imported it.
  if (!(a & kAttrSensitiveDataOrigin)) {
    return fail("ak_not_sensitive_data_origin", "AK was not generated inside the TPM");
  }
  if (ak.type == kAlgRsa) {
    if (ak.rsa_key_bits < 2048) return fail("ak_key_too_weak", "AK is RSA below 2048 bits");
  } else if (ak.type == kAlgEcc) {
    if (ak.ecc_curve != kEccNistP256 && ak.ecc_curve != kEccNistP384) {
      return fail("ak_curve_unsupported", "AK curve is not P-256 or P-384");
    }
  } else {
    return fail("ak_key_too_weak", "AK is neither RSA nor ECC");
  }
  if (ak.name_alg != kAlgSha256 && ak.name_alg != kAlgSha384 && ak.name_alg != kAlgSha512) {
    return fail("ak_name_alg_weak", "AK name algorithm is weaker than sha256");
  }
  return Status::Ok();
}

namespace {

Bytes ToBytes(const uint8_t* p, size_t n) { return Bytes(p, p + n); }

std::vector<PcrSelection> FromTpml(const TPML_PCR_SELECTION& tpml) {
  std::vector<PcrSelection> out;
  for (uint32_t i = 0; i < tpml.count; ++i) {
    const TPMS_PCR_SELECTION& s = tpml.pcrSelections[i];
    PcrSelection sel;
    sel.hash_alg = s.hash;
    for (uint32_t byte = 0; byte < s.sizeofSelect; ++byte) {
      for (uint32_t bit = 0; bit < 8; ++bit) {
        if (s.pcrSelect[byte] & (1u << bit)) sel.pcrs.push_back(byte * 8 + bit);
      }
    }
    out.push_back(std::move(sel));
  }
  return out;
}

ClockInfo FromTpms(const TPMS_CLOCK_INFO& c) {
  return ClockInfo{c.clock, c.resetCount, c.restartCount, c.safe == TPM2_YES};
}

bool ConstantTimeEqual(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  // The length of a nonce is public; only its contents need constant time.
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

Result<TpmsAttest> ParseTpmsAttest(std::span<const uint8_t> data) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("attest_malformed", "TPMS_ATTEST " + why);
  };
  if (data.empty() || data.size() > sizeof(TPMS_ATTEST)) {
    return bad("of " + std::to_string(data.size()) + " bytes");
  }
  TPMS_ATTEST in = {};
  size_t offset = 0;
  if (Tss2_MU_TPMS_ATTEST_Unmarshal(data.data(), data.size(), &offset, &in) != TSS2_RC_SUCCESS) {
    return bad("does not unmarshal");
  }
  if (offset != data.size()) return bad("has trailing bytes");
  TpmsAttest out;
  out.magic = in.magic;
  out.type = in.type;
  out.qualified_signer = ToBytes(in.qualifiedSigner.name, in.qualifiedSigner.size);
  out.extra_data = ToBytes(in.extraData.buffer, in.extraData.size);
  out.clock = FromTpms(in.clockInfo);
  out.firmware_version = in.firmwareVersion;
  if (in.type == TPM2_ST_ATTEST_QUOTE) {
    const TPML_PCR_SELECTION& sel = in.attested.quote.pcrSelect;
    for (uint32_t i = 0; i < sel.count; ++i) {
      if (DigestSize(sel.pcrSelections[i].hash) == 0) return bad("selects an unknown PCR bank");
      for (uint32_t j = 0; j < i; ++j) {
        if (sel.pcrSelections[j].hash == sel.pcrSelections[i].hash) {
          return bad("selects a PCR bank twice");
        }
      }
    }
    out.pcr_select = FromTpml(sel);
    out.pcr_digest = ToBytes(in.attested.quote.pcrDigest.buffer, in.attested.quote.pcrDigest.size);
  } else if (in.type == TPM2_ST_ATTEST_CERTIFY) {
    out.certified_name = ToBytes(in.attested.certify.name.name, in.attested.certify.name.size);
    out.certified_qualified_name =
        ToBytes(in.attested.certify.qualifiedName.name, in.attested.certify.qualifiedName.size);
  }
  return out;
}

Result<TpmtSignature> ParseTpmtSignature(std::span<const uint8_t> data) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("signature_malformed", "TPMT_SIGNATURE " + why);
  };
  if (data.size() < 4 || data.size() > sizeof(TPMT_SIGNATURE)) {
    return bad("of " + std::to_string(data.size()) + " bytes");
  }
  // Refuse schemes we do not verify before the unmarshaller sees the union.
  const uint16_t alg = static_cast<uint16_t>((data[0] << 8) | data[1]);
  if (alg != kAlgRsaSsa && alg != kAlgRsaPss && alg != kAlgEcdsa) {
    return Status::Unsupported("signature_scheme_unsupported",
                               "signature scheme " + HashAlgName(alg) + " is not RSASSA, RSAPSS or ECDSA");
  }
  TPMT_SIGNATURE in = {};
  size_t offset = 0;
  if (Tss2_MU_TPMT_SIGNATURE_Unmarshal(data.data(), data.size(), &offset, &in) != TSS2_RC_SUCCESS) {
    return bad("does not unmarshal");
  }
  if (offset != data.size()) return bad("has trailing bytes");
  TpmtSignature out;
  out.sig_alg = in.sigAlg;
  if (alg == kAlgEcdsa) {
    out.hash_alg = in.signature.ecdsa.hash;
    out.ecc_r = ToBytes(in.signature.ecdsa.signatureR.buffer, in.signature.ecdsa.signatureR.size);
    out.ecc_s = ToBytes(in.signature.ecdsa.signatureS.buffer, in.signature.ecdsa.signatureS.size);
    if (out.ecc_r.empty() || out.ecc_s.empty()) return bad("has an empty ECDSA component");
  } else {
    out.hash_alg = in.signature.rsassa.hash;
    out.rsa_sig = ToBytes(in.signature.rsassa.sig.buffer, in.signature.rsassa.sig.size);
    if (out.rsa_sig.empty()) return bad("has an empty RSA signature");
  }
  return out;
}

Result<Bytes> ComputePcrDigest(uint16_t hash_alg, const std::vector<PcrSelection>& selection,
                               const PcrValues& pcrs) {
  const EVP_MD* md = EvpMd(hash_alg);
  if (md == nullptr) {
    return Status::Unsupported("hash_unsupported", "hash " + HashAlgName(hash_alg));
  }
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex2(ctx.get(), md, nullptr) != 1) throw std::bad_alloc();
  for (const PcrSelection& sel : selection) {
    auto bank = pcrs.find(sel.hash_alg);
    for (uint32_t pcr : sel.pcrs) {
      const Bytes* v = nullptr;
      if (bank != pcrs.end()) {
        auto it = bank->second.find(pcr);
        if (it != bank->second.end()) v = &it->second;
      }
      if (v == nullptr) {
        return Status::InvalidArgument("pcr_values_incomplete",
                                       "no value for PCR " + HashAlgName(sel.hash_alg) + ":" +
                                           std::to_string(pcr));
      }
      if (v->size() != DigestSize(sel.hash_alg)) {
        return Status::InvalidArgument("pcr_values_incomplete",
                                       "value of PCR " + HashAlgName(sel.hash_alg) + ":" +
                                           std::to_string(pcr) + " has the wrong size");
      }
      EVP_DigestUpdate(ctx.get(), v->data(), v->size());
    }
  }
  Bytes out(EVP_MD_get_size(md));
  if (EVP_DigestFinal_ex(ctx.get(), out.data(), nullptr) != 1) throw std::runtime_error("digest");
  return out;
}

struct VerifyKey::Impl {
  TpmPublic pub;
  ossl::PkeyPtr pkey;
};

VerifyKey::VerifyKey(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerifyKey::VerifyKey(VerifyKey&&) noexcept = default;
VerifyKey& VerifyKey::operator=(VerifyKey&&) noexcept = default;
VerifyKey::~VerifyKey() = default;

const TpmPublic& VerifyKey::pub() const { return impl_->pub; }

Result<VerifyKey> VerifyKey::FromTpmPublic(const TpmPublic& pub) {
  auto pkey = PkeyFromTpmPublic(pub);
  if (!pkey.ok()) return pkey.status();
  auto impl = std::make_unique<Impl>();
  impl->pub = pub;
  impl->pkey = std::move(pkey).value();
  return VerifyKey(std::move(impl));
}

Status VerifyKey::Verify(std::span<const uint8_t> message, const TpmtSignature& sig) const {
  const TpmPublic& pub = impl_->pub;
  const bool rsa_ok = pub.type == kAlgRsa && (sig.sig_alg == kAlgRsaSsa || sig.sig_alg == kAlgRsaPss);
  const bool ecc_ok = pub.type == kAlgEcc && sig.sig_alg == kAlgEcdsa;
  if (!rsa_ok && !ecc_ok) {
    return Status::VerificationFailed("signature_scheme_mismatch",
                                      "signature scheme does not suit the key type");
  }
  // A key created with a fixed scheme signs only with it; a signature in any
  // other scheme was not made by the TPM with this key.
  if (pub.scheme != kAlgNull && (sig.sig_alg != pub.scheme || sig.hash_alg != pub.scheme_hash)) {
    return Status::VerificationFailed("signature_scheme_mismatch",
                                      "signature scheme or hash differs from the key's scheme");
  }
  if (sig.hash_alg != kAlgSha256 && sig.hash_alg != kAlgSha384 && sig.hash_alg != kAlgSha512) {
    return Status::Unsupported("signature_scheme_unsupported",
                               "signature hash " + HashAlgName(sig.hash_alg) + " is weaker than sha256");
  }
  const EVP_MD* md = EvpMd(sig.hash_alg);
  Bytes digest = Hash(sig.hash_alg, {message});

  ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, impl_->pkey.get(), nullptr));
  if (!ctx || EVP_PKEY_verify_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_signature_md(ctx.get(), md) != 1) {
    throw std::runtime_error("EVP_PKEY_verify_init failed: " + ossl::DrainErrors());
  }
  Bytes der;
  std::span<const uint8_t> sig_bytes;
  if (pub.type == kAlgRsa) {
    if (sig.rsa_sig.size() != pub.rsa_modulus.size()) {
      return Status::VerificationFailed("signature_invalid", "RSA signature has the wrong length");
    }
    const bool pss = sig.sig_alg == kAlgRsaPss;
    if (EVP_PKEY_CTX_set_rsa_padding(ctx.get(), pss ? RSA_PKCS1_PSS_PADDING : RSA_PKCS1_PADDING) != 1 ||
        (pss && EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx.get(), RSA_PSS_SALTLEN_DIGEST) != 1)) {
      throw std::runtime_error("setting RSA padding failed: " + ossl::DrainErrors());
    }
    sig_bytes = sig.rsa_sig;
  } else {
    ossl::EcdsaSigPtr es(ECDSA_SIG_new());
    BIGNUM* r = BN_bin2bn(sig.ecc_r.data(), static_cast<int>(sig.ecc_r.size()), nullptr);
    BIGNUM* s = BN_bin2bn(sig.ecc_s.data(), static_cast<int>(sig.ecc_s.size()), nullptr);
    if (!es || !r || !s || ECDSA_SIG_set0(es.get(), r, s) != 1) {
      BN_free(r);
      BN_free(s);
      throw std::runtime_error("building ECDSA_SIG failed");
    }
    unsigned char* p = nullptr;
    int n = i2d_ECDSA_SIG(es.get(), &p);
    if (n <= 0) throw std::runtime_error("i2d_ECDSA_SIG failed");
    der.assign(p, p + n);
    OPENSSL_free(p);
    sig_bytes = der;
  }
  int rc = EVP_PKEY_verify(ctx.get(), sig_bytes.data(), sig_bytes.size(), digest.data(), digest.size());
  if (rc != 1) {
    ossl::DrainErrors();
    return Status::VerificationFailed("signature_invalid", "signature does not verify with the AK");
  }
  return Status::Ok();
}

namespace {

// Parse, then check the signature before trusting any field of the structure.
Result<TpmsAttest> ParseAndVerify(const VerifyKey& ak, std::span<const uint8_t> message,
                                  std::span<const uint8_t> signature, uint16_t* sig_hash) {
  auto attest = ParseTpmsAttest(message);
  if (!attest.ok()) return attest.status();
  auto sig = ParseTpmtSignature(signature);
  if (!sig.ok()) return sig.status();
  Status s = ak.Verify(message, *sig);
  if (!s.ok()) return s;
  // TPM_GENERATED proves the TPM built the structure: a restricted key
  // refuses to sign external data that starts with this value.
  if (attest->magic != kTpmGenerated) {
    return Status::VerificationFailed("quote_magic_invalid", "attestation is not TPM_GENERATED");
  }
  *sig_hash = sig->hash_alg;
  return attest;
}

}  // namespace

Result<VerifiedQuote> VerifyQuote(const VerifyKey& ak, std::span<const uint8_t> message,
                                  std::span<const uint8_t> signature, const PcrValues& pcrs,
                                  std::span<const uint8_t> nonce,
                                  const std::vector<PcrSelection>& required) {
  uint16_t hash_alg = kAlgNull;
  auto attest = ParseAndVerify(ak, message, signature, &hash_alg);
  if (!attest.ok()) return attest.status();
  if (attest->type != kStAttestQuote) {
    return Status::VerificationFailed("quote_type_invalid", "attestation is not a quote");
  }
  // The nonce makes the quote fresh: without it an old quote of a good boot
  // could be replayed by a machine that no longer boots well.
  if (!ConstantTimeEqual(attest->extra_data, nonce)) {
    return Status::VerificationFailed("quote_nonce_mismatch", "quote is not over this session's nonce");
  }
  // A quote over fewer PCRs than the policy needs says nothing about the rest.
  for (const PcrSelection& req : required) {
    const PcrSelection* have = nullptr;
    for (const PcrSelection& s : attest->pcr_select) {
      if (s.hash_alg == req.hash_alg) have = &s;
    }
    for (uint32_t pcr : req.pcrs) {
      bool found = have != nullptr &&
                   std::find(have->pcrs.begin(), have->pcrs.end(), pcr) != have->pcrs.end();
      if (!found) {
        return Status::VerificationFailed("quote_pcr_not_selected",
                                          "required PCR " + HashAlgName(req.hash_alg) + ":" +
                                              std::to_string(pcr) + " is not in the quote");
      }
    }
  }
  auto digest = ComputePcrDigest(hash_alg, attest->pcr_select, pcrs);
  if (!digest.ok()) return digest.status();
  if (!ConstantTimeEqual(*digest, attest->pcr_digest)) {
    return Status::VerificationFailed("quote_pcr_digest_mismatch",
                                      "PCR values do not match the quoted digest");
  }
  VerifiedQuote out;
  out.clock = attest->clock;
  out.firmware_version = attest->firmware_version;
  out.selection = attest->pcr_select;
  out.hash_alg = hash_alg;
  for (const PcrSelection& s : out.selection) {
    for (uint32_t pcr : s.pcrs) out.pcrs[s.hash_alg][pcr] = pcrs.at(s.hash_alg).at(pcr);
  }
  return out;
}

Result<VerifiedCertify> VerifyCertify(const VerifyKey& ak, std::span<const uint8_t> message,
                                      std::span<const uint8_t> signature,
                                      const TpmPublic& certified, std::span<const uint8_t> nonce) {
  uint16_t hash_alg = kAlgNull;
  auto attest = ParseAndVerify(ak, message, signature, &hash_alg);
  if (!attest.ok()) return attest.status();
  if (attest->type != kStAttestCertify) {
    return Status::VerificationFailed("certify_type_invalid", "attestation is not a certify");
  }
  if (!ConstantTimeEqual(attest->extra_data, nonce)) {
    return Status::VerificationFailed("certify_nonce_mismatch",
                                      "certify is not over this session's nonce");
  }
  // The name binds the whole public area (key, attributes, policy): a match
  // proves the TPM holding the AK holds exactly this key.
  if (attest->certified_name != ObjectName(certified)) {
    return Status::VerificationFailed("certify_name_mismatch",
                                      "certified name is not the name of the given key");
  }
  return VerifiedCertify{attest->clock, attest->certified_name};
}

}  // namespace rackgate::attest
