// Loading the TLS certificate chain and key from PEM files, and checking that they match.
#include "daemon/tls_credentials.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "daemon/unique_fd.h"

namespace rackgate::daemon {

namespace {

constexpr size_t kMaxPemBytes = 1 << 20;
constexpr unsigned kMaxCertificateChain = 16;

std::string Errno(int e) { return std::strerror(e); }

Result<std::string> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::IoError("tls_credentials_unreadable", path + ": " + Errno(errno));
  }
  FdCloser closer(fd);
  std::string out;
  char buf[8192];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IoError("tls_credentials_unreadable", path + ": " + Errno(errno));
    }
    if (n == 0) break;
    if (out.size() > kMaxPemBytes - static_cast<size_t>(n)) {
      return Status::InvalidArgument("tls_credentials_invalid", path + ": larger than 1 MiB");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

gnutls_datum_t Datum(const std::string& s) {
  gnutls_datum_t d;
  d.data = reinterpret_cast<unsigned char*>(const_cast<char*>(s.data()));
  d.size = static_cast<unsigned int>(s.size());
  return d;
}

// The DER SubjectPublicKeyInfo of a public key, or empty.
std::string SpkiDer(gnutls_pubkey_t pub) {
  gnutls_datum_t out{nullptr, 0};
  if (gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &out) < 0) return "";
  std::string der(reinterpret_cast<const char*>(out.data), out.size);
  gnutls_free(out.data);
  return der;
}

}  // namespace

Result<std::shared_ptr<const TlsCredentials>> LoadTlsCredentials(const std::string& cert_path,
                                                                 const std::string& key_path) {
  auto cert_pem = ReadSmallFile(cert_path);
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadSmallFile(key_path);
  if (!key_pem.ok()) return key_pem.status();
  auto creds = std::make_shared<TlsCredentials>();

  std::vector<gnutls_pcert_st> chain(kMaxCertificateChain);
  unsigned int n = kMaxCertificateChain;
  gnutls_datum_t cert_datum = Datum(*cert_pem);
  int rc = gnutls_pcert_list_import_x509_raw(chain.data(), &n, &cert_datum, GNUTLS_X509_FMT_PEM, 0);
  if (rc < 0 || n == 0) {
    return Status::InvalidArgument("tls_credentials_invalid",
                                   cert_path + ": no usable PEM certificate chain (" +
                                       (rc < 0 ? gnutls_strerror(rc) : "empty") + ")");
  }
  chain.resize(n);
  creds->chain = std::move(chain);

  if ((rc = gnutls_privkey_init(&creds->key)) < 0) {
    creds->key = nullptr;
    throw std::bad_alloc();
  }
  gnutls_datum_t key_datum = Datum(*key_pem);
  rc = gnutls_privkey_import_x509_raw(creds->key, &key_datum, GNUTLS_X509_FMT_PEM, nullptr, 0);
  // The key text sits in a std::string that is about to be freed; wipe it.
  std::fill(key_pem->begin(), key_pem->end(), '\0');
  if (rc < 0) {
    return Status::InvalidArgument("tls_credentials_invalid",
                                   key_path + ": not a usable unencrypted PEM private key (" +
                                       gnutls_strerror(rc) + ")");
  }

  // SECURITY: a key that does not belong to the leaf certificate would make
  // every handshake fail; refuse it here so a bad reload keeps the old pair.
  gnutls_pubkey_t from_key = nullptr;
  if (gnutls_pubkey_init(&from_key) < 0) throw std::bad_alloc();
  std::string key_spki;
  if (gnutls_pubkey_import_privkey(from_key, creds->key, 0, 0) >= 0) key_spki = SpkiDer(from_key);
  gnutls_pubkey_deinit(from_key);
  const std::string cert_spki = SpkiDer(creds->chain[0].pubkey);
  if (key_spki.empty() || key_spki != cert_spki) {
    return Status::InvalidArgument("tls_credentials_invalid",
                                   key_path + " does not match the certificate in " + cert_path);
  }
  return std::shared_ptr<const TlsCredentials>(std::move(creds));
}

}  // namespace rackgate::daemon
