// The appliance CA bundle: validated with OpenSSL, written atomically.
#include "agent/ca_bundle.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "base/files.h"
#include "base/ossl.h"
#include "wire/protocol.h"

namespace rackgate::agent {

namespace {

Status Invalid(const std::string& why) {
  ERR_clear_error();
  return Status::InvalidArgument("ca_bundle_invalid", "the appliance's CA bundle is refused: " + why);
}

Status Unwritable(const std::string& what) {
  return Status::IoError("file_unwritable", what + ": " + std::strerror(errno));
}

}  // namespace

Status ValidateCaBundle(const std::string& pem) {
  if (pem.empty() || pem.size() > wire::kMaxCaBundleBytes) return Invalid("empty or too large");
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw std::bad_alloc();
  size_t certs = 0;
  for (;;) {
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* data = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &data, &len) != 1) break;
    const std::string block = name != nullptr ? name : "";
    const unsigned char* p = data;
    ossl::X509Ptr cert(block == "CERTIFICATE" ? d2i_X509(nullptr, &p, len) : nullptr);
    const bool whole = cert && p == data + len;
    OPENSSL_free(name);
    OPENSSL_free(header);
    OPENSSL_free(data);
    // SECURITY: only certificates of CAs become trust anchors; a key or a
    // leaf in the bundle is an appliance bug, never written.
    if (block != "CERTIFICATE") return Invalid("it holds a " + block.substr(0, 32) + " block");
    if (!whole) return Invalid("a certificate does not parse");
    if (X509_check_ca(cert.get()) == 0) return Invalid("a certificate is not a CA");
    if (++certs > wire::kMaxCaBundleCerts) return Invalid("more than 8 certificates");
  }
  ERR_clear_error();  // the end of the data, as PEM_read_bio reports it
  if (certs == 0) return Invalid("it holds no certificate");
  return Status::Ok();
}

Result<CaFileUpdate> UpdateCaFile(const std::string& path, const std::string& bundle) {
  if (auto current = ReadFile(path, wire::kMaxCaBundleBytes + 1);
      current.ok() && std::string(current->begin(), current->end()) == bundle) {
    return CaFileUpdate::kUnchanged;
  }
  if (Status s = ValidateCaBundle(bundle); !s.ok()) return s;
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return Unwritable("cannot write beside " + path);
  size_t done = 0;
  bool ok = ::fchmod(fd, 0644) == 0;
  while (ok && done < bundle.size()) {
    const ssize_t n = ::write(fd, bundle.data() + done, bundle.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Unwritable("cannot replace " + path);
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename itself survives a power cut only once the directory is on disk.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return CaFileUpdate::kReplaced;
}

}  // namespace rackgate::agent
