// Kubelet CSR parsing, vouching rules and the TPM-resident key proof.
#include "core/csr.h"

#include <arpa/inet.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <memory>
#include <functional>
#include <set>
#include <stdexcept>

#include "attest/boot_facts.h"
#include "attest/ek_identity.h"
#include "attest/quote.h"
#include "attest/tpm.h"
#include "base/byte_reader.h"
#include "base/ossl.h"
#include "base/hex.h"
#include "base/text.h"

namespace rackgate::core::csr {

namespace {

Status Malformed(std::string message) {
  ERR_clear_error();
  return Status::InvalidArgument("csr_malformed", std::move(message));
}

// Requester-supplied text for messages: escaped and short, so a hostile value
// can neither inject into a log line nor make it huge.
std::string Shown(std::string_view s) { return "'" + text::PrintableAscii(s, 80) + "'"; }

std::string ShownList(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + Shown(v);
  return "[" + out + "]";
}

// The DER of the one PEM block in `pem`, which must be named `want` and carry
// no headers. What the requester sends is exactly one block: a second block,
// a key beside it, PEM encryption headers mean it sent something we did not
// ask for. Refusals are InvalidArgument with reason "" and a message; the
// caller gives them its own reason.
Result<Bytes> OnePemBlock(std::string_view pem, std::string_view want) {
  auto refuse = [](std::string message) {
    ERR_clear_error();
    return Status::InvalidArgument("", std::move(message));
  };
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw std::bad_alloc();
  Bytes der;
  int blocks = 0;
  for (;;) {
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long len = 0;
    ERR_clear_error();
    if (PEM_read_bio(bio.get(), &name, &header, &data, &len) != 1) {
      const unsigned long e = ERR_peek_last_error();
      // PEM_read_bio reports "no start line" once it runs out of blocks.
      const bool end = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
      ERR_clear_error();
      if (!end) return refuse("PEM encoding is malformed");
      break;
    }
    const std::string block_name(name);
    const bool has_header = header != nullptr && header[0] != '\0';
    Bytes block(data, data + len);
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    if (++blocks > 1) return refuse("more than one PEM block");
    if (block_name != want) return refuse("PEM block is " + Shown(block_name) + ", not " + std::string(want));
    if (has_header) return refuse("PEM block carries headers");
    der = std::move(block);
  }
  if (blocks == 0) return refuse("no PEM " + std::string(want) + " block");
  return der;
}

// Kubernetes' CSR API holds exactly one "CERTIFICATE REQUEST" block.
Result<Bytes> SinglePemBlock(std::string_view pem) {
  if (pem.empty()) return Malformed("empty request");
  auto der = OnePemBlock(pem, "CERTIFICATE REQUEST");
  if (!der.ok()) return Malformed(der.status().message());
  return der;
}

Result<std::string> Utf8(const ASN1_STRING* s) {
  unsigned char* out = nullptr;
  const int n = ASN1_STRING_to_UTF8(&out, s);
  if (n < 0) return Malformed("a text value cannot be decoded");
  ossl::BufferPtr owned(out);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string Raw(const ASN1_STRING* s) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<size_t>(ASN1_STRING_length(s)));
}

std::string ObjectText(const ASN1_OBJECT* obj) {
  const int nid = OBJ_obj2nid(obj);
  if (nid != NID_undef) return OBJ_nid2sn(nid);
  char buf[128];
  const int n = OBJ_obj2txt(buf, sizeof(buf), obj, 1);
  return n > 0 && static_cast<size_t>(n) < sizeof(buf) ? std::string(buf) : std::string("unknown-oid");
}

// Only signatures whose hash resists collisions prove possession well enough
// to vouch for; Go's x509 (and so Kubernetes) refuses MD5 and SHA-1 too.
// RSASSA-PSS keeps its hash in parameters (SHA-1 by default); kubelet never
// signs with it, so it is refused rather than parsed.
bool AcceptedSignatureAlgorithm(int md_nid, int pkey_nid) {
  switch (md_nid) {
    case NID_sha256:
    case NID_sha384:
    case NID_sha512:
      return true;
    case NID_undef:
      // EdDSA signs the message itself; no separate hash to weaken.
      return pkey_nid == NID_ED25519 || pkey_nid == NID_ED448;
    default:
      return false;
  }
}

Status ParseSubject(const X509_NAME* name, Csr* csr) {
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    const X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const ASN1_OBJECT* obj = X509_NAME_ENTRY_get_object(e);
    const int nid = OBJ_obj2nid(obj);
    if (nid == NID_commonName || nid == NID_organizationName) {
      auto text = Utf8(X509_NAME_ENTRY_get_data(e));
      if (!text.ok()) return text.status();
      (nid == NID_commonName ? csr->common_names : csr->organizations).push_back(std::move(*text));
    } else {
      csr->other_subject_attributes.push_back(ObjectText(obj));
    }
  }
  return Status::Ok();
}

Status ParseSans(const GENERAL_NAMES* names, Csr* csr) {
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    switch (gn->type) {
      case GEN_DNS: csr->dns_names.push_back(Raw(gn->d.dNSName)); break;
      case GEN_EMAIL: csr->emails.push_back(Raw(gn->d.rfc822Name)); break;
      case GEN_URI: csr->uris.push_back(Raw(gn->d.uniformResourceIdentifier)); break;
      case GEN_IPADD: {
        const ASN1_OCTET_STRING* ip = gn->d.iPAddress;
        const int len = ASN1_STRING_length(ip);
        char text[INET6_ADDRSTRLEN];
        if ((len != 4 && len != 16) ||
            inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text,
                      sizeof(text)) == nullptr) {
          return Malformed("an IP address SAN is neither 4 nor 16 bytes");
        }
        csr->ip_addresses.emplace_back(text);
        break;
      }
      case GEN_OTHERNAME: csr->other_names.emplace_back("otherName"); break;
      case GEN_X400: csr->other_names.emplace_back("x400Address"); break;
      case GEN_DIRNAME: csr->other_names.emplace_back("directoryName"); break;
      case GEN_EDIPARTY: csr->other_names.emplace_back("ediPartyName"); break;
      case GEN_RID: csr->other_names.emplace_back("registeredID"); break;
      default: return Malformed("a SAN has an unknown kind");
    }
  }
  return Status::Ok();
}

// keyUsage bits in RFC 5280 order, named as Kubernetes names them.
constexpr std::array<const char*, 9> kKeyUsageNames = {
    "digital signature", "content commitment", "key encipherment",
    "data encipherment", "key agreement",      "cert sign",
    "crl sign",          "encipher only",      "decipher only"};

std::string ExtendedKeyUsageName(const ASN1_OBJECT* obj) {
  switch (OBJ_obj2nid(obj)) {
    case NID_server_auth: return std::string(kUsageServerAuth);
    case NID_client_auth: return std::string(kUsageClientAuth);
    case NID_code_sign: return "code signing";
    case NID_email_protect: return "email protection";
    case NID_time_stamp: return "timestamping";
    case NID_OCSP_sign: return "ocsp signing";
    case NID_anyExtendedKeyUsage: return "any";
    default: {
      char buf[128];
      const int n = OBJ_obj2txt(buf, sizeof(buf), obj, 1);
      return n > 0 && static_cast<size_t>(n) < sizeof(buf) ? std::string(buf) : "unknown-oid";
    }
  }
}

struct X509AttributeFree {
  void operator()(X509_ATTRIBUTE* a) const { X509_ATTRIBUTE_free(a); }
};
using X509AttributePtr = std::unique_ptr<X509_ATTRIBUTE, X509AttributeFree>;

Status ParseExtensions(const std::vector<X509AttributePtr>& attributes, Csr* csr) {
  // Both the PKCS#9 and the Microsoft attribute are read by OpenSSL; a second
  // copy of either would let two parsers disagree about what was requested.
  const X509_ATTRIBUTE* request = nullptr;  // BORROWED from attributes
  int found = 0;
  for (const auto& attr : attributes) {
    const int nid = OBJ_obj2nid(X509_ATTRIBUTE_get0_object(attr.get()));
    if (nid != NID_ext_req && nid != NID_ms_ext_req) continue;
    ++found;
    request = attr.get();
  }
  if (found == 0) return Status::Ok();
  if (found > 1) return Malformed("extensionRequest attribute repeated");
  csr->has_extension_request = true;
  // As X509_REQ_get_extensions: the attribute's first value, a SEQUENCE OF
  // Extension.
  const ASN1_TYPE* value = X509_ATTRIBUTE_get0_type(const_cast<X509_ATTRIBUTE*>(request), 0);
  if (value == nullptr || value->type != V_ASN1_SEQUENCE) return Malformed("extensionRequest cannot be decoded");
  const unsigned char* p = value->value.sequence->data;
  ossl::ExtStackPtr exts(d2i_X509_EXTENSIONS(nullptr, &p, value->value.sequence->length));
  if (!exts) return Malformed("extensionRequest cannot be decoded");

  std::set<int> seen;
  for (int i = 0; i < sk_X509_EXTENSION_num(exts.get()); ++i) {
    const ASN1_OBJECT* obj = X509_EXTENSION_get_object(sk_X509_EXTENSION_value(exts.get(), i));
    const int nid = OBJ_obj2nid(obj);
    // RFC 5280 4.2: an extension appears at most once; a repeat is ambiguous.
    if (nid != NID_undef && !seen.insert(nid).second) {
      return Malformed("extension " + ObjectText(obj) + " repeated");
    }
  }

  int crit = -1;
  ossl::GeneralNamesPtr sans(static_cast<GENERAL_NAMES*>(
      X509V3_get_d2i(exts.get(), NID_subject_alt_name, &crit, nullptr)));
  if (!sans && crit >= 0) return Malformed("subjectAltName cannot be decoded");
  if (sans) {
    if (Status s = ParseSans(sans.get(), csr); !s.ok()) return s;
  }

  crit = -1;
  ossl::BitStringPtr ku(static_cast<ASN1_BIT_STRING*>(
      X509V3_get_d2i(exts.get(), NID_key_usage, &crit, nullptr)));
  if (!ku && crit >= 0) return Malformed("keyUsage cannot be decoded");
  if (ku) {
    for (size_t bit = 0; bit < kKeyUsageNames.size(); ++bit) {
      if (ASN1_BIT_STRING_get_bit(ku.get(), static_cast<int>(bit))) {
        csr->key_usages.emplace_back(kKeyUsageNames[bit]);
      }
    }
  }

  crit = -1;
  ossl::EkuPtr eku(static_cast<EXTENDED_KEY_USAGE*>(
      X509V3_get_d2i(exts.get(), NID_ext_key_usage, &crit, nullptr)));
  if (!eku && crit >= 0) return Malformed("extKeyUsage cannot be decoded");
  if (eku) {
    for (int i = 0; i < sk_ASN1_OBJECT_num(eku.get()); ++i) {
      csr->extended_key_usages.push_back(ExtendedKeyUsageName(sk_ASN1_OBJECT_value(eku.get(), i)));
    }
  }
  return Status::Ok();
}

Status DescribeKey(EVP_PKEY* key, Csr* csr) {
  csr->key_bits = EVP_PKEY_get_bits(key);
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
      csr->key_algorithm = KeyAlgorithm::kRsa;
      csr->key_type = "RSA";
      break;
    case EVP_PKEY_EC: {
      csr->key_algorithm = KeyAlgorithm::kEcdsa;
      csr->key_type = "EC";
      char group[80] = {};
      size_t len = 0;
      // Explicit curve parameters have no group name; the curve stays "" and
      // Check refuses the key.
      if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
                                         &len) == 1) {
        int nid = OBJ_sn2nid(group);
        if (nid == NID_undef) nid = EC_curve_nist2nid(group);
        const char* nist = nid == NID_undef ? nullptr : EC_curve_nid2nist(nid);
        csr->curve = nist ? nist : group;
      }
      // A compressed point is the same key as an uncompressed one; encode it
      // one way so that SPKI comparison (CheckTpmKey) compares keys.
      if (EVP_PKEY_set_utf8_string_param(key, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                         OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_UNCOMPRESSED) != 1) {
        return Malformed("EC public key cannot be re-encoded");
      }
      break;
    }
    default: {
      csr->key_algorithm = KeyAlgorithm::kOther;
      const char* name = EVP_PKEY_get0_type_name(key);
      csr->key_type = name ? name : "unknown";
      std::transform(csr->key_type.begin(), csr->key_type.end(), csr->key_type.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      break;
    }
  }
  return Status::Ok();
}

// Whether the request's own SubjectPublicKeyInfo is already the one OpenSSL
// would encode for its key: RSA with NULL parameters, or EC with a named
// curve and an uncompressed point. DER leaves no other freedom in those.
bool CanonicalSpki(const X509_PUBKEY* spki, const Csr& csr) {
  ASN1_OBJECT* algorithm = nullptr;
  const unsigned char* bits = nullptr;
  int len = 0;
  X509_ALGOR* alg = nullptr;
  if (X509_PUBKEY_get0_param(&algorithm, &bits, &len, &alg, spki) != 1 || alg == nullptr) return false;
  int param_type = 0;
  const void* param = nullptr;
  X509_ALGOR_get0(nullptr, &param_type, &param, alg);
  switch (OBJ_obj2nid(algorithm)) {
    case NID_rsaEncryption: return csr.key_algorithm == KeyAlgorithm::kRsa && param_type == V_ASN1_NULL;
    case NID_X9_62_id_ecPublicKey:
      return csr.key_algorithm == KeyAlgorithm::kEcdsa && param_type == V_ASN1_OBJECT && len > 0 && bits[0] == 0x04;
    default: return false;
  }
}

// The slow path's csr->spki and csr->spki_der (see KeyFromSpki). The
// request's own SubjectPublicKeyInfo is kept when it is canonical; other
// encodings (a compressed point, say) are re-encoded from the key.
Status KeepSpki(ossl::X509PubkeyPtr own, EVP_PKEY* key, Csr* csr) {
  unsigned char* der = nullptr;
  int n = 0;
  if (CanonicalSpki(own.get(), *csr)) {
    n = i2d_X509_PUBKEY(own.get(), &der);
    if (n > 0) csr->spki = std::shared_ptr<X509_PUBKEY>(own.release(), X509_PUBKEY_free);
  } else {
    n = i2d_PUBKEY(key, &der);
    if (n > 0) {
      const unsigned char* p = der;
      X509_PUBKEY* decoded = d2i_X509_PUBKEY(nullptr, &p, n);
      if (decoded != nullptr) csr->spki = std::shared_ptr<X509_PUBKEY>(decoded, X509_PUBKEY_free);
    }
  }
  if (n <= 0 || !csr->spki) {
    OPENSSL_free(der);
    return Malformed("public key cannot be encoded");
  }
  ossl::BufferPtr owned(der);
  csr->spki_der.assign(der, der + n);
  return Status::Ok();
}

// --- The DER walk (docs/csr.md, "Parsing a request") ------------------------
//
// OpenSSL 3's d2i_X509_REQ decodes the request's key through an
// OSSL_DECODER context whose set-up costs more than the rest of a request's
// handling, so the request is walked here instead: strict DER (definite,
// minimal lengths, one-byte tags), nothing left over at any level. Subject,
// attributes and the signature algorithm are still decoded by OpenSSL's
// ASN.1 templates, which decode no key.

// One DER element read by ReadDer.
struct DerElement {
  std::span<const uint8_t> whole;     // identifier, length and contents
  std::span<const uint8_t> contents;  // BORROWED, as whole, from the input
};

// Reads one element whose identifier octet is `tag`. False on another tag,
// a multi-byte tag, an indefinite, non-minimal or over-long length, or too
// few bytes; the reader's position is then unspecified.
[[nodiscard]] bool ReadDer(ByteReader* r, uint8_t tag, DerElement* out) {
  const std::span<const uint8_t> start = r->rest();
  uint8_t id = 0, first = 0;
  if (!r->ReadU8(&id) || id != tag || (id & 0x1f) == 0x1f || !r->ReadU8(&first)) return false;
  size_t len = first;
  if (first & 0x80) {
    const int n = first & 0x7f;
    // 0x80 is BER's indefinite length; four length bytes are 4 GiB already.
    if (n == 0 || n > 4) return false;
    len = 0;
    for (int i = 0; i < n; ++i) {
      uint8_t b = 0;
      if (!r->ReadU8(&b) || (i == 0 && b == 0)) return false;
      len = (len << 8) | b;
    }
    if (len < 0x80) return false;  // fits the short form
  }
  const size_t header = start.size() - r->remaining();
  if (!r->ReadSpan(len, &out->contents)) return false;
  out->whole = start.first(header + len);
  return true;
}

// Whether `r` holds an element with identifier `tag` next.
bool PeekTag(const ByteReader& r, uint8_t tag) { return !r.empty() && r.rest()[0] == tag; }

constexpr uint8_t kDerInteger = 0x02, kDerBitString = 0x03, kDerNull = 0x05, kDerOid = 0x06;
constexpr uint8_t kDerSequence = 0x30, kDerSet = 0x31, kDerContext0 = 0xa0;

// OID contents (without tag and length) of the keys the fast path builds.
constexpr uint8_t kOidRsaEncryption[] = {0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01};
constexpr uint8_t kOidEcPublicKey[] = {0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01};
constexpr uint8_t kOidPrime256v1[] = {0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
constexpr uint8_t kOidSecp384r1[] = {0x2b, 0x81, 0x04, 0x00, 0x22};

// A positive DER INTEGER's magnitude. False for an empty, negative or
// non-minimal encoding.
bool PositiveInteger(std::span<const uint8_t> c, std::span<const uint8_t>* magnitude) {
  if (c.empty() || (c[0] & 0x80) != 0) return false;
  if (c.size() > 1 && c[0] == 0 && (c[1] & 0x80) == 0) return false;
  if (c[0] == 0) c = c.subspan(1);
  if (c.empty()) return false;  // zero
  *magnitude = c;
  return true;
}

// The fast path's X509_PUBKEY for the signer: the request's own algorithm
// and key bits, set as parts (X509_PUBKEY_set0_param decodes nothing).
std::shared_ptr<X509_PUBKEY> SpkiFromParts(int algorithm_nid, int param_type, int curve_nid,
                                           std::span<const uint8_t> key_bits) {
  ossl::X509PubkeyPtr spki(X509_PUBKEY_new());
  auto* bits = static_cast<unsigned char*>(OPENSSL_memdup(key_bits.data(), key_bits.size()));
  if (!spki || bits == nullptr) {
    OPENSSL_free(bits);
    throw std::bad_alloc();
  }
  void* param = param_type == V_ASN1_OBJECT ? OBJ_nid2obj(curve_nid) : nullptr;
  if (X509_PUBKEY_set0_param(spki.get(), OBJ_nid2obj(algorithm_nid), param_type, param, bits,
                             static_cast<int>(key_bits.size())) != 1) {
    OPENSSL_free(bits);
    throw std::runtime_error("X509_PUBKEY_set0_param failed: " + ossl::DrainErrors());
  }
  return std::shared_ptr<X509_PUBKEY>(spki.release(), X509_PUBKEY_free);
}

// The key of the request's SubjectPublicKeyInfo `spki` (one whole DER
// element), described in `csr` (key_*, curve, spki, spki_der). The keys
// kubelet makes, RSA with NULL parameters and EC on P-256 or P-384 with an
// uncompressed point, are built from their parts with EVP_PKEY_fromdata;
// their SPKI is already canonical and is kept byte for byte. Any other key
// (another curve, a compressed point, Ed25519, ...) goes through OpenSSL's
// own decoder, as every key did before: rare, and Check refuses most of them.
// Null key with the status: csr_malformed.
Result<ossl::PkeyPtr> KeyFromSpki(std::span<const uint8_t> spki, Csr* csr) {
  auto undecodable = [] { return Malformed("public key cannot be decoded"); };
  ByteReader outer(spki), info, alg;
  DerElement seq, alg_seq, oid, bit_string;
  if (!ReadDer(&outer, kDerSequence, &seq) || !outer.empty()) return undecodable();
  info = ByteReader(seq.contents);
  if (!ReadDer(&info, kDerSequence, &alg_seq) || !ReadDer(&info, kDerBitString, &bit_string) || !info.empty()) {
    return undecodable();
  }
  alg = ByteReader(alg_seq.contents);
  if (!ReadDer(&alg, kDerOid, &oid)) return undecodable();
  const std::span<const uint8_t> params = alg.rest();
  const std::span<const uint8_t> bits = bit_string.contents;
  const bool whole_bytes = !bits.empty() && bits[0] == 0;
  const std::span<const uint8_t> key_bytes = whole_bytes ? bits.subspan(1) : std::span<const uint8_t>();

  constexpr uint8_t kNullParams[] = {kDerNull, 0x00};
  if (std::ranges::equal(oid.contents, kOidRsaEncryption) && std::ranges::equal(params, kNullParams)) {
    // RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }.
    // SECURITY: the algorithm says RSA, so the bits must be an RSA key and
    // nothing else; a key of another kind under this OID is refused here.
    ByteReader r(key_bytes), fields;
    DerElement rsa, n, e;
    std::span<const uint8_t> n_mag, e_mag;
    if (!whole_bytes || !ReadDer(&r, kDerSequence, &rsa) || !r.empty()) return undecodable();
    fields = ByteReader(rsa.contents);
    if (!ReadDer(&fields, kDerInteger, &n) || !ReadDer(&fields, kDerInteger, &e) || !fields.empty() ||
        !PositiveInteger(n.contents, &n_mag) || !PositiveInteger(e.contents, &e_mag)) {
      return undecodable();
    }
    ossl::BnPtr n_bn(BN_bin2bn(n_mag.data(), static_cast<int>(n_mag.size()), nullptr));
    ossl::BnPtr e_bn(BN_bin2bn(e_mag.data(), static_cast<int>(e_mag.size()), nullptr));
    if (!n_bn || !e_bn) throw std::bad_alloc();
    ossl::PkeyPtr key = ossl::RsaPublicKey(n_bn.get(), e_bn.get());
    if (!key) return undecodable();
    csr->key_algorithm = KeyAlgorithm::kRsa;
    csr->key_type = "RSA";
    csr->key_bits = BN_num_bits(n_bn.get());
    csr->spki = SpkiFromParts(NID_rsaEncryption, V_ASN1_NULL, NID_undef, bits.subspan(1));
    csr->spki_der.assign(spki.begin(), spki.end());
    return key;
  }

  if (std::ranges::equal(oid.contents, kOidEcPublicKey)) {
    ByteReader p(params);
    DerElement curve;
    if (ReadDer(&p, kDerOid, &curve) && p.empty()) {
      const bool p256 = std::ranges::equal(curve.contents, kOidPrime256v1);
      const bool p384 = std::ranges::equal(curve.contents, kOidSecp384r1);
      const size_t field = p256 ? 32 : p384 ? 48 : 0;
      if (field != 0 && !key_bytes.empty() && key_bytes[0] == 0x04) {
        // SECURITY: an uncompressed point of this curve's exact size, and
        // setting it (EC_POINT_oct2point) refuses a point that is not on the
        // curve, as the decoder does (csr_test checks both).
        if (key_bytes.size() != 1 + 2 * field) return undecodable();
        const char* group = p256 ? "P-256" : "P-384";
        ossl::PkeyPtr key(EVP_PKEY_dup(ossl::EcCurveTemplate(group)));
        if (!key) throw std::runtime_error("EVP_PKEY_dup failed: " + ossl::DrainErrors());
        if (EVP_PKEY_set_octet_string_param(key.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, key_bytes.data(),
                                            key_bytes.size()) != 1) {
          return undecodable();
        }
        csr->key_algorithm = KeyAlgorithm::kEcdsa;
        csr->key_type = "EC";
        csr->key_bits = p256 ? 256 : 384;
        csr->curve = group;
        csr->spki = SpkiFromParts(NID_X9_62_id_ecPublicKey, V_ASN1_OBJECT,
                                  p256 ? NID_X9_62_prime256v1 : NID_secp384r1, bits.subspan(1));
        csr->spki_der.assign(spki.begin(), spki.end());
        return key;
      }
    }
  }

  // The slow path: OpenSSL's decoder, for every other key.
  const unsigned char* p = spki.data();
  ossl::X509PubkeyPtr own(d2i_X509_PUBKEY(nullptr, &p, static_cast<long>(spki.size())));
  if (!own || p != spki.data() + spki.size()) return undecodable();
  ossl::PkeyPtr key(X509_PUBKEY_get(own.get()));  // a new reference
  if (!key) return undecodable();
  if (Status s = DescribeKey(key.get(), csr); !s.ok()) return s;
  if (Status s = KeepSpki(std::move(own), key.get(), csr); !s.ok()) return s;
  return key;
}

}  // namespace

Result<Kind> KindFromSigner(std::string_view signer_name) {
  if (signer_name == kClientSignerName) return Kind::kClient;
  if (signer_name == kServingSignerName) return Kind::kServing;
  return Status::InvalidArgument("csr_signer_unknown",
                                 "signer " + Shown(signer_name) + " is not a kubelet signer");
}

std::string_view SignerName(Kind kind) {
  return kind == Kind::kClient ? kClientSignerName : kServingSignerName;
}

Result<Csr> ParseCsr(std::string_view pem) {
  if (pem.size() > kMaxCsrPemBytes) return Malformed("request is larger than 64 KiB");
  auto der = SinglePemBlock(pem);
  if (!der.ok()) return der.status();
  auto not_one = [] { return Malformed("not one DER PKCS#10 request"); };

  // CertificationRequest ::= SEQUENCE { certificationRequestInfo,
  //   signatureAlgorithm AlgorithmIdentifier, signature BIT STRING }
  // CertificationRequestInfo ::= SEQUENCE { version INTEGER, subject Name,
  //   subjectPKInfo SubjectPublicKeyInfo, attributes [0] IMPLICIT SET OF Attribute }
  ByteReader top(*der), request, info, attrs;
  DerElement request_seq, info_seq, version, subject, spki, attributes, sig_alg, signature;
  if (!ReadDer(&top, kDerSequence, &request_seq) || !top.empty()) return not_one();
  request = ByteReader(request_seq.contents);
  if (!ReadDer(&request, kDerSequence, &info_seq) || !ReadDer(&request, kDerSequence, &sig_alg) ||
      !ReadDer(&request, kDerBitString, &signature) || !request.empty()) {
    return not_one();
  }
  info = ByteReader(info_seq.contents);
  if (!ReadDer(&info, kDerInteger, &version) || !ReadDer(&info, kDerSequence, &subject) ||
      !ReadDer(&info, kDerSequence, &spki)) {
    return not_one();
  }
  // The attributes are not OPTIONAL in RFC 2986, but OpenSSL tolerates
  // encoders that leave them out, and so does this walk.
  std::vector<X509AttributePtr> attribute_list;
  if (PeekTag(info, kDerContext0)) {
    if (!ReadDer(&info, kDerContext0, &attributes)) return not_one();
    attrs = ByteReader(attributes.contents);
    while (!attrs.empty()) {
      DerElement a;
      if (!ReadDer(&attrs, kDerSequence, &a)) return not_one();
      const unsigned char* p = a.whole.data();
      X509AttributePtr attr(d2i_X509_ATTRIBUTE(nullptr, &p, static_cast<long>(a.whole.size())));
      if (!attr || p != a.whole.data() + a.whole.size()) return not_one();
      attribute_list.push_back(std::move(attr));
    }
  }
  if (!info.empty()) return not_one();
  const unsigned char* p = subject.whole.data();
  ossl::X509NamePtr name(d2i_X509_NAME(nullptr, &p, static_cast<long>(subject.whole.size())));
  if (!name || p != subject.whole.data() + subject.whole.size()) return not_one();
  p = sig_alg.whole.data();
  ossl::X509AlgorPtr algorithm(d2i_X509_ALGOR(nullptr, &p, static_cast<long>(sig_alg.whole.size())));
  if (!algorithm || p != sig_alg.whole.data() + sig_alg.whole.size()) return not_one();
  // The first octet of a BIT STRING counts the unused bits of its last one.
  if (signature.contents.empty() || signature.contents[0] > 7) return not_one();

  constexpr uint8_t kVersion1[] = {0x00};
  if (!std::ranges::equal(version.contents, kVersion1)) return Malformed("request version is not 1");

  Csr csr;
  auto key = KeyFromSpki(spki.whole, &csr);
  if (!key.ok()) return key.status();

  const ASN1_OBJECT* sig_obj = nullptr;
  X509_ALGOR_get0(&sig_obj, nullptr, nullptr, algorithm.get());
  int md_nid = NID_undef, pkey_nid = NID_undef;
  if (OBJ_find_sigid_algs(OBJ_obj2nid(sig_obj), &md_nid, &pkey_nid) != 1 ||
      !AcceptedSignatureAlgorithm(md_nid, pkey_nid)) {
    ERR_clear_error();
    return Status::VerificationFailed("csr_signature_invalid",
                                      "request is signed with a weak or unaccepted algorithm");
  }
  // The self-signature proves the requester holds the private key, so that
  // nobody can get a certificate for a key they merely copied. It covers the
  // CertificationRequestInfo exactly as sent, and is checked as
  // X509_REQ_verify checks it: the algorithm's key type is the key's, and a
  // signature with unused bits is no signature.
  bool verified = false;
  if (EVP_PKEY_is_a(key->get(), OBJ_nid2sn(pkey_nid)) && signature.contents[0] == 0) {
    const EVP_MD* md = md_nid == NID_undef ? nullptr : EVP_get_digestbynid(md_nid);
    ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
    if (!ctx) throw std::bad_alloc();
    const std::span<const uint8_t> sig = signature.contents.subspan(1);
    verified = (md_nid == NID_undef || md != nullptr) &&
               EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key->get()) == 1 &&
               EVP_DigestVerify(ctx.get(), sig.data(), sig.size(), info_seq.whole.data(), info_seq.whole.size()) == 1;
  }
  if (!verified) {
    ERR_clear_error();
    return Status::VerificationFailed("csr_signature_invalid",
                                      "request signature does not verify with its key");
  }
  if (Status s = ParseSubject(name.get(), &csr); !s.ok()) return s;
  if (Status s = ParseExtensions(attribute_list, &csr); !s.ok()) return s;
  csr.public_key = std::shared_ptr<evp_pkey_st>(key->release(), EVP_PKEY_free);
  return csr;
}

namespace {

constexpr std::string_view kOrganization = "system:nodes";
constexpr std::string_view kCommonNamePrefix = "system:node:";

// DNS names compare case-insensitively, and "a.example." names the same host
// as "a.example" (RFC 1034 3.1).
std::string NormalDns(std::string_view name) {
  std::string out(name);
  if (!out.empty() && out.back() == '.') out.pop_back();
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return out;
}

// An address as its family and bytes, so that every textual form of one
// address ("::1", "0:0:0:0:0:0:0:1") compares equal. Empty when unparsable.
std::string BinaryIp(const std::string& text) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, text.c_str(), buf) == 1) {
    return std::string("4") + std::string(reinterpret_cast<char*>(buf), 4);
  }
  if (inet_pton(AF_INET6, text.c_str(), buf) == 1) {
    return std::string("6") + std::string(reinterpret_cast<char*>(buf), 16);
  }
  return {};
}

// A usage list fits a kind when it holds no repeats, every entry is allowed
// and the required ones are there: {digital signature, <auth>} optionally
// plus key encipherment (which kubelet adds for RSA keys).
bool UsagesFit(const std::vector<std::string>& usages, std::string_view auth) {
  std::set<std::string_view> set(usages.begin(), usages.end());
  if (set.size() != usages.size()) return false;
  for (std::string_view u : set) {
    if (u != kUsageDigitalSignature && u != kUsageKeyEncipherment && u != auth) return false;
  }
  return set.count(kUsageDigitalSignature) == 1 && set.count(auth) == 1;
}


// The refusals one CSR collects, each rule family adding its own.
using Refuse = std::function<void(std::string reason, std::string message)>;

void CheckSubject(const Csr& csr, const MachineFacts& facts, const Refuse& refuse) {
  // Subject. kube-apiserver's Node authorizer and NodeRestriction admission
  // plugin key everything on "system:node:<name>" in group system:nodes: the
  // CN decides which Node object the kubelet may write, so it must be the
  // enrolled hostname of the machine that attested, and nothing else.
  if (csr.organizations.size() != 1 || csr.organizations[0] != kOrganization) {
    refuse("csr_subject_organization",
           csr.organizations.empty()
               ? "subject has no organization; exactly one, system:nodes, is required"
               : "subject organizations " + ShownList(csr.organizations) +
                     " are not exactly one system:nodes");
  }
  if (facts.hostname.empty()) {
    // Without a hostname "system:node:" itself would match.
    refuse("csr_subject_common_name", "machine has no enrolled hostname");
  } else if (csr.common_names.size() != 1 ||
             csr.common_names[0] != std::string(kCommonNamePrefix) + facts.hostname) {
    refuse("csr_subject_common_name",
           csr.common_names.empty()
               ? "subject has no common name"
               : "subject common names " + ShownList(csr.common_names) +
                     " are not exactly this machine's node name");
  }
  if (!csr.other_subject_attributes.empty()) {
    // The certificate would not carry them anyway, but a request asking for
    // them was not made by kubelet, which sets only O and CN.
    refuse("csr_subject_extra", "subject carries " + ShownList(csr.other_subject_attributes) +
                                    "; only O and CN are allowed");
  }
}

void CheckKey(const Csr& csr, const Refuse& refuse) {
  // Key. The kinds and sizes kubelet generates and every TLS peer accepts.
  bool key_ok = false;
  if (csr.key_algorithm == KeyAlgorithm::kRsa) {
    key_ok = csr.key_bits >= 2048 && csr.key_bits <= 8192;
  } else if (csr.key_algorithm == KeyAlgorithm::kEcdsa) {
    key_ok = csr.curve == "P-256" || csr.curve == "P-384";
  }
  if (!key_ok) {
    std::string what = csr.key_type;
    if (csr.key_algorithm == KeyAlgorithm::kRsa) what += "-" + std::to_string(csr.key_bits);
    if (csr.key_algorithm == KeyAlgorithm::kEcdsa) what += " " + (csr.curve.empty() ? "explicit-curve" : csr.curve);
    refuse("csr_key_unsupported", Shown(what) +
                                      " key; ECDSA P-256/P-384 or RSA 2048 to 8192 bits required");
  }
}

void CheckUsages(const Csr& csr, bool client, const std::vector<std::string>& usages, const Refuse& refuse) {
  // Usages: what the Kubernetes CSR object asks for, and what the request's
  // own extensions ask for if it has any (they do not reach the certificate,
  // whose extensions come from the profile, but a request that asks for more
  // than its kind allows is not a kubelet's).
  const std::string_view auth = client ? kUsageClientAuth : kUsageServerAuth;
  if (!UsagesFit(usages, auth)) {
    refuse("csr_usages", "usages " + ShownList(usages) + " are not " +
                             std::string(kUsageDigitalSignature) + " and " + std::string(auth) +
                             " (optionally with key encipherment)");
  }
  for (const auto& u : csr.key_usages) {
    if (u != kUsageDigitalSignature && u != kUsageKeyEncipherment) {
      refuse("csr_usages", "request's keyUsage extension asks for " + Shown(u));
    }
  }
  for (const auto& u : csr.extended_key_usages) {
    if (u != auth) refuse("csr_usages", "request's extKeyUsage extension asks for " + Shown(u));
  }
}

void CheckState(const MachineFacts& facts, bool client, const Refuse& refuse) {
  // State. A revoked, pending or merely enrolled machine gets nothing, even
  // with a session left over; a serving certificate only once the machine has
  // fetched its config (the kubelet asking for it runs from that config).
  const std::string& st = facts.state;
  const bool state_ok = client ? (st == "attested" || st == "provisioned" || st == "joined")
                               : (st == "provisioned" || st == "joined");
  if (!state_ok) {
    refuse("csr_state", std::string("machine state does not allow a ") +
                            (client ? "client" : "serving") + " certificate");
  }
}

// A client certificate: no SANs, right after an attestation, once per machine.
void CheckClientNames(const Csr& csr, size_t other_sans, const MachineFacts& facts, const RuleOptions& options,
                      int64_t now, const Refuse& refuse) {
  // A client certificate names a user (its subject); SANs would only make
  // it usable for something else.
  if (!csr.dns_names.empty() || !csr.ip_addresses.empty() || other_sans != 0) {
    refuse("csr_client_has_sans", "a client request carries subject alternative names");
  }
  // The approver's two-hour window, but counted from a TPM quote: a client
  // certificate is the machine's entry ticket, issued only right after it
  // proved who it is. A clock that stepped back (attestation "in the
  // future") is not the requester's doing and is not held against it.
  if (!facts.last_attested_at.has_value()) {
    refuse("csr_window_expired", "machine has not attested");
  } else if (now - *facts.last_attested_at > options.client_window_seconds) {
    refuse("csr_window_expired", "the machine's last attestation is older than the client "
                                 "CSR window; attest again");
  }
  // One join per machine: a second client certificate would be a second
  // identity for the same node, which only an operator reset may allow.
  if (facts.client_cert_issued_at.has_value()) {
    refuse("client_cert_already_issued",
           "a client certificate was already issued to this machine; an operator must reset it");
  }
}

// A serving certificate: DNS and IP SANs, each enrolled for this machine.
void CheckServingNames(const Csr& csr, size_t other_sans, const MachineFacts& facts, const Refuse& refuse) {
  if (csr.dns_names.empty() && csr.ip_addresses.empty()) {
    refuse("csr_serving_no_sans", "a serving request carries no DNS or IP SAN");
  }
  // Every name must be one the operator enrolled for this machine:
  // otherwise a node could obtain a serving certificate for another node's
  // name or address and intercept kube-apiserver's connections to it.
  std::set<std::string> enrolled_dns;
  if (!facts.hostname.empty()) enrolled_dns.insert(NormalDns(facts.hostname));
  for (const auto& d : facts.dns_names) {
    if (!d.empty()) enrolled_dns.insert(NormalDns(d));
  }
  for (const auto& d : csr.dns_names) {
    const std::string n = NormalDns(d);
    // A wildcard is never an enrolled name, even if one were enrolled by
    // mistake: it would cover other machines.
    if (n.empty() || n.find('*') != std::string::npos || enrolled_dns.count(n) == 0) {
      refuse("csr_san_not_enrolled", "DNS SAN " + Shown(d) + " is not enrolled for this machine");
    }
  }
  std::set<std::string> enrolled_ips;
  for (const auto& ip : facts.ip_addresses) {
    if (std::string b = BinaryIp(ip); !b.empty()) enrolled_ips.insert(std::move(b));
  }
  for (const auto& ip : csr.ip_addresses) {
    const std::string b = BinaryIp(ip);
    if (b.empty() || enrolled_ips.count(b) == 0) {
      refuse("csr_san_not_enrolled", "IP SAN " + Shown(ip) + " is not enrolled for this machine");
    }
  }
  if (other_sans != 0) {
    refuse("csr_serving_san_kind",
           "a serving request may carry only DNS and IP SANs; this one carries " +
               std::to_string(other_sans) + " email, URI or other names");
  }
}

}  // namespace

std::vector<Refusal> Check(const Csr& csr, Kind kind, const std::vector<std::string>& usages,
                           const MachineFacts& facts, const RuleOptions& options,
                           bool tpm_key_proven, int64_t now) {
  std::vector<Refusal> out;
  const Refuse refuse = [&out](std::string reason, std::string message) {  // reason-helper: VerificationFailed
    out.push_back(Refusal{std::move(reason), std::move(message)});
  };
  const bool client = kind == Kind::kClient;
  CheckSubject(csr, facts, refuse);
  CheckKey(csr, refuse);
  CheckUsages(csr, client, usages, refuse);
  CheckState(facts, client, refuse);
  const size_t other_sans = csr.emails.size() + csr.uris.size() + csr.other_names.size();
  if (client) {
    CheckClientNames(csr, other_sans, facts, options, now, refuse);
  } else {
    CheckServingNames(csr, other_sans, facts, refuse);
  }
  // The client certificate is the machine's identity to the API server: that
  // is the key a pool can require to live in the TPM. The serving key stays
  // a file (kubelet's TLS server reads it from disk), so it is not asked.
  if (kind == Kind::kClient && options.require_tpm_key && !tpm_key_proven) {
    refuse("csr_tpm_key_required", "this pool requires a TPM-resident client key with a TPM2_Certify proof");
  }
  return out;
}

Status CheckTpmKey(std::span<const uint8_t> key_tpm2b_public,
                   std::span<const uint8_t> certify_info,
                   std::span<const uint8_t> certify_signature,
                   std::span<const uint8_t> ak_tpm2b_public, std::span<const uint8_t> nonce,
                   const Csr& csr) {
  // Without a nonce an old certify could be replayed for a new request.
  if (nonce.empty()) {
    return Status::InvalidArgument("csr_tpm_nonce_missing", "no session nonce to check the certify against");
  }
  auto key = attest::ParseTpm2bPublic(key_tpm2b_public);
  if (!key.ok()) return key.status().Annotate("certified key");
  auto ak = attest::ParseTpm2bPublic(ak_tpm2b_public);
  if (!ak.ok()) return ak.status().Annotate("attestation key");
  // A certify means something only when the signer is a restricted key: a
  // restricted key refuses to sign data that starts with TPM_GENERATED, so
  // nobody outside the TPM can forge the attestation structure.
  if (Status s = attest::CheckAkPolicy(*ak); !s.ok()) return s;
  auto verifier = attest::VerifyKey::FromTpmPublic(*ak);
  if (!verifier.ok()) return verifier.status();
  auto certified = attest::VerifyCertify(*verifier, certify_info, certify_signature, *key, nonce);
  if (!certified.ok()) return certified.status();

  // The key must never leave this TPM (fixedTPM, fixedParent), must have been
  // generated inside it (sensitiveDataOrigin: not an imported copy of a key
  // that exists elsewhere), and must be able to sign TLS handshakes, which a
  // restricted key cannot.
  constexpr uint32_t kRequired = attest::kAttrFixedTpm | attest::kAttrFixedParent |
                                 attest::kAttrSensitiveDataOrigin | attest::kAttrSign;
  if ((key->attributes & kRequired) != kRequired || (key->attributes & attest::kAttrRestricted)) {
    return Status::VerificationFailed(
        "csr_tpm_key_attributes",
        "certified key is not a fixedTPM, fixedParent, sensitiveDataOrigin, unrestricted signing key");
  }

  auto spki = attest::SubjectPublicKeyInfoFromTpmPublic(*key);
  if (!spki.ok()) return spki.status().Annotate("certified key");
  if (*spki != csr.spki_der) {
    return Status::VerificationFailed("csr_tpm_key_mismatch",
                                      "the request's key is not the certified TPM key");
  }
  return Status::Ok();
}

namespace {

Status ProofInvalid(std::string message) {
  ERR_clear_error();
  return Status::VerificationFailed("renewal_proof_invalid", std::move(message));
}

}  // namespace

Result<PresentedCertificate> ParsePresentedCertificate(std::string_view pem) {
  if (pem.empty() || pem.size() > kMaxCsrPemBytes) return ProofInvalid("the certificate is empty or too large");
  // One certificate, the one the appliance sent: a chain or a key beside it
  // is not what was issued.
  auto block = OnePemBlock(pem, "CERTIFICATE");
  if (!block.ok()) return ProofInvalid("the certificate: " + block.status().message());
  Bytes der = std::move(block).value();
  const unsigned char* p = der.data();
  ossl::X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (!cert || p != der.data() + der.size()) return ProofInvalid("not one DER certificate");

  PresentedCertificate out;
  // The signer writes 16 random bytes; BN drops leading zero bytes, so pad.
  ossl::BnPtr bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  unsigned char serial[16];
  if (!bn || BN_is_negative(bn.get()) || BN_num_bytes(bn.get()) > static_cast<int>(sizeof(serial)) ||
      BN_bn2binpad(bn.get(), serial, sizeof(serial)) != static_cast<int>(sizeof(serial))) {
    return ProofInvalid("the certificate's serial is not one this appliance issues");
  }
  out.serial_hex = hex::Encode(std::span<const uint8_t>(serial, sizeof(serial)));
  ossl::PkeyPtr key(X509_get_pubkey(cert.get()));  // a new reference
  if (!key) return ProofInvalid("the certificate's key cannot be decoded");
  const int type = EVP_PKEY_get_base_id(key.get());
  if (type != EVP_PKEY_EC && type != EVP_PKEY_RSA) return ProofInvalid("the certificate's key is not EC or RSA");
  out.public_key = std::shared_ptr<evp_pkey_st>(key.release(), EVP_PKEY_free);
  out.der = std::move(der);
  return out;
}

Status CheckRenewalSignature(const PresentedCertificate& cert, std::span<const uint8_t> message,
                             std::span<const uint8_t> signature) {
  if (!cert.public_key || signature.empty()) return ProofInvalid("no signature");
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) throw std::bad_alloc();
  EVP_PKEY_CTX* pctx = nullptr;  // BORROWED from ctx
  if (EVP_DigestVerifyInit(ctx.get(), &pctx, EVP_sha256(), nullptr, cert.public_key.get()) != 1) {
    return ProofInvalid("the certificate's key cannot verify");
  }
  // RSA: PKCS#1 v1.5 exactly, as wire::RenewalProof says; never PSS.
  if (EVP_PKEY_get_base_id(cert.public_key.get()) == EVP_PKEY_RSA &&
      EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1) {
    return ProofInvalid("the certificate's key cannot verify");
  }
  // SECURITY: this signature is the proof that the machine still holds the
  // key of the certificate it renews; without it, anyone who copied the
  // (public) certificate could renew it for a key of their own.
  if (EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(), message.size()) != 1) {
    return ProofInvalid("the renewal signature does not verify with the certificate's key");
  }
  ERR_clear_error();
  return Status::Ok();
}

bool RenewalDue(int64_t not_before, int64_t not_after, double fraction, int64_t now) {
  if (now >= not_after) return true;
  const double validity = static_cast<double>(not_after) - static_cast<double>(not_before);
  // In doubles: a year of seconds times a fraction fits without overflow.
  return static_cast<double>(now) >= static_cast<double>(not_after) - fraction * validity;
}

}  // namespace rackgate::core::csr
