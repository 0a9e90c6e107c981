// OpenSSL handle ownership, for every part of rackgate that calls OpenSSL
// (attest/, the appliance's PKI and CSR signing, the agent): one unique_ptr
// alias per owning type, each with a stateless deleter. Wrap only what a
// `new`/`get1`/`dup`/`d2i`/`PEM_read` call returns; `get0` results are
// BORROWED and must not be wrapped. OpenSSL is every module's own
// dependency, so sharing this header leaks no module's types into another.
#ifndef RACKGATE_BASE_OSSL_H_
#define RACKGATE_BASE_OSSL_H_

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

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
RACKGATE_OSSL_PTR(X509ReqPtr, X509_REQ, X509_REQ_free);
RACKGATE_OSSL_PTR(X509NamePtr, X509_NAME, X509_NAME_free);
RACKGATE_OSSL_PTR(X509PubkeyPtr, X509_PUBKEY, X509_PUBKEY_free);
RACKGATE_OSSL_PTR(Asn1IntegerPtr, ASN1_INTEGER, ASN1_INTEGER_free);
RACKGATE_OSSL_PTR(X509AlgorPtr, X509_ALGOR, X509_ALGOR_free);
RACKGATE_OSSL_PTR(ExtPtr, X509_EXTENSION, X509_EXTENSION_free);
RACKGATE_OSSL_PTR(GeneralNamesPtr, GENERAL_NAMES, GENERAL_NAMES_free);
RACKGATE_OSSL_PTR(GeneralNamePtr, GENERAL_NAME, GENERAL_NAME_free);
RACKGATE_OSSL_PTR(EkuPtr, EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free);
RACKGATE_OSSL_PTR(BitStringPtr, ASN1_BIT_STRING, ASN1_BIT_STRING_free);
RACKGATE_OSSL_PTR(OctetStringPtr, ASN1_OCTET_STRING, ASN1_OCTET_STRING_free);
RACKGATE_OSSL_PTR(AuthorityKeyIdPtr, AUTHORITY_KEYID, AUTHORITY_KEYID_free);

#undef RACKGATE_OSSL_PTR

// Owns a STACK_OF(X509) and the certificates in it.
struct X509StackFree {
  void operator()(STACK_OF(X509)* s) const { sk_X509_pop_free(s, X509_free); }
};
using X509StackPtr = std::unique_ptr<STACK_OF(X509), X509StackFree>;

// Owns a STACK_OF(X509_EXTENSION) and the extensions in it (what
// X509_REQ_get_extensions returns).
struct ExtStackFree {
  void operator()(STACK_OF(X509_EXTENSION)* s) const { sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free); }
};
using ExtStackPtr = std::unique_ptr<STACK_OF(X509_EXTENSION), ExtStackFree>;

// Memory that OpenSSL allocated for us (i2d_* output, ASN1_STRING_to_UTF8).
struct OpensslFree {
  void operator()(unsigned char* p) const { OPENSSL_free(p); }
};
using BufferPtr = std::unique_ptr<unsigned char, OpensslFree>;

// A key of the named curve ("P-256", "P-384") holding only the curve, built
// once per process and kept for its life: EVP_PKEY_fromdata builds the
// curve's EC_GROUP from its name every time (a modular inversion and a
// Montgomery context, most of a public key's cost), EVP_PKEY_dup of this
// only copies it. Read-only (EVP_PKEY_dup only reads it), so shared by every
// thread. Another name throws std::invalid_argument.
EVP_PKEY* EcCurveTemplate(const char* group);

// An RSA public key of modulus `n` and exponent `e`, built from its parts
// with EVP_PKEY_fromdata (no decoder). Null when OpenSSL refuses the values;
// throws only when it cannot allocate.
PkeyPtr RsaPublicKey(const BIGNUM* n, const BIGNUM* e);

// The text of the most recent OpenSSL errors on this thread, and clears them.
// For logs only: it may name internals, so never send it to a client.
std::string DrainErrors();

}  // namespace rackgate::ossl

#endif  // RACKGATE_BASE_OSSL_H_
