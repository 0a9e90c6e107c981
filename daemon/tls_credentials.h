// The certificate chain and key that rackgated's TLS listeners serve, loaded from PEM files.
#ifndef RACKGATE_DAEMON_TLS_CREDENTIALS_H_
#define RACKGATE_DAEMON_TLS_CREDENTIALS_H_

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::daemon {

// The chain and key GnuTLS serves, swapped whole on reload. GnuTLS borrows
// the pointers the retrieve callback returns for the session's lifetime, so
// each connection pins the generation it was given (a shared_ptr) until MHD
// reports it closed, which happens after gnutls_deinit. Immutable once
// loaded; owns its GnuTLS objects.
struct TlsCredentials {
  std::vector<gnutls_pcert_st> chain;
  gnutls_privkey_t key = nullptr;

  TlsCredentials() = default;
  TlsCredentials(const TlsCredentials&) = delete;
  TlsCredentials& operator=(const TlsCredentials&) = delete;
  ~TlsCredentials() {
    for (auto& c : chain) gnutls_pcert_deinit(&c);
    if (key != nullptr) gnutls_privkey_deinit(key);
  }
};

// The PEM certificate chain at cert_path (leaf first, at most 16
// certificates) and the unencrypted PEM private key at key_path, each at
// most 1 MiB. kIoError ("tls_credentials_unreadable") when a file cannot be
// read; kInvalidArgument ("tls_credentials_invalid") when it is too large,
// holds no usable chain or key, or the key does not belong to the leaf.
// Throws std::bad_alloc when GnuTLS cannot allocate.
Result<std::shared_ptr<const TlsCredentials>> LoadTlsCredentials(const std::string& cert_path,
                                                                 const std::string& key_path);

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_TLS_CREDENTIALS_H_
