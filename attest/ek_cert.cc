// EK certificate validation with OpenSSL: parsing of untrusted certificate
// bytes, path validation to the manufacturer roots, the TCG EK profile checks
// and the EK public-area match. The contract is in ek_cert.h.
#include "attest/ek_cert.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

#include "base/hex.h"
#include "base/ossl.h"
#include "base/text.h"
#include "attest/ek_nv.h"
#include "attest/keys.h"

namespace rackgate::attest {
namespace {

// Owning handles for the OpenSSL types only this file uses (same pattern as
// ossl.h: one alias per type, stateless deleter).
void FreeOpensslChars(char* p) { OPENSSL_free(p); }
void FreeOpensslBytes(unsigned char* p) { OPENSSL_free(p); }
using OpensslCharsPtr = std::unique_ptr<char, ossl::Deleter<char, FreeOpensslChars>>;
using OpensslBytesPtr =
    std::unique_ptr<unsigned char, ossl::Deleter<unsigned char, FreeOpensslBytes>>;
using Asn1ObjectPtr = std::unique_ptr<ASN1_OBJECT, ossl::Deleter<ASN1_OBJECT, ASN1_OBJECT_free>>;
using GeneralNamesPtr =
    std::unique_ptr<GENERAL_NAMES, ossl::Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;
using ExtKeyUsagePtr =
    std::unique_ptr<EXTENDED_KEY_USAGE, ossl::Deleter<EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free>>;
using CertPoliciesPtr =
    std::unique_ptr<CERTIFICATEPOLICIES,
                    ossl::Deleter<CERTIFICATEPOLICIES, CERTIFICATEPOLICIES_free>>;

// A STACK_OF(X509) that BORROWS its certificates: frees the stack only.
struct X509StackShallowFree {
  void operator()(STACK_OF(X509)* s) const { sk_X509_free(s); }
};
using X509ShallowStackPtr = std::unique_ptr<STACK_OF(X509), X509StackShallowFree>;

// At most three intermediates between the EK certificate and the root
// (OpenSSL's depth counts neither end). Real EK chains have one or two; the
// bound limits the work presented intermediates can cause.
constexpr int kMaxChainDepth = 3;
// Display strings from certificates (attacker-chosen, and they end up in logs
// and terminals) go through text::PrintableAscii, cut at this length.
constexpr size_t kMaxDisplayChars = 256;
// The EK keys this module handles, for messages.
constexpr char kSupportedEkKeys[] = "RSA-2048/3072 or ECC P-256/P-384/P-521";

// Critical extensions that OpenSSL does not implement but the TCG EK
// Credential Profile defines for an EK certificate. None of them restricts how
// the key may be used: they carry TPM facts (subjectDirectoryAttributes:
// tpmSpecification, security assertions), a key identifier, or where the
// issuer's certificate lives. So accepting them when marked critical does not
// silently drop a constraint the issuer meant us to enforce.
constexpr std::array<std::string_view, 3> kTcgLeafCriticalExtensions = {
    "2.5.29.9",           // subjectDirectoryAttributes
    "2.5.29.35",          // authorityKeyIdentifier
    "1.3.6.1.5.5.7.1.1",  // authorityInfoAccess
};

Status Malformed(std::string message) {
  return Status::InvalidArgument(kEkCertMalformed, std::move(message));
}
Status StoreInvalid(std::string message) {
  return Status::InvalidArgument(kEkTrustStoreInvalid, std::move(message));
}

// Dotted OID text; empty for an OID too long to be one this module knows.
std::string OidText(const ASN1_OBJECT* obj) {
  char buf[128];
  const int n = OBJ_obj2txt(buf, sizeof(buf), obj, /*no_name=*/1);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf)) return {};
  return std::string(buf, static_cast<size_t>(n));
}

std::string Asn1StringForDisplay(const ASN1_STRING* s) {
  if (s == nullptr) return {};
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, s);
  if (n < 0) {
    ERR_clear_error();
    return text::PrintableAscii(
        std::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                         static_cast<size_t>(ASN1_STRING_length(s))), kMaxDisplayChars);
  }
  OpensslBytesPtr owned(utf8);
  return text::PrintableAscii(
      std::string_view(reinterpret_cast<const char*>(utf8), static_cast<size_t>(n)), kMaxDisplayChars);
}

std::string NameForDisplay(const X509_NAME* name) {
  if (name == nullptr) return {};
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio) throw std::bad_alloc();
  // RFC 2253 form escapes control characters and non-ASCII bytes itself.
  if (X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) {
    ERR_clear_error();
    return "(unprintable name)";
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  if (len <= 0 || data == nullptr) return {};
  return text::PrintableAscii(std::string_view(data, static_cast<size_t>(len)), kMaxDisplayChars);
}

std::string SerialHex(const X509* x) {
  ossl::BnPtr bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr));
  if (!bn) {
    ERR_clear_error();
    return "?";
  }
  OpensslCharsPtr hex(BN_bn2hex(bn.get()));
  if (!hex) throw std::bad_alloc();
  return text::PrintableAscii(hex.get(), kMaxDisplayChars);
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

std::optional<int64_t> Asn1TimeToUnix(const ASN1_TIME* t) {
  struct tm tm = {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) {
    ERR_clear_error();
    return std::nullopt;
  }
  const int64_t days =
      DaysFromCivil(int64_t{tm.tm_year} + 1900, int64_t{tm.tm_mon} + 1, tm.tm_mday);
  return days * 86400 + int64_t{tm.tm_hour} * 3600 + int64_t{tm.tm_min} * 60 + tm.tm_sec;
}

bool IsAsciiSpace(uint8_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

// PEM when the first non-blank bytes open a PEM block. A DER certificate
// starts with 0x30, which is not a blank or '-', so the two never collide.
bool LooksLikePem(std::span<const uint8_t> in) {
  static constexpr std::string_view kBegin = "-----BEGIN ";
  size_t i = 0;
  while (i < in.size() && IsAsciiSpace(in[i])) ++i;
  if (in.size() - i < kBegin.size()) return false;
  return std::memcmp(in.data() + i, kBegin.data(), kBegin.size()) == 0;
}

// A certificate and the DER it was decoded from.
struct ParsedDer {
  ossl::X509Ptr x509;
  Bytes der;
  // Set only when `der` had a padded serial and `x509` was decoded from
  // CertificateWithMinimalSerial(der): the TBSCertificate as received, the
  // bytes its issuer signed (the decoded one differs in the serial's zeros).
  Bytes signed_tbs;
};

// A certificate whose serial carries zeros its value does not need (Nuvoton,
// STMicro). SECURITY: it is decoded from a copy with only those zeros
// removed, which has the same meaning, and `signed_tbs` keeps the TBS as
// received: the signature is checked over that (VerifyCallback), never over
// the copy, whose own signature check fails.
Result<ParsedDer> ParseWithPaddedSerial(std::span<const uint8_t> der) {
  static constexpr char kWhy[] =
      "not a DER X.509 certificate: an INTEGER has a leading byte its value does not need";
  std::optional<Bytes> minimal = CertificateWithMinimalSerial(der);
  std::optional<Bytes> tbs = TbsCertificateOf(der);
  if (!minimal || !tbs) return Malformed(kWhy);
  const unsigned char* p = minimal->data();
  ossl::X509Ptr x(d2i_X509(nullptr, &p, static_cast<long>(minimal->size())));
  if (!x || p != minimal->data() + minimal->size()) {
    ERR_clear_error();
    return Malformed(kWhy);
  }
  return ParsedDer{std::move(x), Bytes(der.begin(), der.end()), std::move(*tbs)};
}

// Exactly one DER certificate, nothing after it.
Result<ParsedDer> ParseDerCertificate(std::span<const uint8_t> der) {
  if (der.empty()) return Malformed("empty certificate");
  const unsigned char* p = der.data();
  ossl::X509Ptr x(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (!x) {
    // OpenSSL refuses an INTEGER with a leading byte its value does not need
    // (vendors' serial numbers); say so, since it is a known vendor quirk.
    bool padding = false;
    for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
      if (ERR_GET_LIB(e) == ERR_LIB_ASN1 && ERR_GET_REASON(e) == ASN1_R_ILLEGAL_PADDING) {
        padding = true;
      }
    }
    if (padding) return ParseWithPaddedSerial(der);
    return Malformed("not a DER X.509 certificate");
  }
  // SECURITY: trailing bytes are refused rather than ignored, so that two
  // different byte strings are never the same accepted certificate and a
  // parser elsewhere cannot be fed something this one skipped.
  if (p != der.data() + der.size()) return Malformed("trailing bytes after the DER certificate");
  return ParsedDer{std::move(x), Bytes(der.begin(), der.end())};
}

// One PEM block read from `bio`: its label and decoded bytes.
struct PemBlock {
  std::string label;
  Bytes data;
};

// Reads the next PEM block. nullopt with *at_end set when no block is left.
std::optional<PemBlock> ReadPemBlock(BIO* bio, bool* at_end) {
  *at_end = false;
  char* name = nullptr;
  char* header = nullptr;
  unsigned char* data = nullptr;
  long len = 0;
  if (PEM_read_bio(bio, &name, &header, &data, &len) != 1) {
    const unsigned long err = ERR_peek_last_error();
    *at_end = ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
    ERR_clear_error();
    return std::nullopt;
  }
  OpensslCharsPtr name_owner(name);
  OpensslCharsPtr header_owner(header);
  OpensslBytesPtr data_owner(data);
  // Encrypted or annotated PEM (RFC 1421 headers) is not a certificate form.
  if (header != nullptr && header[0] != '\0') return PemBlock{"(with headers)", {}};
  return PemBlock{name, Bytes(data, data + len)};
}

// One certificate as DER, or PEM holding exactly one CERTIFICATE block and
// nothing but blanks around it.
Result<ParsedDer> ParseOneCertificate(std::span<const uint8_t> in) {
  if (in.empty()) return Malformed("empty certificate");
  // SECURITY: the size limit comes before any parsing of untrusted bytes.
  if (in.size() > kMaxEkCertBytes) {
    return Malformed("certificate of " + std::to_string(in.size()) +
                     " bytes exceeds the limit of " + std::to_string(kMaxEkCertBytes));
  }
  if (!LooksLikePem(in)) {
    // As read from NV: the DER, perhaps behind the stored-certificate header
    // or followed by the index's padding (attest/ek_nv.h).
    Result<Bytes> der = EkCertificateDerFromNv(in);
    if (!der.ok()) return der.status();
    return ParseDerCertificate(*der);
  }

  ossl::BioPtr bio(BIO_new_mem_buf(in.data(), static_cast<int>(in.size())));
  if (!bio) throw std::bad_alloc();
  bool at_end = false;
  std::optional<PemBlock> block = ReadPemBlock(bio.get(), &at_end);
  if (!block) return Malformed("unreadable PEM");
  if (block->label != "CERTIFICATE") return Malformed("PEM block is not a CERTIFICATE");
  char* rest = nullptr;
  const long rest_len = BIO_get_mem_data(bio.get(), &rest);
  for (long i = 0; i < rest_len; ++i) {
    if (!IsAsciiSpace(static_cast<uint8_t>(rest[i]))) {
      return Malformed("trailing data after the PEM certificate");
    }
  }
  return ParseDerCertificate(block->data);
}

// Every certificate of a trust-store input: one DER certificate, or PEM with
// one or more CERTIFICATE blocks (text between blocks is allowed, as in the
// bundles vendors publish; any other block is refused).
Result<std::vector<ossl::X509Ptr>> ParseCertificateBundle(std::span<const uint8_t> in) {
  std::vector<ossl::X509Ptr> out;
  if (in.empty()) return StoreInvalid("empty input");
  if (in.size() > kMaxTrustStoreFileBytes) return StoreInvalid("input exceeds the size limit");
  // SECURITY: a CA certificate with a padded serial would need its signature
  // checked over bytes OpenSSL does not hold; only EK certificates get that.
  auto refuse_padded = [] {
    return StoreInvalid("a CA certificate whose serial has padding zeros (not DER) is not "
                        "supported");
  };
  if (in[0] == 0x30) {
    // Vendors publish some DER CAs with a newline after them (AMD's fTPM
    // ICAs as collected): blanks after the certificate's own DER length are
    // not part of a trust-store file. Anything else after it stays refused.
    std::vector<Bytes> first = SplitDerCertificates(in, 1);
    if (first.size() == 1 &&
        std::all_of(in.begin() + static_cast<std::ptrdiff_t>(first[0].size()), in.end(), IsAsciiSpace)) {
      in = in.first(first[0].size());
    }
    Result<ParsedDer> one = ParseDerCertificate(in);
    if (!one.ok()) return StoreInvalid(one.status().message());
    if (!one->signed_tbs.empty()) return refuse_padded();
    out.push_back(std::move(one->x509));
    return out;
  }
  ossl::BioPtr bio(BIO_new_mem_buf(in.data(), static_cast<int>(in.size())));
  if (!bio) throw std::bad_alloc();
  for (;;) {
    bool at_end = false;
    std::optional<PemBlock> block = ReadPemBlock(bio.get(), &at_end);
    if (!block) {
      if (!at_end) return StoreInvalid("unreadable PEM block");
      break;
    }
    if (block->label != "CERTIFICATE") {
      return StoreInvalid("PEM block '" + text::PrintableAscii(block->label, kMaxDisplayChars) +
                          "' is not a CERTIFICATE");
    }
    Result<ParsedDer> one = ParseDerCertificate(block->data);
    if (!one.ok()) return StoreInvalid(one.status().message());
    if (!one->signed_tbs.empty()) return refuse_padded();
    out.push_back(std::move(one->x509));
  }
  if (out.empty()) return StoreInvalid("no certificate found");
  return out;
}

// The first critical extension of `x` that neither OpenSSL enforces nor (for
// the leaf) the TCG EK profile defines; nullopt when there is none.
std::optional<std::string> FirstUnacceptedCriticalExtension(X509* x, bool is_leaf) {
  for (int i = 0; i < X509_get_ext_count(x); ++i) {
    X509_EXTENSION* ext = X509_get_ext(x, i);  // BORROWED
    if (X509_EXTENSION_get_critical(ext) <= 0) continue;
    if (X509_supported_extension(ext)) continue;
    const std::string oid = OidText(X509_EXTENSION_get_object(ext));
    if (is_leaf && !oid.empty() &&
        std::find(kTcgLeafCriticalExtensions.begin(), kTcgLeafCriticalExtensions.end(), oid) !=
            kTcgLeafCriticalExtensions.end()) {
      continue;
    }
    return oid.empty() ? std::string("(unprintable OID)") : oid;
  }
  return std::nullopt;
}

// Lower-case hex SHA-256 of the certificate's DER (its encoding as held, which
// for a certificate decoded from DER is the bytes it was decoded from).
std::string CertSha256(X509* x) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (X509_digest(x, EVP_sha256(), md, &len) != 1) {
    ERR_clear_error();
    throw std::bad_alloc();
  }
  return hex::Encode(std::span<const uint8_t>(md, len));
}

// "RSA-2048", "ECC P-384", ... for display; "unknown" for a key OpenSSL
// cannot decode.
std::string KeyForDisplay(X509* x) {
  EVP_PKEY* pkey = X509_get0_pubkey(x);  // BORROWED
  if (pkey == nullptr) {
    ERR_clear_error();
    return "unknown";
  }
  const int base_id = EVP_PKEY_get_base_id(pkey);
  if (base_id == EVP_PKEY_RSA) return "RSA-" + std::to_string(EVP_PKEY_get_bits(pkey));
  if (base_id == EVP_PKEY_EC) {
    char group[64] = {};
    size_t group_len = 0;
    if (EVP_PKEY_get_group_name(pkey, group, sizeof(group), &group_len) != 1) {
      ERR_clear_error();
      return "ECC (explicit parameters)";
    }
    switch (OBJ_sn2nid(group)) {
      case NID_X9_62_prime256v1:
        return "ECC P-256";
      case NID_secp384r1:
        return "ECC P-384";
      case NID_secp521r1:
        return "ECC P-521";
      default:
        return "ECC " + text::PrintableAscii(group, kMaxDisplayChars);
    }
  }
  return text::PrintableAscii(OBJ_nid2sn(base_id) != nullptr ? OBJ_nid2sn(base_id) : "unknown", kMaxDisplayChars);
}

bool IsKnownRelaxation(std::string_view name) {
  return name == kEkRelaxSha1 || name == kEkRelaxExpiredCa || name == kEkRelaxNoEkMarks;
}


const EkAnchor* FindAnchorIn(const std::vector<EkAnchor>& anchors, std::string_view sha256) {
  for (const EkAnchor& a : anchors) {
    if (a.sha256 == sha256) return &a;
  }
  return nullptr;
}

bool Grants(const EkAnchor& anchor, std::string_view relaxation) {
  return std::find(anchor.relaxations.begin(), anchor.relaxations.end(), relaxation) !=
         anchor.relaxations.end();
}

// The configured anchor at the top of the chain OpenSSL has built so far;
// null when the top is not one (an untrusted or incomplete chain).
const EkAnchor* ChainAnchor(X509_STORE_CTX* ctx, const std::vector<EkAnchor>& anchors) {
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(ctx);  // BORROWED
  const int n = chain != nullptr ? sk_X509_num(chain) : 0;
  if (n <= 0) return nullptr;
  return FindAnchorIn(anchors, CertSha256(sk_X509_value(chain, n - 1)));
}

// What one verification shares with OpenSSL's callback (app data of the
// X509_STORE_CTX). BORROWED from VerifyEkCertificate's stack.
struct VerifyState {
  const std::vector<EkAnchor>* anchors = nullptr;
  std::vector<std::string> used;  // relaxations applied, each once
  // The leaf's TBS as received when it was decoded from a copy with a
  // minimal serial (ParseWithPaddedSerial); null otherwise.
  const Bytes* leaf_signed_tbs = nullptr;

  void Use(const char* relaxation) {
    if (std::find(used.begin(), used.end(), relaxation) == used.end()) used.emplace_back(relaxation);
  }
};

bool SignedWithSha1(X509* x) {
  int md_nid = NID_undef;
  if (x == nullptr || X509_get_signature_info(x, &md_nid, nullptr, nullptr, nullptr) != 1) {
    ERR_clear_error();
    return false;
  }
  return md_nid == NID_sha1;
}

// The relaxation that would accept this path-validation error, or null when
// none may: a SHA-1 signature (only SHA-1; MD5 and the like stay refused), an
// expired CA certificate (never the leaf: depth 0 stays strict).
const char* RelaxationFor(int err, int depth, X509* cert) {
  if (err == X509_V_ERR_CA_MD_TOO_WEAK && SignedWithSha1(cert)) return kEkRelaxSha1;
  if (err == X509_V_ERR_CERT_HAS_EXPIRED && depth > 0) return kEkRelaxExpiredCa;
  return nullptr;
}

// Whether the leaf's signature verifies, under the key of its issuer in the
// chain, over `tbs` (the TBSCertificate as received). RSA PKCS#1 v1.5 and
// ECDSA only; the TBS's signature algorithm must equal the outer one, as
// X509_verify requires. The digest strength is checked by OpenSSL's own
// auth-level check on the decoded certificate (same algorithm).
bool LeafSignatureVerifiesOver(X509_STORE_CTX* ctx, X509* leaf, const Bytes& tbs) {
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(ctx);  // BORROWED
  if (leaf == nullptr || chain == nullptr || sk_X509_num(chain) < 2) return false;
  EVP_PKEY* key = X509_get0_pubkey(sk_X509_value(chain, 1));  // BORROWED
  const ASN1_BIT_STRING* sig = nullptr;
  const X509_ALGOR* alg = nullptr;
  X509_get0_signature(&sig, &alg, leaf);
  const ASN1_OBJECT* alg_oid = nullptr;
  int md_nid = NID_undef;
  int pkey_nid = NID_undef;
  if (key == nullptr || sig == nullptr || alg == nullptr ||
      X509_ALGOR_cmp(alg, X509_get0_tbs_sigalg(leaf)) != 0) {
    ERR_clear_error();
    return false;
  }
  X509_ALGOR_get0(&alg_oid, nullptr, nullptr, alg);
  if (OBJ_find_sigid_algs(OBJ_obj2nid(alg_oid), &md_nid, &pkey_nid) != 1 ||
      (pkey_nid != EVP_PKEY_RSA && pkey_nid != EVP_PKEY_EC) ||
      pkey_nid != EVP_PKEY_get_base_id(key) || (sig->flags & 0x07) != 0) {
    return false;
  }
  const EVP_MD* md = EVP_get_digestbynid(md_nid);
  ossl::MdCtxPtr md_ctx(EVP_MD_CTX_new());
  if (!md_ctx) throw std::bad_alloc();
  const bool ok = md != nullptr &&
                  EVP_DigestVerifyInit(md_ctx.get(), nullptr, md, nullptr, key) == 1 &&
                  EVP_DigestVerify(md_ctx.get(), sig->data, static_cast<size_t>(sig->length),
                                   tbs.data(), tbs.size()) == 1;
  ERR_clear_error();
  return ok;
}

// SECURITY: the only refusals this callback overrides. (1) OpenSSL refuses
// every certificate carrying a critical extension it does not implement
// (X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION). EK certificates may mark
// TCG-profile extensions critical, so for the EK certificate alone, and only
// when every such extension is one the profile defines, the refusal is
// overridden. (2) A SHA-1 signature or an expired CA, only when the chain
// ends at a configured anchor the operator granted that relaxation to
// (docs/ek-vendors.md); the use is recorded and reported. (3) The leaf's
// signature failure when the leaf was decoded from a copy with a minimal
// serial, and only if the signature verifies over the TBS as received.
// Every other error stays fatal.
int VerifyCallback(int ok, X509_STORE_CTX* ctx) {
  if (ok) return ok;
  const int err = X509_STORE_CTX_get_error(ctx);
  const int depth = X509_STORE_CTX_get_error_depth(ctx);
  X509* cert = X509_STORE_CTX_get_current_cert(ctx);  // BORROWED
  if (err == X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION) {
    if (depth != 0) return 0;
    if (cert == nullptr || FirstUnacceptedCriticalExtension(cert, /*is_leaf=*/true)) return 0;
    X509_STORE_CTX_set_error(ctx, X509_V_OK);
    return 1;
  }
  auto* state = static_cast<VerifyState*>(X509_STORE_CTX_get_app_data(ctx));
  if (err == X509_V_ERR_CERT_SIGNATURE_FAILURE && depth == 0 && state != nullptr &&
      state->leaf_signed_tbs != nullptr) {
    if (!LeafSignatureVerifiesOver(ctx, cert, *state->leaf_signed_tbs)) return 0;
    X509_STORE_CTX_set_error(ctx, X509_V_OK);
    return 1;
  }
  const char* relaxation = RelaxationFor(err, depth, cert);
  if (relaxation == nullptr || state == nullptr || state->anchors == nullptr) return 0;
  const EkAnchor* anchor = ChainAnchor(ctx, *state->anchors);
  if (anchor == nullptr || !Grants(*anchor, relaxation)) return 0;
  state->Use(relaxation);
  X509_STORE_CTX_set_error(ctx, X509_V_OK);
  return 1;
}

// The refusal's hint when a relaxation of the chain's anchor would accept it.
std::string RelaxationHint(const char* relaxation, const EkAnchor* anchor) {
  if (relaxation == nullptr || anchor == nullptr) return {};
  return std::string("; to accept it, grant \"") + relaxation + "\" to anchor " + anchor->sha256 +
         " ('" + anchor->subject + "') in ek_anchor_relaxations";
}

// RSA EK sizes of the TCG EK Credential Profile (low range 2048, high range
// 2048 and 3072), in modulus bytes.
bool IsEkRsaBytes(size_t bytes) { return bytes == 256 || bytes == 384; }

// Big-endian `bn` as exactly `width` bytes; nullopt when it does not fit.
std::optional<Bytes> BnToFixed(const BIGNUM* bn, size_t width) {
  Bytes out(width);
  if (BN_bn2binpad(bn, out.data(), static_cast<int>(width)) != static_cast<int>(width)) {
    return std::nullopt;
  }
  return out;
}

// Fills the key fields of `info` from the certificate's key. Unsupported keys
// leave key_type at kAlgNull; this never fails, because a parse must report
// the facts of a certificate whose key we refuse.
void DescribeKey(X509* x, EkCertInfo* info) {
  EVP_PKEY* pkey = X509_get0_pubkey(x);  // BORROWED
  if (pkey == nullptr) {
    ERR_clear_error();
    return;
  }
  info->key_bits = EVP_PKEY_get_bits(pkey);
  const int base_id = EVP_PKEY_get_base_id(pkey);
  if (base_id == EVP_PKEY_RSA && info->key_bits > 0 &&
      IsEkRsaBytes(static_cast<size_t>(info->key_bits) / 8) && info->key_bits % 8 == 0) {
    BIGNUM* n_raw = nullptr;
    BIGNUM* e_raw = nullptr;
    const bool got_n = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_N, &n_raw) == 1;
    const bool got_e = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_RSA_E, &e_raw) == 1;
    ossl::BnPtr n(n_raw);
    ossl::BnPtr e(e_raw);
    // A TPM exponent is a UINT32 (TPMS_RSA_PARMS.exponent).
    if (!got_n || !got_e || BN_num_bits(e.get()) > 32) {
      ERR_clear_error();
      return;
    }
    std::optional<Bytes> modulus = BnToFixed(n.get(), static_cast<size_t>(info->key_bits) / 8);
    if (!modulus) return;
    info->rsa_modulus = std::move(*modulus);
    info->rsa_exponent = static_cast<uint32_t>(BN_get_word(e.get()));
    info->key_type = kAlgRsa;
    return;
  }
  if (base_id == EVP_PKEY_EC) {
    char group[64] = {};
    size_t group_len = 0;
    if (EVP_PKEY_get_group_name(pkey, group, sizeof(group), &group_len) != 1) {
      ERR_clear_error();  // explicit curve parameters: refused
      return;
    }
    const int nid = OBJ_sn2nid(group);
    uint16_t curve = 0;
    if (nid == NID_X9_62_prime256v1) curve = kEccNistP256;
    if (nid == NID_secp384r1) curve = kEccNistP384;
    if (nid == NID_secp521r1) curve = kEccNistP521;
    if (curve == 0) return;
    BIGNUM* x_raw = nullptr;
    BIGNUM* y_raw = nullptr;
    const bool got_x = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X, &x_raw) == 1;
    const bool got_y = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, &y_raw) == 1;
    ossl::BnPtr bx(x_raw);
    ossl::BnPtr by(y_raw);
    if (!got_x || !got_y) {
      ERR_clear_error();
      return;
    }
    const size_t width = CurveFieldBytes(curve);
    std::optional<Bytes> fx = BnToFixed(bx.get(), width);
    std::optional<Bytes> fy = BnToFixed(by.get(), width);
    if (!fx || !fy) return;
    info->ecc_curve = curve;
    info->ecc_x = std::move(*fx);
    info->ecc_y = std::move(*fy);
    info->key_type = kAlgEcc;
  }
}

// The TPM manufacturer, model and version from the SubjectAltName's
// directoryName. A certificate without them is not malformed (the CLI still
// shows it); a repeated attribute is, since it makes the TPM's identity
// ambiguous.
Status DescribeTcgSan(X509* x, EkCertInfo* info) {
  int crit = -1;
  GeneralNamesPtr names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, &crit, nullptr)));
  if (!names) {
    ERR_clear_error();
    if (crit == -1) return Status::Ok();  // no SubjectAltName
    return Malformed("undecodable or repeated SubjectAltName");
  }
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names.get(), i);
    if (gn->type != GEN_DIRNAME) continue;
    const X509_NAME* dn = gn->d.directoryName;
    for (int j = 0; j < X509_NAME_entry_count(dn); ++j) {
      const X509_NAME_ENTRY* entry = X509_NAME_get_entry(dn, j);
      const std::string oid = OidText(X509_NAME_ENTRY_get_object(entry));
      std::string* field = nullptr;
      if (oid == kOidTcgAtTpmManufacturer) field = &info->tpm_manufacturer;
      if (oid == kOidTcgAtTpmModel) field = &info->tpm_model;
      if (oid == kOidTcgAtTpmVersion) field = &info->tpm_version;
      if (field == nullptr) continue;
      if (!field->empty()) return Malformed("SubjectAltName repeats TCG attribute " + oid);
      *field = Asn1StringForDisplay(X509_NAME_ENTRY_get_data(entry));
    }
  }
  return Status::Ok();
}

// The certificate and its facts, plus what the EK marking check needs.
struct ParsedCert {
  ossl::X509Ptr x509;
  EkCertInfo info;
  bool has_eku_extension = false;
  Bytes signed_tbs;  // as ParsedDer::signed_tbs
};

// The EK marks: EKU tcg-kp-EKCertificate, and the certificate policies.
Status DescribeEkMarks(X509* x, std::span<const std::string> accepted_policies,
                       ParsedCert* parsed) {
  int crit = -1;
  ExtKeyUsagePtr eku(
      static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(x, NID_ext_key_usage, &crit, nullptr)));
  if (!eku) {
    ERR_clear_error();
    if (crit != -1) return Malformed("undecodable or repeated extended key usage");
  } else {
    parsed->has_eku_extension = true;
    for (int i = 0; i < sk_ASN1_OBJECT_num(eku.get()); ++i) {
      if (OidText(sk_ASN1_OBJECT_value(eku.get(), i)) == kOidTcgKpEkCertificate) {
        parsed->info.has_ek_eku = true;
      }
    }
  }

  crit = -1;
  CertPoliciesPtr policies(static_cast<CERTIFICATEPOLICIES*>(
      X509_get_ext_d2i(x, NID_certificate_policies, &crit, nullptr)));
  if (!policies) {
    ERR_clear_error();
    if (crit != -1) return Malformed("undecodable or repeated certificate policies");
    return Status::Ok();
  }
  for (int i = 0; i < sk_POLICYINFO_num(policies.get()); ++i) {
    const POLICYINFO* policy = sk_POLICYINFO_value(policies.get(), i);
    const std::string oid = OidText(policy->policyid);
    if (!oid.empty() && std::find(accepted_policies.begin(), accepted_policies.end(), oid) !=
                            accepted_policies.end()) {
      parsed->info.has_ek_policy = true;
    }
    for (int j = 0; j < sk_POLICYQUALINFO_num(policy->qualifiers); ++j) {
      const POLICYQUALINFO* qual = sk_POLICYQUALINFO_value(policy->qualifiers, j);
      if (OBJ_obj2nid(qual->pqualid) != NID_id_qt_unotice || qual->d.usernotice == nullptr)
        continue;
      if (Asn1StringForDisplay(qual->d.usernotice->exptext) == kTcgEkPolicyNotice) {
        parsed->info.has_ek_policy = true;
      }
    }
  }
  return Status::Ok();
}

Result<ParsedCert> ParseAndDescribe(std::span<const uint8_t> in,
                                    std::span<const std::string> accepted_policies) {
  Result<ParsedDer> der = ParseOneCertificate(in);
  if (!der.ok()) return der.status();
  ParsedCert parsed;
  parsed.x509 = std::move(der->x509);
  parsed.signed_tbs = std::move(der->signed_tbs);
  X509* x = parsed.x509.get();
  EkCertInfo& info = parsed.info;
  info.der = std::move(der->der);
  info.subject = NameForDisplay(X509_get_subject_name(x));
  info.issuer = NameForDisplay(X509_get_issuer_name(x));
  info.serial_hex = SerialHex(x);
  std::optional<int64_t> not_before = Asn1TimeToUnix(X509_get0_notBefore(x));
  std::optional<int64_t> not_after = Asn1TimeToUnix(X509_get0_notAfter(x));
  if (!not_before || !not_after) return Malformed("unreadable validity dates");
  info.not_before = *not_before;
  info.not_after = *not_after;
  Status s = DescribeTcgSan(x, &info);
  if (!s.ok()) return s;
  s = DescribeEkMarks(x, accepted_policies, &parsed);
  if (!s.ok()) return s;
  DescribeKey(x, &info);
  return parsed;
}

std::string LeafName(const EkCertInfo& info) {
  return "EK certificate (issuer '" + info.issuer + "', serial " + info.serial_hex + ")";
}

std::string CaName(X509* x, int depth) {
  return "CA certificate '" + NameForDisplay(X509_get_subject_name(x)) + "' (serial " +
         SerialHex(x) + ") at depth " + std::to_string(depth);
}

// Maps a path-validation error to this module's reasons. Every X509_V_ERR the
// verifier can raise for our settings is named; anything else is a refusal as
// untrusted, never an acceptance.
Status ChainFailure(X509_STORE_CTX* ctx, const EkCertInfo& leaf,
                    const std::vector<EkAnchor>& anchors) {
  const int err = X509_STORE_CTX_get_error(ctx);
  const int depth = X509_STORE_CTX_get_error_depth(ctx);
  X509* cur = X509_STORE_CTX_get_current_cert(ctx);  // BORROWED, may be null
  const std::string who = (depth <= 0 || cur == nullptr) ? LeafName(leaf) : CaName(cur, depth);
  auto refuse = [&](const char* reason, const std::string& what) {  // reason-helper: VerificationFailed
    return Status::VerificationFailed(reason, who + ": " + what);
  };
  // Names the setting when a relaxation of this path's anchor would accept it.
  const char* relaxation = RelaxationFor(err, depth, cur);
  const std::string hint = RelaxationHint(relaxation, ChainAnchor(ctx, anchors));
  switch (err) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return refuse(kEkCertExpired, "expired" + hint);
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return refuse(kEkCertNotYetValid, "not yet valid");
    case X509_V_ERR_ERROR_IN_CERT_NOT_BEFORE_FIELD:
    case X509_V_ERR_ERROR_IN_CERT_NOT_AFTER_FIELD:
    case X509_V_ERR_INVALID_EXTENSION:
    case X509_V_ERR_INVALID_POLICY_EXTENSION:
      return Malformed(who + ": " + X509_verify_cert_error_string(err));
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
    case X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE:
    case X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY:
      return refuse(kEkCertSignatureInvalid, "signature does not verify under its issuer's key");
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return refuse(kEkCertMissingIntermediate,
                    "issuer '" +
                        (cur != nullptr ? NameForDisplay(X509_get_issuer_name(cur)) : leaf.issuer) +
                        "' is neither a configured root nor a known intermediate");
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      return refuse(kEkCertUntrusted,
                    "the chain ends at a self-signed certificate that is not a "
                    "configured root");
    case X509_V_ERR_CERT_UNTRUSTED:
    case X509_V_ERR_CERT_REJECTED:
      return refuse(kEkCertUntrusted, "not trusted");
    case X509_V_ERR_INVALID_CA:
      return refuse(kEkCertBadBasicConstraints,
                    "issues certificates but is not a CA "
                    "(basicConstraints CA:TRUE missing)");
    case X509_V_ERR_INVALID_NON_CA:
    case X509_V_ERR_PATH_LENGTH_EXCEEDED:
    case X509_V_ERR_KEYUSAGE_NO_CERTSIGN:
      return refuse(kEkCertBadBasicConstraints, X509_verify_cert_error_string(err));
    case X509_V_ERR_CA_MD_TOO_WEAK:
      return refuse(kEkCertWeakCrypto, std::string(relaxation != nullptr ? "SHA-1 signature"
                                                                         : "signature digest too "
                                                                           "weak") +
                                            hint);
    case X509_V_ERR_EE_KEY_TOO_SMALL:
      // OpenSSL counts a key it cannot decode as a 0-bit key: a TPM 1.2 EK
      // certificate's id-RSAES-OAEP key is not weak, it is not supported.
      if (depth == 0 && cur != nullptr && X509_get0_pubkey(cur) == nullptr) {
        ERR_clear_error();
        return Status::Unsupported(kEkKeyUnsupported,
                                   who + ": its key is of a kind rackgate cannot read (a TPM 1.2 "
                                         "EK certificate's id-RSAES-OAEP key is one)");
      }
      return refuse(kEkCertWeakCrypto, X509_verify_cert_error_string(err));
    case X509_V_ERR_CA_KEY_TOO_SMALL:
      return refuse(kEkCertWeakCrypto, X509_verify_cert_error_string(err));
    case X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION: {
      std::optional<std::string> oid =
          cur != nullptr ? FirstUnacceptedCriticalExtension(cur, depth == 0) : std::nullopt;
      return refuse(kEkCertUnhandledCriticalExtension,
                    "unhandled critical extension " + oid.value_or("(unknown)"));
    }
    case X509_V_ERR_OUT_OF_MEM:
      throw std::bad_alloc();
    default:
      return refuse(kEkCertUntrusted, X509_verify_cert_error_string(err));
  }
}

Result<Bytes> ReadFileBounded(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(kEkTrustStoreIo, "cannot open " + path.string());
  Bytes data;
  char buf[8192];
  while (in) {
    in.read(buf, sizeof(buf));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    if (data.size() + static_cast<size_t>(n) > kMaxTrustStoreFileBytes) {
      return StoreInvalid(path.string() + " exceeds " + std::to_string(kMaxTrustStoreFileBytes) +
                          " bytes");
    }
    data.insert(data.end(), buf, buf + n);
  }
  if (in.bad()) return Status::IoError(kEkTrustStoreIo, "cannot read " + path.string());
  return data;
}

// The files a trust-store path names: itself, or the regular files of a
// directory (sorted, so loading is deterministic; dot files skipped).
Result<std::vector<std::filesystem::path>> ExpandTrustPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) return Status::IoError(kEkTrustStoreIo, "cannot access " + path + ": " + ec.message());
  if (fs::is_regular_file(st)) return std::vector<fs::path>{fs::path(path)};
  if (!fs::is_directory(st)) return StoreInvalid(path + " is neither a file nor a directory");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code file_ec;
    if (!fs::is_regular_file(it->path(), file_ec)) continue;
    files.push_back(it->path());
  }
  if (ec) return Status::IoError(kEkTrustStoreIo, "cannot list " + path + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}


// A verification context for `leaf` over `store` at `now_unix`, with this
// module's settings; `state` is BORROWED and must outlive the context.
ossl::X509StoreCtxPtr NewVerifyContext(X509_STORE* store, X509* leaf, STACK_OF(X509)* untrusted,
                                       int64_t now_unix, VerifyState* state) {
  ossl::X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store, leaf, untrusted) != 1) {
    throw std::bad_alloc();
  }
  // SECURITY: no TLS purpose. EK certificates carry only the TCG EKU, and an
  // SSL purpose refuses them; "any" checks no purpose, and the EK marking is
  // checked by CheckEkLeaf instead.
  if (X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_ANY) != 1) {
    throw std::logic_error("X509_PURPOSE_ANY refused by OpenSSL");
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());  // BORROWED
  X509_VERIFY_PARAM_set_depth(param, kMaxChainDepth);
  // Every certificate in the store is an anchor, self-signed or not: the path
  // ends at the first one reached from the leaf (docs/ek-vendors.md).
  X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_PARTIAL_CHAIN);
  // SECURITY: level 1 refuses keys under 80-bit strength and SHA-1 or MD5
  // signatures anywhere but on the anchor's own signature; VerifyCallback
  // lifts the SHA-1 refusal only for an anchor granted "sha1".
  X509_VERIFY_PARAM_set_auth_level(param, 1);
  // The caller's clock, so that verification is reproducible and testable.
  X509_STORE_CTX_set_time(ctx.get(), 0, static_cast<time_t>(now_unix));
  X509_STORE_CTX_set_verify_cb(ctx.get(), VerifyCallback);
  if (X509_STORE_CTX_set_app_data(ctx.get(), state) != 1) throw std::bad_alloc();
  return ctx;
}

Status NotEk(const EkCertInfo& info, const std::string& what) {
  return Status::VerificationFailed(kEkCertNotEk, LeafName(info) + ": " + what);
}

// The checks on a leaf whose path verified to `anchor`: not a CA, marked as an
// EK certificate (or the anchor granted "no-ek-marks"), a supported key.
Status CheckEkLeaf(const ParsedCert& parsed, const EkAnchor& anchor, VerifyState* state) {
  const EkCertInfo& info = parsed.info;
  X509* leaf = parsed.x509.get();
  // SECURITY: OpenSSL accepts a CA certificate as the end of a path; an EK
  // certificate that could issue certificates is not an EK certificate.
  // X509_check_ca alone is not enough: it answers 0 for CA:TRUE when the key
  // usage lacks keyCertSign, so basicConstraints is checked on its own too.
  if ((X509_get_extension_flags(leaf) & EXFLAG_CA) != 0 || X509_check_ca(leaf) != 0) {
    return Status::VerificationFailed(kEkCertBadBasicConstraints,
                                      LeafName(info) + ": is a CA certificate");
  }
  // SECURITY: an EKU without the EK purpose restricts the key to other uses
  // (RFC 5280 4.2.1.12), so neither a policy nor "no-ek-marks" overrides it;
  // the policy mark counts only for certificates without any EKU extension
  // (older profiles), and so does "no-ek-marks" (Google's vTPM EK
  // certificates carry no EKU, no policy and no TCG SAN).
  if (!info.has_ek_eku && parsed.has_eku_extension) {
    return NotEk(info, "extended key usage lacks tcg-kp-EKCertificate (no relaxation covers an "
                       "extended key usage for other purposes)");
  }
  if (!info.has_ek_eku && !info.has_ek_policy) {
    // SECURITY: without marks, a key its issuer limited to signing is no EK
    // whatever the setting: cloud CAs issue AK certificates from the same CA
    // as EK certificates.
    const uint32_t usage = X509_get_key_usage(leaf);
    if (usage != UINT32_MAX && (usage & (KU_KEY_ENCIPHERMENT | KU_KEY_AGREEMENT)) == 0) {
      return NotEk(info, "no EK marks, and its key usage allows neither keyEncipherment nor "
                         "keyAgreement (a signing key such as an AK)");
    }
    if (!Grants(anchor, kEkRelaxNoEkMarks)) {
      return NotEk(info, "neither the EK extended key usage nor an EK certificate policy" +
                             RelaxationHint(kEkRelaxNoEkMarks, &anchor));
    }
    state->Use(kEkRelaxNoEkMarks);
  }
  if (info.key_type == kAlgNull) {
    return Status::Unsupported(kEkKeyUnsupported,
                               LeafName(info) + ": key is not " + kSupportedEkKeys + " (" +
                                   std::to_string(info.key_bits) + " bits)");
  }
  return Status::Ok();
}

}  // namespace

struct EkTrustStore::Impl {
  ossl::X509StorePtr store;
  ossl::X509StackPtr intermediates;  // untrusted: path building only
  std::vector<std::string> accepted_policies;
  std::vector<EkAnchor> anchors;  // one per certificate in `store`
  std::vector<std::string> notes;

  // The anchor whose DER has this SHA-256 (lower-case hex); null if none.
  const EkAnchor* FindAnchor(std::string_view sha256) const {
    return FindAnchorIn(anchors, sha256);
  }
  Status AddRoots(std::span<const uint8_t> der_or_pem, const std::string& source);
};

EkTrustStore::EkTrustStore() : impl_(std::make_unique<Impl>()) {
  impl_->store.reset(X509_STORE_new());
  impl_->intermediates.reset(sk_X509_new_null());
  if (!impl_->store || !impl_->intermediates) throw std::bad_alloc();
}

EkTrustStore::~EkTrustStore() = default;
EkTrustStore::EkTrustStore(EkTrustStore&& other) noexcept = default;
EkTrustStore& EkTrustStore::operator=(EkTrustStore&& other) noexcept = default;

size_t EkTrustStore::root_count() const { return impl_ ? impl_->anchors.size() : 0; }

size_t EkTrustStore::intermediate_count() const {
  return impl_ ? static_cast<size_t>(sk_X509_num(impl_->intermediates.get())) : 0;
}

std::vector<EkAnchor> EkTrustStore::Anchors() const {
  return impl_ ? impl_->anchors : std::vector<EkAnchor>{};
}

std::vector<std::string> EkTrustStore::LoadNotes() const {
  return impl_ ? impl_->notes : std::vector<std::string>{};
}

Status EkTrustStore::AllowForAnchor(std::string_view anchor_sha256_hex,
                                    std::string_view relaxation) {
  if (!impl_) return StoreInvalid("moved-from trust store");
  if (!IsKnownRelaxation(relaxation)) {
    return StoreInvalid("unknown relaxation '" + text::PrintableAscii(relaxation, kMaxDisplayChars) +
                        "' (known: sha1, expired-ca, no-ek-marks)");
  }
  std::string wanted(anchor_sha256_hex);
  std::transform(wanted.begin(), wanted.end(), wanted.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (EkAnchor& a : impl_->anchors) {
    if (a.sha256 != wanted) continue;
    if (std::find(a.relaxations.begin(), a.relaxations.end(), relaxation) == a.relaxations.end()) {
      a.relaxations.emplace_back(relaxation);
    }
    return Status::Ok();
  }
  return StoreInvalid("no EK anchor has SHA-256 " + text::PrintableAscii(wanted, kMaxDisplayChars));
}

Status EkTrustStore::AddRoot(std::span<const uint8_t> der_or_pem) {
  if (!impl_) return StoreInvalid("moved-from trust store");
  return impl_->AddRoots(der_or_pem, "");
}

Status EkTrustStore::Impl::AddRoots(std::span<const uint8_t> der_or_pem,
                                    const std::string& source) {
  Result<std::vector<ossl::X509Ptr>> certs = ParseCertificateBundle(der_or_pem);
  if (!certs.ok()) return certs.status();
  const std::string where = source.empty() ? std::string("(memory)") : source;
  size_t cas = 0;
  std::vector<std::string> skipped;  // notes, kept only when something was added
  for (const ossl::X509Ptr& x : *certs) {
    const std::string name = NameForDisplay(X509_get_subject_name(x.get()));
    // SECURITY: only a CA anchors a path. Operators collect vendor folders
    // that mix roots, intermediates and sometimes a sample EK certificate; a
    // non-CA among them is skipped and said so, not trusted and not a reason
    // to refuse the vendors' CAs that came with it.
    if (X509_check_ca(x.get()) != 1) {
      ERR_clear_error();
      skipped.push_back(where + ": " + name +
                        ": skipped: not a CA (needs basicConstraints CA:TRUE and, if it has a key "
                      "usage, keyCertSign)");
      continue;
    }
    ++cas;
    EkAnchor anchor;
    anchor.sha256 = CertSha256(x.get());
    if (FindAnchor(anchor.sha256) != nullptr) {
      skipped.push_back(where + ": " + name + ": skipped: already an anchor");
      continue;
    }
    anchor.subject = name;
    anchor.issuer = NameForDisplay(X509_get_issuer_name(x.get()));
    // Not self-signed is fine (partial chains): a vendor CA whose root the
    // operator does not have, or a cross-signed CA, anchors what it issued.
    anchor.self_signed = X509_self_signed(x.get(), /*verify_signature=*/1) == 1;
    ERR_clear_error();
    anchor.key = KeyForDisplay(x.get());
    anchor.not_after = Asn1TimeToUnix(X509_get0_notAfter(x.get())).value_or(0);
    anchor.source = source;
    if (X509_STORE_add_cert(store.get(), x.get()) != 1) {  // takes its own reference
      ERR_clear_error();
      throw std::bad_alloc();
    }
    anchors.push_back(std::move(anchor));
  }
  if (cas == 0) {
    return StoreInvalid("no CA certificate (" + std::to_string(certs->size()) +
                        " certificate(s); first: '" +
                        NameForDisplay(X509_get_subject_name(certs->front().get())) + "')");
  }
  notes.insert(notes.end(), skipped.begin(), skipped.end());
  return Status::Ok();
}

Status EkTrustStore::AddIntermediate(std::span<const uint8_t> der_or_pem) {
  if (!impl_) return StoreInvalid("moved-from trust store");
  Result<std::vector<ossl::X509Ptr>> certs = ParseCertificateBundle(der_or_pem);
  if (!certs.ok()) return certs.status();
  // No CA check here: an intermediate only proposes a path, and path
  // validation refuses one that is not a CA with its own reason.
  for (ossl::X509Ptr& x : *certs) {
    if (sk_X509_push(impl_->intermediates.get(), x.get()) <= 0) throw std::bad_alloc();
    x.release();  // now owned by the stack
  }
  return Status::Ok();
}

Status EkTrustStore::AcceptEkPolicy(std::string_view dotted_oid) {
  if (!impl_) return StoreInvalid("moved-from trust store");
  const std::string text(dotted_oid);
  Asn1ObjectPtr obj(OBJ_txt2obj(text.c_str(), /*no_name=*/1));
  const std::string canonical = obj ? OidText(obj.get()) : std::string();
  if (canonical.empty()) {
    ERR_clear_error();
    return StoreInvalid("'" + text::PrintableAscii(text, kMaxDisplayChars) + "' is not a dotted OID");
  }
  impl_->accepted_policies.push_back(canonical);
  return Status::Ok();
}

Result<EkTrustStore> EkTrustStore::Load(const std::vector<std::string>& root_paths,
                                        const std::vector<std::string>& intermediate_paths) {
  EkTrustStore store;
  Impl& impl = *store.impl_;
  for (int pass = 0; pass < 2; ++pass) {
    const bool roots = pass == 0;
    for (const std::string& path : roots ? root_paths : intermediate_paths) {
      // A configured path that does not exist is a configuration error; what
      // a folder holds is the vendors' business and only noted when unusable.
      Result<std::vector<std::filesystem::path>> files = ExpandTrustPath(path);
      if (!files.ok()) return files.status();
      for (const std::filesystem::path& file : *files) {
        Result<Bytes> data = ReadFileBounded(file);
        Status s = !data.ok() ? data.status()
                   : roots    ? impl.AddRoots(*data, file.string())
                              : store.AddIntermediate(*data);
        if (s.ok()) continue;
        if (s.code() == Status::Code::kIoError && files->size() == 1 && *files->begin() == path) {
          return s;  // the one file named cannot be read
        }
        impl.notes.push_back(file.string() + ": skipped: " + s.message());
      }
    }
  }
  if (impl.anchors.empty()) {
    std::string why = "no EK root certificate configured: ek_roots holds no CA certificate";
    for (const std::string& note : impl.notes) why += "; " + note;
    return StoreInvalid(why);
  }
  return store;
}

Result<EkCertInfo> ParseEkCertificate(std::span<const uint8_t> der_or_pem) {
  Result<ParsedCert> parsed = ParseAndDescribe(der_or_pem, {});
  if (!parsed.ok()) return parsed.status();
  return std::move(parsed->info);
}

Result<EkCertInfo> VerifyEkCertificate(const EkTrustStore& store,
                                       std::span<const uint8_t> cert_der_or_pem, int64_t now_unix,
                                       std::span<const Bytes> presented_intermediates) {
  const EkTrustStore::Impl* impl = store.impl_.get();
  Result<ParsedCert> parsed =
      ParseAndDescribe(cert_der_or_pem, impl ? std::span<const std::string>(impl->accepted_policies)
                                             : std::span<const std::string>());
  if (!parsed.ok()) return parsed.status();
  const EkCertInfo& info = parsed->info;
  if (impl == nullptr || impl->anchors.empty()) {
    return Status::VerificationFailed(kEkCertUntrusted,
                                      LeafName(info) + ": no EK roots configured");
  }

  if (presented_intermediates.size() > kMaxPresentedIntermediates) {
    return Malformed("more than " + std::to_string(kMaxPresentedIntermediates) +
                     " presented intermediates");
  }
  std::vector<ossl::X509Ptr> presented;
  for (size_t i = 0; i < presented_intermediates.size(); ++i) {
    Result<ParsedDer> one = ParseOneCertificate(presented_intermediates[i]);
    if (!one.ok()) return one.status().Annotate("presented intermediate " + std::to_string(i));
    if (!one->signed_tbs.empty()) {
      return Malformed("presented intermediate " + std::to_string(i) +
                       ": a CA certificate whose serial has padding zeros is not supported");
    }
    presented.push_back(std::move(one->x509));
  }

  // SECURITY: configured and presented intermediates go in the untrusted
  // list, never in the X509_STORE: only configured anchors end a path.
  X509ShallowStackPtr untrusted(sk_X509_new_null());
  if (!untrusted) throw std::bad_alloc();
  for (int i = 0; i < sk_X509_num(impl->intermediates.get()); ++i) {
    if (sk_X509_push(untrusted.get(), sk_X509_value(impl->intermediates.get(), i)) <= 0) {
      throw std::bad_alloc();
    }
  }
  for (const ossl::X509Ptr& x : presented) {
    if (sk_X509_push(untrusted.get(), x.get()) <= 0) throw std::bad_alloc();
  }

  VerifyState state;
  state.anchors = &impl->anchors;
  if (!parsed->signed_tbs.empty()) state.leaf_signed_tbs = &parsed->signed_tbs;
  ossl::X509StoreCtxPtr ctx =
      NewVerifyContext(impl->store.get(), parsed->x509.get(), untrusted.get(), now_unix, &state);
  const int rc = X509_verify_cert(ctx.get());
  if (rc != 1) {
    Status s = ChainFailure(ctx.get(), info, impl->anchors);
    ERR_clear_error();
    return s;
  }
  ERR_clear_error();
  // SECURITY: a leaf decoded from a minimal-serial copy is accepted only if
  // its signature verifies over the TBS as received. OpenSSL checked the
  // copy, which verifies too when the issuer also signed the minimal form:
  // then these bytes are not what it signed.
  if (state.leaf_signed_tbs != nullptr &&
      !LeafSignatureVerifiesOver(ctx.get(), parsed->x509.get(), *state.leaf_signed_tbs)) {
    return Status::VerificationFailed(
        kEkCertSignatureInvalid,
        LeafName(info) + ": signature does not verify over the certificate as received");
  }
  // The anchor is the top of the verified chain: a certificate of the store.
  const EkAnchor* anchor = ChainAnchor(ctx.get(), impl->anchors);
  if (anchor == nullptr) {
    throw std::logic_error("verified EK chain does not end at a configured anchor");
  }

  Status s = CheckEkLeaf(*parsed, *anchor, &state);
  if (!s.ok()) return s;
  parsed->info.anchor_sha256 = anchor->sha256;
  parsed->info.anchor_subject = anchor->subject;
  parsed->info.relaxations_used = std::move(state.used);
  return std::move(parsed->info);
}

Status CheckEkPublicMatchesCertificate(const TpmPublic& ek, const EkCertInfo& cert) {
  const std::string who = LeafName(cert);
  auto unsupported = [&](const std::string& what) {
    return Status::Unsupported(kEkKeyUnsupported, who + ": " + what);
  };
  auto mismatch = [&](const std::string& what) {
    return Status::VerificationFailed(
        kEkPublicMismatch, "EK public area does not match the key of " + who + ": " + what);
  };

  if (cert.key_type == kAlgRsa) {
    if (!IsEkRsaBytes(cert.rsa_modulus.size()))
      return unsupported("certificate key is not RSA-2048 or RSA-3072");
  } else if (cert.key_type == kAlgEcc) {
    const size_t width = CurveFieldBytes(cert.ecc_curve);
    if (width == 0 || cert.ecc_x.size() != width || cert.ecc_y.size() != width) {
      return unsupported("certificate key is not on P-256, P-384 or P-521");
    }
  } else {
    return unsupported(std::string("certificate key is not ") + kSupportedEkKeys);
  }

  if (ek.type == kAlgRsa) {
    if (ek.rsa_key_bits % 8 != 0 || !IsEkRsaBytes(ek.rsa_key_bits / 8u)) {
      return unsupported("EK public area is not RSA-2048 or RSA-3072");
    }
  } else if (ek.type == kAlgEcc) {
    if (CurveFieldBytes(ek.ecc_curve) == 0)
      return unsupported("EK public area is not on P-256, P-384 or P-521");
  } else {
    return unsupported("EK public area is neither RSA nor ECC");
  }
  if (ek.type != cert.key_type) return mismatch("key types differ");

  // Left-pads a big-endian TPM value to `width`; nullopt if it is longer.
  auto fixed = [](const Bytes& v, size_t width) -> std::optional<Bytes> {
    if (v.size() > width) return std::nullopt;
    Bytes out(width - v.size(), 0);
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };

  if (ek.type == kAlgRsa) {
    // TPMS_RSA_PARMS.exponent 0 means 2^16+1; tpm.h normalises it already.
    const uint32_t exponent = ek.rsa_exponent == 0 ? 65537u : ek.rsa_exponent;
    if (exponent != cert.rsa_exponent) return mismatch("RSA exponents differ");
    if (ek.rsa_key_bits / 8u != cert.rsa_modulus.size()) return mismatch("RSA key sizes differ");
    if (fixed(ek.rsa_modulus, cert.rsa_modulus.size()) != cert.rsa_modulus)
      return mismatch("RSA moduli differ");
    return Status::Ok();
  }
  if (ek.ecc_curve != cert.ecc_curve) return mismatch("ECC curves differ");
  const size_t width = CurveFieldBytes(cert.ecc_curve);
  if (fixed(ek.ecc_x, width) != cert.ecc_x || fixed(ek.ecc_y, width) != cert.ecc_y) {
    return mismatch("ECC points differ");
  }
  return Status::Ok();
}

}  // namespace rackgate::attest
