// OpenSSL handle ownership for daemon/ (the appliance PKI and CSR signing):
// one unique_ptr alias per owning type, each with a stateless deleter. Wrap
// only what a `new`/`get1`/`dup`/`d2i`/`PEM_read` call returns; `get0`
// results are BORROWED and must not be wrapped. attest/ has its own set in
// attest/ossl.h, which is internal to attest/ on purpose (no module's header
// leaks into another), so daemon/ keeps this one.
#ifndef RACKGATE_DAEMON_OSSL_H_
#define RACKGATE_DAEMON_OSSL_H_

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace rackgate::daemon::ossl {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};

#define RACKGATE_DAEMON_OSSL_PTR(Name, Type, FreeFn) \
  using Name = std::unique_ptr<Type, Deleter<Type, FreeFn>>

RACKGATE_DAEMON_OSSL_PTR(PkeyPtr, EVP_PKEY, EVP_PKEY_free);
RACKGATE_DAEMON_OSSL_PTR(PkeyCtxPtr, EVP_PKEY_CTX, EVP_PKEY_CTX_free);
RACKGATE_DAEMON_OSSL_PTR(X509Ptr, X509, X509_free);
RACKGATE_DAEMON_OSSL_PTR(X509ReqPtr, X509_REQ, X509_REQ_free);
RACKGATE_DAEMON_OSSL_PTR(X509NamePtr, X509_NAME, X509_NAME_free);
RACKGATE_DAEMON_OSSL_PTR(ExtPtr, X509_EXTENSION, X509_EXTENSION_free);
RACKGATE_DAEMON_OSSL_PTR(GeneralNamesPtr, GENERAL_NAMES, GENERAL_NAMES_free);
RACKGATE_DAEMON_OSSL_PTR(GeneralNamePtr, GENERAL_NAME, GENERAL_NAME_free);
RACKGATE_DAEMON_OSSL_PTR(EkuPtr, EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free);
RACKGATE_DAEMON_OSSL_PTR(BitStringPtr, ASN1_BIT_STRING, ASN1_BIT_STRING_free);
RACKGATE_DAEMON_OSSL_PTR(OctetStringPtr, ASN1_OCTET_STRING, ASN1_OCTET_STRING_free);
RACKGATE_DAEMON_OSSL_PTR(AuthorityKeyIdPtr, AUTHORITY_KEYID, AUTHORITY_KEYID_free);
RACKGATE_DAEMON_OSSL_PTR(BnPtr, BIGNUM, BN_free);
RACKGATE_DAEMON_OSSL_PTR(BioPtr, BIO, BIO_free_all);

#undef RACKGATE_DAEMON_OSSL_PTR

// Owns a STACK_OF(X509_EXTENSION) and the extensions in it (what
// X509_REQ_get_extensions returns).
struct ExtStackFree {
  void operator()(STACK_OF(X509_EXTENSION)* s) const {
    sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free);
  }
};
using ExtStackPtr = std::unique_ptr<STACK_OF(X509_EXTENSION), ExtStackFree>;

// Memory that OpenSSL allocated for us (i2d_* output, ASN1_STRING_to_UTF8).
struct OpensslFree {
  void operator()(unsigned char* p) const { OPENSSL_free(p); }
};
using BufferPtr = std::unique_ptr<unsigned char, OpensslFree>;

}  // namespace rackgate::daemon::ossl

#endif  // RACKGATE_DAEMON_OSSL_H_
