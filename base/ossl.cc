// OpenSSL error draining for attest/ logs, and keys built from their parts.
#include "base/ossl.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/param_build.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace rackgate::ossl {

namespace {

EVP_PKEY* BuildCurveTemplate(const char* group) {
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, 0) != 1) {
    throw std::bad_alloc();
  }
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld.get()));
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* raw = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_KEY_PARAMETERS, params.get()) != 1) {
    throw std::runtime_error(std::string("building the ") + group + " template failed: " + DrainErrors());
  }
  return raw;  // kept for the process's life
}

}  // namespace

EVP_PKEY* EcCurveTemplate(const char* group) {
  static EVP_PKEY* const kP256 = BuildCurveTemplate("P-256");
  static EVP_PKEY* const kP384 = BuildCurveTemplate("P-384");
  static EVP_PKEY* const kP521 = BuildCurveTemplate("P-521");
  if (std::strcmp(group, "P-256") == 0) return kP256;
  if (std::strcmp(group, "P-384") == 0) return kP384;
  if (std::strcmp(group, "P-521") == 0) return kP521;
  throw std::invalid_argument(std::string("no curve template for ") + group);
}

PkeyPtr RsaPublicKey(const BIGNUM* n, const BIGNUM* e) {
  ParamBldPtr bld(OSSL_PARAM_BLD_new());
  if (!bld || OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, n) != 1 ||
      OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, e) != 1) {
    throw std::runtime_error("building RSA params failed: " + DrainErrors());
  }
  ParamPtr params(OSSL_PARAM_BLD_to_param(bld.get()));
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr));
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1) {
    throw std::runtime_error("EVP_PKEY_fromdata_init failed: " + DrainErrors());
  }
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    DrainErrors();
    return nullptr;
  }
  return PkeyPtr(raw);
}

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
