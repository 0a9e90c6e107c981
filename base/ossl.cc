// OpenSSL error draining for attest/ logs.
#include "base/ossl.h"

#include <openssl/err.h>

namespace rackgate::ossl {

std::string DrainErrors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace rackgate::ossl
