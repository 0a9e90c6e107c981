// PKCS#10 requests built with OpenSSL and signed through a DigestSigner.
#include "agent/csr.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <stdexcept>

#include "base/ossl.h"
#include "attest/quote.h"

namespace rackgate::agent {

namespace {


std::string BioToString(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

ossl::BioPtr NewMemBio() {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio) throw std::bad_alloc();
  return bio;
}

Status Invalid(std::string message) { return Status::InvalidArgument("csr_invalid", std::move(message)); }

Bytes Sha256(std::span<const uint8_t> data) {
  Bytes out(32);
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 || n != 32) {
    throw std::runtime_error("EVP_Digest failed");
  }
  return out;
}

// The subjectAltName extension for `s`, or null when it names nothing.
Result<ossl::ExtPtr> SanExtension(const CsrSubject& s) {
  if (s.dns_names.empty() && s.ip_addresses.empty()) return ossl::ExtPtr();
  ossl::GeneralNamesPtr names(GENERAL_NAMES_new());
  if (!names) throw std::bad_alloc();
  for (const auto& dns : s.dns_names) {
    if (dns.empty() || dns.size() > 253 || dns.find_first_of(" \t\r\n,/") != std::string::npos) {
      return Invalid("unusable DNS name for the serving certificate");
    }
    GENERAL_NAME* gn = GENERAL_NAME_new();
    ASN1_IA5STRING* v = ASN1_IA5STRING_new();
    if (gn == nullptr || v == nullptr || ASN1_STRING_set(v, dns.data(), static_cast<int>(dns.size())) != 1) {
      GENERAL_NAME_free(gn);
      ASN1_IA5STRING_free(v);
      throw std::bad_alloc();
    }
    GENERAL_NAME_set0_value(gn, GEN_DNS, v);
    if (sk_GENERAL_NAME_push(names.get(), gn) == 0) {
      GENERAL_NAME_free(gn);
      throw std::bad_alloc();
    }
  }
  for (const auto& ip : s.ip_addresses) {
    unsigned char raw[16];
    int len = 0;
    if (inet_pton(AF_INET, ip.c_str(), raw) == 1) {
      len = 4;
    } else if (inet_pton(AF_INET6, ip.c_str(), raw) == 1) {
      len = 16;
    } else {
      return Invalid("not an IP address: " + ip);
    }
    GENERAL_NAME* gn = GENERAL_NAME_new();
    ASN1_OCTET_STRING* v = ASN1_OCTET_STRING_new();
    if (gn == nullptr || v == nullptr || ASN1_OCTET_STRING_set(v, raw, len) != 1) {
      GENERAL_NAME_free(gn);
      ASN1_OCTET_STRING_free(v);
      throw std::bad_alloc();
    }
    GENERAL_NAME_set0_value(gn, GEN_IPADD, v);
    if (sk_GENERAL_NAME_push(names.get(), gn) == 0) {
      GENERAL_NAME_free(gn);
      throw std::bad_alloc();
    }
  }
  ossl::ExtPtr ext(X509V3_EXT_i2d(NID_subject_alt_name, 0, names.get()));
  if (!ext) throw std::runtime_error("X509V3_EXT_i2d failed");
  return ext;
}

}  // namespace

PkeyPtr GenerateP256Key() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) throw std::runtime_error("EVP_EC_gen(P-256) failed");
  return key;
}

std::string PrivateKeyPem(evp_pkey_st* key) {
  ossl::BioPtr bio = NewMemBio();
  if (PEM_write_bio_PrivateKey_traditional(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    throw std::runtime_error("PEM_write_bio_PrivateKey_traditional failed");
  }
  return BioToString(bio.get());
}

Result<PkeyPtr> PrivateKeyFromPem(std::string_view pem) {
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw std::bad_alloc();
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  ERR_clear_error();
  if (key == nullptr) return Status::InvalidArgument("key_unreadable", "not a PEM private key");
  return PkeyPtr(key);
}

DigestSigner SoftwareSigner(evp_pkey_st* key) {
  return [key](std::span<const uint8_t> digest) -> Result<Bytes> {
    ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new(key, nullptr));
    size_t n = 0;
    if (!ctx || EVP_PKEY_sign_init(ctx.get()) != 1 ||
        EVP_PKEY_CTX_set_signature_md(ctx.get(), EVP_sha256()) != 1 ||
        EVP_PKEY_sign(ctx.get(), nullptr, &n, digest.data(), digest.size()) != 1) {
      throw std::runtime_error("EVP_PKEY_sign setup failed");
    }
    Bytes sig(n);
    if (EVP_PKEY_sign(ctx.get(), sig.data(), &n, digest.data(), digest.size()) != 1) {
      throw std::runtime_error("EVP_PKEY_sign failed");
    }
    sig.resize(n);
    return sig;
  };
}

Result<PkeyPtr> PublicKeyFromTpm2bPublic(std::span<const uint8_t> tpm2b_public) {
  auto pub = attest::ParseTpm2bPublic(tpm2b_public);
  if (!pub.ok()) return pub.status();
  if (pub->type != attest::kAlgEcc || pub->ecc_curve != attest::kEccNistP256 || pub->ecc_x.size() > 32 ||
      pub->ecc_y.size() > 32) {
    return Status::Unsupported("key_type_unsupported", "the TPM key is not an ECC P-256 key");
  }
  // SEC 1 uncompressed point: 04 || X || Y, each left-padded to 32 bytes.
  Bytes point(65, 0);
  point[0] = 0x04;
  std::copy(pub->ecc_x.begin(), pub->ecc_x.end(), point.begin() + 1 + (32 - pub->ecc_x.size()));
  std::copy(pub->ecc_y.begin(), pub->ecc_y.end(), point.begin() + 33 + (32 - pub->ecc_y.size()));
  ossl::ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) != 1 ||
      OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size()) != 1) {
    throw std::bad_alloc();
  }
  ossl::ParamPtr params(OSSL_PARAM_BLD_to_param(bld.get()));
  ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* raw = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("key_invalid", "the TPM key's point is not on P-256");
  }
  return PkeyPtr(raw);
}

Result<Bytes> EcdsaDerFromTpmtSignature(std::span<const uint8_t> tpmt_signature) {
  auto sig = attest::ParseTpmtSignature(tpmt_signature);
  if (!sig.ok()) return sig.status();
  if (sig->sig_alg != attest::kAlgEcdsa || sig->hash_alg != attest::kAlgSha256) {
    return Status::Unsupported("signature_scheme_unsupported", "the TPM did not sign with ECDSA-SHA256");
  }
  ossl::BnPtr r(BN_bin2bn(sig->ecc_r.data(), static_cast<int>(sig->ecc_r.size()), nullptr));
  ossl::BnPtr s(BN_bin2bn(sig->ecc_s.data(), static_cast<int>(sig->ecc_s.size()), nullptr));
  ossl::EcdsaSigPtr ecdsa(ECDSA_SIG_new());
  if (!r || !s || !ecdsa) throw std::bad_alloc();
  if (ECDSA_SIG_set0(ecdsa.get(), r.get(), s.get()) != 1) throw std::runtime_error("ECDSA_SIG_set0 failed");
  (void)r.release();  // owned by ecdsa now
  (void)s.release();
  unsigned char* der = nullptr;
  const int n = i2d_ECDSA_SIG(ecdsa.get(), &der);
  if (n <= 0) throw std::runtime_error("i2d_ECDSA_SIG failed");
  ossl::BufferPtr owned(der);
  return Bytes(der, der + n);
}

Result<std::string> BuildCsrPem(const CsrSubject& subject, evp_pkey_st* public_key, const DigestSigner& sign) {
  if (subject.common_name.empty() || subject.common_name.size() > 64 || subject.organization.empty() ||
      subject.organization.size() > 64) {
    return Invalid("subject O and CN must be 1..64 characters");
  }
  ossl::X509ReqPtr req(X509_REQ_new());
  ossl::X509NamePtr name(X509_NAME_new());
  if (!req || !name) throw std::bad_alloc();
  // O before CN, as kubelet (Go's pkix.Name) orders them. UTF8String.
  auto add = [&name](const char* field, const std::string& value) {
    return X509_NAME_add_entry_by_txt(name.get(), field, MBSTRING_UTF8,
                                      reinterpret_cast<const unsigned char*>(value.data()),
                                      static_cast<int>(value.size()), -1, 0) == 1;
  };
  if (!add("O", subject.organization) || !add("CN", subject.common_name)) {
    ERR_clear_error();
    return Invalid("subject does not encode");
  }
  if (X509_REQ_set_version(req.get(), X509_REQ_VERSION_1) != 1 ||
      X509_REQ_set_subject_name(req.get(), name.get()) != 1 || X509_REQ_set_pubkey(req.get(), public_key) != 1) {
    throw std::runtime_error("X509_REQ setup failed");
  }
  auto san = SanExtension(subject);
  if (!san.ok()) return san.status();
  if (*san) {
    STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
    if (exts == nullptr || sk_X509_EXTENSION_push(exts, san->get()) == 0) {
      sk_X509_EXTENSION_free(exts);
      throw std::bad_alloc();
    }
    const int ok = X509_REQ_add_extensions(req.get(), exts);
    sk_X509_EXTENSION_free(exts);  // the stack only; the extension is still owned by `san`
    if (ok != 1) throw std::runtime_error("X509_REQ_add_extensions failed");
  }

  // The to-be-signed bytes are the DER CertificationRequestInfo;
  // ecdsa-with-SHA256 signs their SHA-256.
  unsigned char* tbs = nullptr;
  const int tbs_len = i2d_re_X509_REQ_tbs(req.get(), &tbs);
  if (tbs_len <= 0) throw std::runtime_error("i2d_re_X509_REQ_tbs failed");
  ossl::BufferPtr tbs_owned(tbs);
  const Bytes digest = Sha256(std::span<const uint8_t>(tbs, static_cast<size_t>(tbs_len)));
  auto sig = sign(digest);
  if (!sig.ok()) return sig.status();

  ossl::X509AlgorPtr alg(X509_ALGOR_new());
  if (!alg || X509_ALGOR_set0(alg.get(), OBJ_nid2obj(NID_ecdsa_with_SHA256), V_ASN1_UNDEF, nullptr) != 1 ||
      X509_REQ_set1_signature_algo(req.get(), alg.get()) != 1) {
    throw std::runtime_error("signature algorithm setup failed");
  }
  ossl::BitStringPtr bits(ASN1_BIT_STRING_new());
  if (!bits || ASN1_BIT_STRING_set(bits.get(), sig->data(), static_cast<int>(sig->size())) != 1) {
    throw std::bad_alloc();
  }
  // A whole number of bytes: no unused bits.
  bits->flags &= ~(ASN1_STRING_FLAG_BITS_LEFT | 0x07);
  bits->flags |= ASN1_STRING_FLAG_BITS_LEFT;
  X509_REQ_set0_signature(req.get(), bits.release());

  // Never hand the appliance a request that does not verify: a TPM or
  // signer fault shows here, with a clear reason, not as a 400 later.
  if (X509_REQ_verify(req.get(), public_key) != 1) {
    ERR_clear_error();
    return Status::VerificationFailed("csr_signature_invalid", "the CSR's signature does not verify");
  }
  ossl::BioPtr bio = NewMemBio();
  if (PEM_write_bio_X509_REQ(bio.get(), req.get()) != 1) throw std::runtime_error("PEM_write_bio_X509_REQ failed");
  return BioToString(bio.get());
}

Result<std::string> NormalizeCertificatesPem(std::string_view pem) {
  ossl::BioPtr in(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!in) throw std::bad_alloc();
  ossl::BioPtr out = NewMemBio();
  int count = 0;
  for (;;) {
    ossl::X509Ptr cert(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    if (++count > 16 || PEM_write_bio_X509(out.get(), cert.get()) != 1) {
      return Status::InvalidArgument("certificate_invalid", "too many certificates");
    }
  }
  // The loop ends at the end of the input (PEM_R_NO_START_LINE) or at a
  // block that does not parse; only the former is fine.
  const unsigned long err = ERR_peek_last_error();
  const bool clean_end = err == 0 || (ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE);
  ERR_clear_error();
  if (count == 0 || !clean_end) return Status::InvalidArgument("certificate_invalid", "no usable PEM certificate");
  return BioToString(out.get());
}

Result<std::string> CheckIssuedCertificate(std::string_view pem, evp_pkey_st* public_key,
                                           std::string_view common_name) {
  auto normalized = NormalizeCertificatesPem(pem);
  if (!normalized.ok()) return normalized.status();
  ossl::BioPtr in(BIO_new_mem_buf(normalized->data(), static_cast<int>(normalized->size())));
  if (!in) throw std::bad_alloc();
  ossl::X509Ptr leaf(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr));
  if (!leaf) return Status::InvalidArgument("certificate_invalid", "no certificate");
  // Writing a certificate for another key would leave kubelet with a pair
  // that cannot work: refuse it here, where the reason is clear.
  EVP_PKEY* cert_key = X509_get0_pubkey(leaf.get());  // BORROWED
  if (cert_key == nullptr || EVP_PKEY_eq(cert_key, public_key) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("certificate_invalid", "the certificate is not for our key");
  }
  char cn[256] = {0};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(leaf.get()), NID_commonName, cn, sizeof(cn));
  if (n < 0 || std::string_view(cn, static_cast<size_t>(n)) != common_name) {
    ERR_clear_error();
    return Status::InvalidArgument("certificate_invalid", "the certificate's CN is not the one requested");
  }
  return normalized;
}

Status CheckOwnCsr(std::string_view request_pem, evp_pkey_st* public_key) {
  if (request_pem.empty() || request_pem.size() > 64 * 1024) {
    return Status::InvalidArgument("kubelet_csr_not_ours", "its request is empty or too large");
  }
  ossl::BioPtr in(BIO_new_mem_buf(request_pem.data(), static_cast<int>(request_pem.size())));
  if (!in) throw std::bad_alloc();
  ossl::X509ReqPtr req(PEM_read_bio_X509_REQ(in.get(), nullptr, nullptr, nullptr));
  if (!req) {
    ERR_clear_error();
    return Status::InvalidArgument("kubelet_csr_not_ours", "its request is not a PEM certificate request");
  }
  // SECURITY: the name is predictable and a bootstrap token may create CSRs:
  // the request must carry our key, and its self-signature proves that the
  // holder of that key (this agent) made it.
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());  // BORROWED
  if (key == nullptr || EVP_PKEY_eq(key, public_key) != 1) {
    ERR_clear_error();
    return Status::VerificationFailed("kubelet_csr_not_ours", "its request carries another public key");
  }
  if (X509_REQ_verify(req.get(), key) != 1) {
    ERR_clear_error();
    return Status::VerificationFailed("kubelet_csr_not_ours", "its request's self-signature does not verify");
  }
  return Status::Ok();
}

}  // namespace rackgate::agent
