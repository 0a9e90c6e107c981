// Appliance CA and serving certificate creation.
#include "core/pki.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <stdexcept>

#include "attest/ek_identity.h"
#include "base/ossl.h"
#include "base/hex.h"

namespace rackgate::core {

namespace {

using ossl::BioPtr;
using ossl::ExtPtr;
using ossl::PkeyPtr;
using ossl::X509Ptr;

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("pki: ") + what);
}

PkeyPtr NewKey() {
  PkeyPtr k(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  Check(k != nullptr, "key generation");
  return k;
}

void AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  Check(ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1, "extension");
}

X509Ptr NewCert(EVP_PKEY* key, const std::string& cn, int days, long backdate_seconds) {
  X509Ptr cert(X509_new());
  Check(cert != nullptr && X509_set_version(cert.get(), 2) == 1, "x509");
  // 159-bit positive random serial (RFC 5280 allows up to 20 octets).
  unsigned char serial[20];
  Check(RAND_bytes(serial, sizeof(serial)) == 1, "serial");
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  Check(bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr, "serial");
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -backdate_seconds);
  X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr);
  X509_NAME* name = X509_get_subject_name(cert.get());
  Check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) == 1,
        "subject");
  Check(X509_set_pubkey(cert.get(), key) == 1, "pubkey");
  return cert;
}

// Writes `text` to `path` with `mode`, via a temporary file and rename.
Status WriteFile(const std::string& path, const std::string& text, mode_t mode, bool exclusive) {
  if (exclusive && ::access(path.c_str(), F_OK) == 0) {
    return Status::InvalidArgument("pki_exists", path + " exists; refusing to overwrite it");
  }
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::IoError("file_unwritable", "cannot write " + tmp);
  bool ok = ::fchmod(fd, mode) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::IoError("file_unwritable", "cannot write " + path);
  }
  return Status::Ok();
}

std::string CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_X509(bio.get(), cert) == 1, "pem");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1, "pem key");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  std::string s(data, static_cast<size_t>(n));
  return s;
}

// Creates the directory holding `path` with `mode`. A private directory
// (mode 0700) that exists with more than that, and is ours, is narrowed to
// it: a key's directory made 0755 by an older init (issue 32) is private
// after the next one.
Status MakeParentDir(const std::string& path, mode_t mode) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return Status::Ok();
  std::string dir = path.substr(0, slash);
  if (::mkdir(dir.c_str(), mode) == 0) return Status::Ok();
  if (errno != EEXIST) {
    return Status::IoError("file_unwritable", "cannot create directory " + dir + ": " + std::strerror(errno));
  }
  struct stat st;
  if (mode == 0700 && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
      (st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0) {
    return Status::IoError("file_unwritable", "cannot make " + dir + " private: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

Status CreateCa(const CaOptions& options, const std::string& cert_path, const std::string& key_path) {
  for (const auto& p : {cert_path, key_path}) {
    if (::access(p.c_str(), F_OK) == 0) {
      return Status::InvalidArgument("pki_exists", p + " exists; refusing to overwrite it");
    }
    if (Status s = MakeParentDir(p, 0700); !s.ok()) return s;
  }
  PkeyPtr key = NewKey();
  X509Ptr cert = NewCert(key.get(), options.common_name, options.validity_days, 300);
  Check(X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) == 1, "issuer");
  AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  AddExt(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
  Check(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, "sign");
  // The key first: a CA certificate without its key is useless, a key
  // without its certificate is recreated by running init again.
  if (Status s = WriteFile(key_path, KeyPem(key.get()), 0600, true); !s.ok()) return s;
  return WriteFile(cert_path, CertPem(cert.get()), 0644, true);
}

Status IssueServingCertificate(const ServingCertOptions& options, const std::string& ca_cert_path,
                               const std::string& ca_key_path, const std::string& cert_path,
                               const std::string& key_path) {
  if (options.dns_names.empty() && options.ip_addresses.empty()) {
    return Status::InvalidArgument("pki_invalid", "a serving certificate needs at least one name or address");
  }
  std::string san;
  for (const auto& d : options.dns_names) {
    if (d.empty() || d.find_first_of(",\n\r ") != std::string::npos) {
      return Status::InvalidArgument("pki_invalid", "bad DNS name '" + d + "'");
    }
    san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  }
  for (const auto& ip : options.ip_addresses) {
    unsigned char buf[16];
    if (inet_pton(AF_INET, ip.c_str(), buf) != 1 && inet_pton(AF_INET6, ip.c_str(), buf) != 1) {
      return Status::InvalidArgument("pki_invalid", "bad IP address '" + ip + "'");
    }
    san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  }
  FILE* f = std::fopen(ca_cert_path.c_str(), "r");
  if (!f) return Status::IoError("file_unreadable", "cannot read " + ca_cert_path);
  X509Ptr ca(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  f = std::fopen(ca_key_path.c_str(), "r");
  if (!f) return Status::IoError("file_unreadable", "cannot read " + ca_key_path);
  PkeyPtr ca_key(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!ca || !ca_key || X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    return Status::InvalidArgument("pki_invalid", "CA certificate and key do not belong together");
  }
  // The key's directory first, and private: the certificate usually sits
  // beside the key (tls/), and whichever made the directory set its mode
  // (docs/systemd.md: ca/ and tls/ are 0700).
  if (Status s = MakeParentDir(key_path, 0700); !s.ok()) return s;
  if (Status s = MakeParentDir(cert_path, 0755); !s.ok()) return s;
  PkeyPtr key = NewKey();
  std::string cn = options.dns_names.empty() ? options.ip_addresses.front() : options.dns_names.front();
  X509Ptr cert = NewCert(key.get(), cn, options.validity_days, 300);
  Check(X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get())) == 1, "issuer");
  AddExt(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE");
  AddExt(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature");
  AddExt(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth");
  AddExt(cert.get(), ca.get(), NID_subject_alt_name, san);
  AddExt(cert.get(), ca.get(), NID_subject_key_identifier, "hash");
  AddExt(cert.get(), ca.get(), NID_authority_key_identifier, "keyid:always");
  Check(X509_sign(cert.get(), ca_key.get(), EVP_sha256()) > 0, "sign");
  if (Status s = WriteFile(key_path, KeyPem(key.get()), 0600, false); !s.ok()) return s;
  return WriteFile(cert_path, CertPem(cert.get()) + CertPem(ca.get()), 0644, false);
}

Result<std::string> CertificateFingerprint(const std::string& pem_path) {
  FILE* f = std::fopen(pem_path.c_str(), "r");
  if (!f) return Status::IoError("file_unreadable", "cannot read " + pem_path);
  X509Ptr cert(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!cert) return Status::InvalidArgument("pki_invalid", pem_path + " holds no PEM certificate");
  unsigned char md[32];
  unsigned int n = 0;
  Check(X509_digest(cert.get(), EVP_sha256(), md, &n) == 1, "digest");
  return hex::Encode(std::span<const uint8_t>(md, n));
}

Result<ServingCertOptions> ReadServingCertNames(const std::string& pem_path) {
  FILE* f = std::fopen(pem_path.c_str(), "r");
  if (!f) return Status::IoError("file_unreadable", "cannot read " + pem_path);
  X509Ptr cert(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!cert) return Status::InvalidArgument("pki_invalid", pem_path + " holds no PEM certificate");
  ServingCertOptions out;
  ossl::GeneralNamesPtr names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names.get(), i);
    if (gn->type == GEN_DNS) {
      const ASN1_IA5STRING* dns = gn->d.dNSName;
      out.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                                 static_cast<size_t>(ASN1_STRING_length(dns)));
    } else if (gn->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = gn->d.iPAddress;
      const int len = ASN1_STRING_length(ip);
      char text[INET6_ADDRSTRLEN] = {};
      if ((len != 4 && len != 16) ||
          ::inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text, sizeof text) == nullptr) {
        return Status::InvalidArgument("pki_invalid", pem_path + " has an IP address SAN of " +
                                                          std::to_string(len) + " bytes");
      }
      out.ip_addresses.emplace_back(text);
    }
  }
  if (out.dns_names.empty() && out.ip_addresses.empty()) {
    return Status::InvalidArgument("pki_invalid", pem_path + " names no DNS name or IP address");
  }
  return out;
}

namespace {

Result<X509Ptr> ReadFirstCert(const std::string& pem_path) {
  FILE* f = std::fopen(pem_path.c_str(), "r");
  if (!f) return Status::IoError("file_unreadable", "cannot read " + pem_path);
  X509Ptr cert(PEM_read_X509(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!cert) return Status::InvalidArgument("pki_invalid", pem_path + " holds no PEM certificate");
  return cert;
}

}  // namespace

Result<CaCertInfo> ReadCaCertificate(const std::string& pem_path) {
  auto cert = ReadFirstCert(pem_path);
  if (!cert.ok()) return cert.status();
  if (X509_check_ca(cert->get()) == 0) {
    return Status::InvalidArgument("pki_invalid", pem_path + " is not a CA certificate");
  }
  CaCertInfo out;
  out.pem = CertPem(cert->get());
  unsigned char md[32];
  unsigned int n = 0;
  Check(X509_digest(cert->get(), EVP_sha256(), md, &n) == 1, "digest");
  out.sha256 = hex::Encode(std::span<const uint8_t>(md, n));
  BioPtr bio(BIO_new(BIO_s_mem()));
  Check(bio != nullptr, "bio");
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert->get()), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  out.subject.assign(data, static_cast<size_t>(len));
  struct tm tm = {};
  Check(ASN1_TIME_to_tm(X509_get0_notAfter(cert->get()), &tm) == 1, "notAfter");
  out.not_after = static_cast<int64_t>(timegm(&tm));
  return out;
}

Status CheckCaKeyPair(const std::string& cert_path, const std::string& key_path) {
  auto cert = ReadFirstCert(cert_path);
  if (!cert.ok()) return cert.status();
  FILE* f = std::fopen(key_path.c_str(), "r");
  if (!f) return Status::IoError("file_unreadable", "cannot read " + key_path);
  PkeyPtr key(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
  std::fclose(f);
  if (!key || X509_check_private_key(cert->get(), key.get()) != 1) {
    return Status::InvalidArgument("pki_invalid", key_path + " is not the key of " + cert_path);
  }
  return Status::Ok();
}

Result<bool> SignedBy(const std::string& cert_path, const std::string& ca_path) {
  auto cert = ReadFirstCert(cert_path);
  if (!cert.ok()) return cert.status();
  auto ca = ReadFirstCert(ca_path);
  if (!ca.ok()) return ca.status();
  EVP_PKEY* ca_key = X509_get0_pubkey(ca->get());  // BORROWED from the certificate
  return ca_key != nullptr && X509_verify(cert->get(), ca_key) == 1;
}

}  // namespace rackgate::core
