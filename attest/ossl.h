// OpenSSL handle ownership for attest/: one unique_ptr alias per owning type,
// each with a stateless deleter. Wrap only what a `new`/`get1`/`dup` call
// returns; `get0` results are BORROWED and must not be wrapped.
#ifndef RACKGATE_ATTEST_OSSL_H_
#define RACKGATE_ATTEST_OSSL_H_

#if !defined(RACKGATE_ATTEST_INTERNAL)
#error "attest/ossl.h is internal to attest/; include attest/attest.h instead"
#endif

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <string>

namespace rackgate::ossl {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};

#define RACKGATE_OSSL_PTR(Name, Type, FreeFn) \
  using Name = std::unique_ptr<Type, Deleter<Type, FreeFn>>

RACKGATE_OSSL_PTR(BnPtr, BIGNUM, BN_free);
RACKGATE_OSSL_PTR(BnCtxPtr, BN_CTX, BN_CTX_free);
RACKGATE_OSSL_PTR(PkeyPtr, EVP_PKEY, EVP_PKEY_free);
RACKGATE_OSSL_PTR(PkeyCtxPtr, EVP_PKEY_CTX, EVP_PKEY_CTX_free);
RACKGATE_OSSL_PTR(MdCtxPtr, EVP_MD_CTX, EVP_MD_CTX_free);
RACKGATE_OSSL_PTR(CipherCtxPtr, EVP_CIPHER_CTX, EVP_CIPHER_CTX_free);
RACKGATE_OSSL_PTR(KdfPtr, EVP_KDF, EVP_KDF_free);
RACKGATE_OSSL_PTR(KdfCtxPtr, EVP_KDF_CTX, EVP_KDF_CTX_free);
RACKGATE_OSSL_PTR(MacPtr, EVP_MAC, EVP_MAC_free);
RACKGATE_OSSL_PTR(MacCtxPtr, EVP_MAC_CTX, EVP_MAC_CTX_free);
RACKGATE_OSSL_PTR(ParamBldPtr, OSSL_PARAM_BLD, OSSL_PARAM_BLD_free);
RACKGATE_OSSL_PTR(ParamPtr, OSSL_PARAM, OSSL_PARAM_free);
RACKGATE_OSSL_PTR(EcdsaSigPtr, ECDSA_SIG, ECDSA_SIG_free);
RACKGATE_OSSL_PTR(EcGroupPtr, EC_GROUP, EC_GROUP_free);
RACKGATE_OSSL_PTR(EcPointPtr, EC_POINT, EC_POINT_free);
RACKGATE_OSSL_PTR(X509Ptr, X509, X509_free);
RACKGATE_OSSL_PTR(X509StorePtr, X509_STORE, X509_STORE_free);
RACKGATE_OSSL_PTR(X509StoreCtxPtr, X509_STORE_CTX, X509_STORE_CTX_free);
RACKGATE_OSSL_PTR(BioPtr, BIO, BIO_free_all);

#undef RACKGATE_OSSL_PTR

// Owns a STACK_OF(X509) and the certificates in it.
struct X509StackFree {
  void operator()(STACK_OF(X509)* s) const { sk_X509_pop_free(s, X509_free); }
};
using X509StackPtr = std::unique_ptr<STACK_OF(X509), X509StackFree>;

// The text of the most recent OpenSSL errors on this thread, and clears them.
// For logs only: it may name internals, so never send it to a client.
std::string DrainErrors();

}  // namespace rackgate::ossl

#endif  // RACKGATE_ATTEST_OSSL_H_
