// The local cluster-CA signer and the cluster CA's files.
#include "core/signer.h"

#include <arpa/inet.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <ctime>
#include <mutex>
#include <set>
#include <stdexcept>

#include "attest/tpm.h"
#include "base/ossl.h"
#include "core/pki.h"
#include "base/hex.h"

namespace rackgate::core::csr {

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    ERR_clear_error();
    throw std::runtime_error(std::string("signer: ") + what);
  }
}

Status CaInvalid(std::string message) {
  ERR_clear_error();
  return Status::InvalidArgument("ca_invalid", std::move(message));
}

// An encrypted key must fail to load, never prompt on the daemon's terminal
// (OpenSSL's default callback reads a passphrase from the tty).
int NoPassphrase(char*, int, int, void*) { return -1; }

Result<ossl::X509Ptr> ReadCertificate(const std::string& path) {
  ossl::BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    ERR_clear_error();
    return Status::IoError("file_unreadable", "cannot read " + path);
  }
  ossl::X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr));
  if (!cert) return CaInvalid(path + " holds no PEM certificate");
  return cert;
}

Result<ossl::PkeyPtr> ReadPrivateKey(const std::string& path) {
  ossl::BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    ERR_clear_error();
    return Status::IoError("file_unreadable", "cannot read " + path);
  }
  ossl::PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  // Never the OpenSSL error text here: it could quote the key file.
  if (!key) return CaInvalid(path + " holds no unencrypted PEM private key");
  return key;
}

Result<int64_t> UnixTime(const ASN1_TIME* t) {
  struct tm tm = {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return CaInvalid("certificate validity is unreadable");
  return static_cast<int64_t>(timegm(&tm));
}

std::string CertPem(X509* cert) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  Check(bio && PEM_write_bio_X509(bio.get(), cert) == 1, "pem");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// A CA checked for everything that does not change with time, plus what
// signing needs from it.
struct CheckedCa {
  ossl::X509Ptr cert;
  ossl::PkeyPtr key;
  const EVP_MD* md = nullptr;
  int64_t not_before = 0;
  int64_t not_after = 0;
};

Result<CheckedCa> LoadCa(const std::string& cert_path, const std::string& key_path) {
  auto cert = ReadCertificate(cert_path);
  if (!cert.ok()) return cert.status();
  auto key = ReadPrivateKey(key_path);
  if (!key.ok()) return key.status();
  X509* c = cert->get();
  const uint32_t flags = X509_get_extension_flags(c);
  if (flags & EXFLAG_INVALID) return CaInvalid("CA certificate has malformed extensions");
  // Without CA:TRUE and keyCertSign, every verifier would reject what we
  // issue; better to refuse the import than to hand out dead certificates.
  if (!(flags & EXFLAG_CA)) return CaInvalid("certificate is not a CA (basicConstraints CA:TRUE missing)");
  if (!(flags & EXFLAG_KUSAGE) || !(X509_get_key_usage(c) & KU_KEY_CERT_SIGN)) {
    return CaInvalid("CA certificate's keyUsage lacks keyCertSign");
  }

  CheckedCa ca;
  EVP_PKEY* pub = X509_get0_pubkey(c);  // BORROWED from the certificate
  if (pub == nullptr) return CaInvalid("CA public key is unreadable");
  if (EVP_PKEY_get_base_id(pub) == EVP_PKEY_RSA) {
    if (EVP_PKEY_get_bits(pub) < 2048) {
      return Status::InvalidArgument("ca_key_unsupported", "CA RSA key is shorter than 2048 bits");
    }
    ca.md = EVP_sha256();
  } else if (EVP_PKEY_get_base_id(pub) == EVP_PKEY_EC) {
    char group[80] = {};
    size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(pub, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), &len) != 1) {
      ERR_clear_error();
      return Status::InvalidArgument("ca_key_unsupported", "CA EC key has no named curve");
    }
    const int nid = OBJ_sn2nid(group);
    if (nid == NID_X9_62_prime256v1) {
      ca.md = EVP_sha256();
    } else if (nid == NID_secp384r1) {
      // Match the hash to the curve's strength (RFC 5480 4).
      ca.md = EVP_sha384();
    } else {
      return Status::InvalidArgument("ca_key_unsupported", "CA EC key is not P-256 or P-384");
    }
  } else {
    return Status::InvalidArgument("ca_key_unsupported", "CA key is neither RSA nor ECDSA");
  }
  if (X509_check_private_key(c, key->get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("ca_key_mismatch", "the private key does not belong to the CA certificate");
  }
  auto nb = UnixTime(X509_get0_notBefore(c));
  if (!nb.ok()) return nb.status();
  auto na = UnixTime(X509_get0_notAfter(c));
  if (!na.ok()) return na.status();
  ca.not_before = *nb;
  ca.not_after = *na;
  ca.cert = std::move(*cert);
  ca.key = std::move(*key);
  return ca;
}

Status CheckCurrent(const CheckedCa& ca, int64_t now) {
  if (ca.not_after <= now) return Status::InvalidArgument("ca_expired", "the cluster CA has expired");
  if (ca.not_before > now) return Status::InvalidArgument("ca_invalid", "the cluster CA is not valid yet");
  return Status::Ok();
}

void AddConfExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ossl::ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  Check(ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1, "extension");
}

// The authority key identifier: the CA's own SKI when it has one, else the
// RFC 5280 4.2.1.2 method-1 hash of its key, so imported CAs without an SKI
// still get chains that path builders can follow.
void AddAuthorityKeyId(X509* cert, X509* ca) {
  ossl::AuthorityKeyIdPtr akid(AUTHORITY_KEYID_new());
  Check(akid != nullptr, "akid");
  const ASN1_OCTET_STRING* ski = X509_get0_subject_key_id(ca);  // BORROWED
  if (ski != nullptr) {
    akid->keyid = ASN1_OCTET_STRING_dup(ski);
  } else {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    Check(X509_pubkey_digest(ca, EVP_sha1(), md, &n) == 1, "akid hash");
    akid->keyid = ASN1_OCTET_STRING_new();
    Check(akid->keyid != nullptr && ASN1_OCTET_STRING_set(akid->keyid, md, static_cast<int>(n)) == 1,
          "akid");
  }
  Check(akid->keyid != nullptr &&
            X509_add1_ext_i2d(cert, NID_authority_key_identifier, akid.get(), 0, X509V3_ADD_DEFAULT) == 1,
        "akid");
}

std::string NormalDns(const std::string& name) {
  std::string out = name;
  if (!out.empty() && out.back() == '.') out.pop_back();
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return out;
}

// Builds the serving SAN from the request's DNS and IP names. Built from
// GENERAL_NAMEs, never from a config string, so no value can smuggle in a
// second entry. DNS names go in canonical form (lower case, no trailing dot:
// RFC 5280 4.2.1.6 "preferred name syntax"). Returns false when nothing is
// left to put in it.
bool AddSubjectAltName(X509* cert, const Csr& csr) {
  ossl::GeneralNamesPtr names(GENERAL_NAMES_new());
  Check(names != nullptr, "san");
  std::set<std::string> seen;
  for (const auto& d : csr.dns_names) {
    const std::string n = NormalDns(d);
    if (n.empty() || !seen.insert("d" + n).second) continue;
    ossl::GeneralNamePtr gn(GENERAL_NAME_new());
    ASN1_IA5STRING* s = ASN1_IA5STRING_new();
    Check(gn && s && ASN1_STRING_set(s, n.data(), static_cast<int>(n.size())) == 1, "san dns");
    GENERAL_NAME_set0_value(gn.get(), GEN_DNS, s);
    Check(sk_GENERAL_NAME_push(names.get(), gn.get()) > 0, "san push");
    gn.release();  // owned by `names` now
  }
  for (const auto& ip : csr.ip_addresses) {
    unsigned char buf[16];
    int len = 0;
    if (inet_pton(AF_INET, ip.c_str(), buf) == 1) {
      len = 4;
    } else if (inet_pton(AF_INET6, ip.c_str(), buf) == 1) {
      len = 16;
    } else {
      continue;
    }
    if (!seen.insert("i" + std::string(reinterpret_cast<char*>(buf), static_cast<size_t>(len))).second) {
      continue;
    }
    ossl::GeneralNamePtr gn(GENERAL_NAME_new());
    ASN1_OCTET_STRING* s = ASN1_OCTET_STRING_new();
    Check(gn && s && ASN1_OCTET_STRING_set(s, buf, len) == 1, "san ip");
    GENERAL_NAME_set0_value(gn.get(), GEN_IPADD, s);
    Check(sk_GENERAL_NAME_push(names.get(), gn.get()) > 0, "san push");
    gn.release();
  }
  if (sk_GENERAL_NAME_num(names.get()) == 0) return false;
  Check(X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) == 1, "san");
  return true;
}

void AddSubjectEntry(X509_NAME* name, const char* field, const std::string& value) {
  Check(X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.data()),
                                   static_cast<int>(value.size()), -1, 0) == 1,
        "subject");
}

// Puts the request's SubjectPublicKeyInfo into the certificate as it is:
// algorithm, parameters and key bits copied, no key decoded or encoded
// (X509_set_pubkey runs OpenSSL 3's encoder and decoder, as costly as the
// signature). The SPKI is canonical (ParseCsr saw to it).
void CopySpki(const X509_PUBKEY* from, X509* cert) {
  ASN1_OBJECT* algorithm = nullptr;
  const unsigned char* bits = nullptr;
  int len = 0;
  X509_ALGOR* alg = nullptr;
  Check(X509_PUBKEY_get0_param(&algorithm, &bits, &len, &alg, from) == 1 && alg != nullptr && len > 0, "pubkey");
  int param_type = 0;
  const void* param = nullptr;
  X509_ALGOR_get0(nullptr, &param_type, &param, alg);
  void* param_copy = nullptr;
  if (param_type == V_ASN1_OBJECT) {
    param_copy = OBJ_dup(static_cast<const ASN1_OBJECT*>(param));
    Check(param_copy != nullptr, "pubkey");
  } else {
    Check(param_type == V_ASN1_NULL || param_type == V_ASN1_UNDEF, "pubkey");
  }
  ASN1_OBJECT* algorithm_copy = OBJ_dup(algorithm);
  auto* bits_copy = static_cast<unsigned char*>(OPENSSL_memdup(bits, static_cast<size_t>(len)));
  if (algorithm_copy == nullptr || bits_copy == nullptr ||
      X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(cert), algorithm_copy, param_type, param_copy, bits_copy, len) !=
          1) {
    ASN1_OBJECT_free(algorithm_copy);
    if (param_type == V_ASN1_OBJECT) ASN1_OBJECT_free(static_cast<ASN1_OBJECT*>(param_copy));
    OPENSSL_free(bits_copy);
    Check(false, "pubkey");
  }
}

}  // namespace

Profile DefaultProfile(Kind kind) {
  Profile p;
  p.kind = kind;
  return p;
}

struct LocalCaSigner::Impl {
  // OpenSSL caches derived data (extension flags, key identifiers) inside
  // X509 objects on first use, so even "reading" the CA can write to it; one
  // lock around signing keeps that safe. Signing takes well under a
  // millisecond, far below the rate at which kubelets ask.
  std::mutex mu;
  CheckedCa ca;
  std::string ca_pem;
};

LocalCaSigner::LocalCaSigner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LocalCaSigner::~LocalCaSigner() = default;

const std::string& LocalCaSigner::ca_pem() const { return impl_->ca_pem; }

Result<std::unique_ptr<LocalCaSigner>> LocalCaSigner::Load(const std::string& cert_path,
                                                           const std::string& key_path) {
  auto ca = LoadCa(cert_path, key_path);
  if (!ca.ok()) return ca.status();
  if (Status s = CheckCurrent(*ca, static_cast<int64_t>(std::time(nullptr))); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->ca_pem = CertPem(ca->cert.get());
  impl->ca = std::move(*ca);
  return std::unique_ptr<LocalCaSigner>(new LocalCaSigner(std::move(impl)));
}

Result<Issued> LocalCaSigner::Sign(const Csr& csr, const Profile& profile, int64_t now) {
  // A day of backdating covers any sane clock skew; more would make a
  // certificate valid before the request existed.
  if (profile.validity_seconds <= 0 || profile.backdate_seconds < 0 ||
      profile.backdate_seconds > 86400) {
    return Status::InvalidArgument("csr_profile_invalid", "validity or backdate out of range");
  }
  if (csr.common_names.size() != 1) {
    return Status::VerificationFailed("csr_subject_common_name", "request has not exactly one common name");
  }
  if (!csr.public_key) return Status::InvalidArgument("csr_malformed", "request has no public key");

  std::lock_guard<std::mutex> lock(impl_->mu);
  const CheckedCa& ca = impl_->ca;
  if (ca.not_after <= now) return Status::InvalidArgument("ca_expired", "the cluster CA has expired");

  Issued issued;
  issued.not_before = now - profile.backdate_seconds;
  // A certificate outliving its issuer would fail verification from the
  // CA's expiry on, while looking valid; stop at the CA's notAfter instead.
  issued.not_after = std::min(now + profile.validity_seconds, ca.not_after);

  ossl::X509Ptr cert(X509_new());
  Check(cert && X509_set_version(cert.get(), X509_VERSION_3) == 1, "x509");

  // A random 128-bit serial: unpredictable serials keep a chosen-prefix
  // collision from being aimed at a certificate we will issue. Positive and
  // never zero (RFC 5280 4.1.2.2).
  unsigned char serial[16];
  do {
    Check(RAND_bytes(serial, sizeof(serial)) == 1, "serial");
  } while (std::all_of(std::begin(serial), std::end(serial), [](unsigned char b) { return b == 0; }));
  ossl::BnPtr bn(BN_bin2bn(serial, sizeof(serial), nullptr));
  Check(bn && BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) != nullptr, "serial");
  issued.serial_hex = hex::Encode(std::span<const uint8_t>(serial, sizeof(serial)));

  Check(ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(issued.not_before)) &&
            ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(issued.not_after)),
        "validity");

  // Only O and CN: the identity Kubernetes authorizes on. Check has refused
  // anything else; the certificate would not carry it regardless.
  X509_NAME* subject = X509_get_subject_name(cert.get());  // BORROWED from cert
  for (const auto& o : csr.organizations) AddSubjectEntry(subject, "O", o);
  AddSubjectEntry(subject, "CN", csr.common_names.front());
  Check(X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.cert.get())) == 1, "issuer");
  if (csr.spki) {
    CopySpki(csr.spki.get(), cert.get());
  } else {
    Check(X509_set_pubkey(cert.get(), csr.public_key.get()) == 1, "pubkey");
  }

  X509* issuer = ca.cert.get();
  AddConfExtension(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE");
  // keyEncipherment only means something for RSA key transport; an ECDSA key
  // cannot encipher.
  AddConfExtension(cert.get(), issuer, NID_key_usage,
                   csr.key_algorithm == KeyAlgorithm::kRsa ? "critical,digitalSignature,keyEncipherment"
                                                           : "critical,digitalSignature");
  AddConfExtension(cert.get(), issuer, NID_ext_key_usage,
                   profile.kind == Kind::kClient ? "clientAuth" : "serverAuth");
  if (profile.kind == Kind::kServing && !AddSubjectAltName(cert.get(), csr)) {
    return Status::VerificationFailed("csr_serving_no_sans", "a serving request carries no DNS or IP SAN");
  }
  AddConfExtension(cert.get(), issuer, NID_subject_key_identifier, "hash");
  AddAuthorityKeyId(cert.get(), issuer);

  Check(X509_sign(cert.get(), ca.key.get(), ca.md) > 0, "sign");
  issued.certificate_pem = CertPem(cert.get());
  issued.ca_pem = impl_->ca_pem;
  return issued;
}

Status GenerateClusterCa(const std::string& common_name, int validity_days,
                         const std::string& cert_path, const std::string& key_path) {
  if (common_name.empty() || validity_days <= 0) {
    return Status::InvalidArgument("ca_invalid", "a CA needs a common name and a positive validity");
  }
  // The appliance CA and a lab cluster CA have the same shape; one creator.
  CaOptions options;
  options.common_name = common_name;
  options.validity_days = validity_days;
  return CreateCa(options, cert_path, key_path);
}

Status ValidateClusterCa(const std::string& cert_pem_path, const std::string& key_pem_path) {
  auto ca = LoadCa(cert_pem_path, key_pem_path);
  if (!ca.ok()) return ca.status();
  return CheckCurrent(*ca, static_cast<int64_t>(std::time(nullptr)));
}

std::string_view ClusterCaStageName(ClusterCaStage stage) {
  switch (stage) {
    case ClusterCaStage::kNone: return "none";
    case ClusterCaStage::kPrepared: return "prepared";
    case ClusterCaStage::kSwitching: return "switching";
    case ClusterCaStage::kSwitched: return "switched";
  }
  return "none";
}

ClusterCaFiles ClusterCaFilesIn(const std::string& dir) {
  ClusterCaFiles f;
  f.dir = dir;
  f.cert = dir + "/ca.crt";
  f.key = dir + "/ca.key";
  f.next_cert = dir + "/next.crt";
  f.next_key = dir + "/next.key";
  f.previous_cert = dir + "/previous.crt";
  f.previous_key = dir + "/previous.key";
  f.retired = dir + "/retired";
  return f;
}

namespace {

bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string SubjectLine(X509* cert) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  Check(bio && X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0, "subject");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

// One CA certificate of the rotation: its PEM, expiry and subject.
Status AddToBundle(const std::string& path, ClusterCaState* state, bool current) {
  auto cert = ReadCertificate(path);
  if (!cert.ok()) return cert.status();
  auto not_after = UnixTime(X509_get0_notAfter(cert->get()));
  if (!not_after.ok()) return not_after.status();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  Check(X509_digest(cert->get(), EVP_sha256(), md, &n) == 1, "fingerprint");
  const std::string sha256 = hex::Encode(std::span<const uint8_t>(md, n));
  // Once in the bundle (mid-switch, previous.crt is ca.crt's hard link).
  if (!current && sha256 == state->sha256) return Status::Ok();
  state->bundle_pem += CertPem(cert->get());
  (current ? state->not_after : state->other_not_after) = *not_after;
  (current ? state->subject : state->other_subject) = SubjectLine(cert->get());
  (current ? state->sha256 : state->other_sha256) = sha256;
  return Status::Ok();
}

}  // namespace

Result<ClusterCaState> ReadClusterCaState(const std::string& cert_path) {
  const std::string dir = std::filesystem::path(cert_path).parent_path().string();
  const ClusterCaFiles f = ClusterCaFilesIn(dir.empty() ? "." : dir);
  const bool next = FileExists(f.next_cert), previous = FileExists(f.previous_cert);
  ClusterCaState state;
  state.stage = next && previous ? ClusterCaStage::kSwitching
                : next           ? ClusterCaStage::kPrepared
                : previous       ? ClusterCaStage::kSwitched
                                 : ClusterCaStage::kNone;
  if (Status s = AddToBundle(cert_path, &state, true); !s.ok()) return s;
  // An interrupted switch trusts all three until it is finished: the
  // signer may hold either CA by then.
  if (next) {
    if (Status s = AddToBundle(f.next_cert, &state, false); !s.ok()) return s;
  }
  if (previous) {
    if (Status s = AddToBundle(f.previous_cert, &state, false); !s.ok()) return s;
  }
  return state;
}

}  // namespace rackgate::core::csr
