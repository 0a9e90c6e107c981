#include "agent/csr.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "attest/testing/soft_tpm.h"

namespace rackgate::agent {
namespace {

struct ReqFree {
  void operator()(X509_REQ* r) const { X509_REQ_free(r); }
};
using ReqPtr = std::unique_ptr<X509_REQ, ReqFree>;

ReqPtr ParsePem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509_REQ* req = PEM_read_bio_X509_REQ(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return ReqPtr(req);
}

// The subject as "O=...,CN=..." in encoding order.
std::string SubjectText(X509_REQ* req) {
  X509_NAME* name = X509_REQ_get_subject_name(req);
  std::string out;
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const int nid = OBJ_obj2nid(X509_NAME_ENTRY_get_object(e));
    ASN1_STRING* v = X509_NAME_ENTRY_get_data(e);
    if (!out.empty()) out += ",";
    out += std::string(OBJ_nid2sn(nid)) + "=" +
           std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(v)), ASN1_STRING_length(v));
  }
  return out;
}

CsrSubject ClientSubject() { return CsrSubject{"system:nodes", "system:node:node-1", {}, {}}; }

TEST(Csr, ClientCsrHasExactSubjectAndNoExtensions) {
  PkeyPtr key = GenerateP256Key();
  auto pem = BuildCsrPem(ClientSubject(), key.get(), SoftwareSigner(key.get()));
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  ReqPtr req = ParsePem(*pem);
  ASSERT_TRUE(req);
  EXPECT_EQ(SubjectText(req.get()), "O=system:nodes,CN=system:node:node-1");
  EXPECT_EQ(X509_REQ_get_version(req.get()), X509_REQ_VERSION_1);
  // No extensions, and no attributes at all (extensionRequest would be one).
  EXPECT_EQ(X509_REQ_get_attr_count(req.get()), 0);
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req.get());
  EXPECT_EQ(exts == nullptr ? 0 : sk_X509_EXTENSION_num(exts), 0);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  // Signed by the key, with ecdsa-with-SHA256.
  EXPECT_EQ(X509_REQ_verify(req.get(), key.get()), 1);
  EXPECT_EQ(X509_REQ_get_signature_nid(req.get()), NID_ecdsa_with_SHA256);
  EVP_PKEY* pub = X509_REQ_get0_pubkey(req.get());
  ASSERT_NE(pub, nullptr);
  EXPECT_EQ(EVP_PKEY_eq(pub, key.get()), 1);
}

TEST(Csr, ServingCsrCarriesOnlyTheSans) {
  PkeyPtr key = GenerateP256Key();
  CsrSubject s{"system:nodes", "system:node:node-1", {"node-1"}, {"10.0.0.11", "fd00::11"}};
  auto pem = BuildCsrPem(s, key.get(), SoftwareSigner(key.get()));
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  ReqPtr req = ParsePem(*pem);
  ASSERT_TRUE(req);
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req.get());
  ASSERT_NE(exts, nullptr);
  ASSERT_EQ(sk_X509_EXTENSION_num(exts), 1);
  EXPECT_EQ(OBJ_obj2nid(X509_EXTENSION_get_object(sk_X509_EXTENSION_value(exts, 0))), NID_subject_alt_name);
  auto* names = static_cast<GENERAL_NAMES*>(X509V3_get_d2i(exts, NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(names, nullptr);
  ASSERT_EQ(sk_GENERAL_NAME_num(names), 3);
  int type = 0;
  auto* dns = static_cast<ASN1_IA5STRING*>(GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(names, 0), &type));
  EXPECT_EQ(type, GEN_DNS);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)), ASN1_STRING_length(dns)),
            "node-1");
  auto* ip4 = static_cast<ASN1_OCTET_STRING*>(GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(names, 1), &type));
  EXPECT_EQ(type, GEN_IPADD);
  EXPECT_EQ(ASN1_STRING_length(ip4), 4);
  auto* ip6 = static_cast<ASN1_OCTET_STRING*>(GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(names, 2), &type));
  EXPECT_EQ(ASN1_STRING_length(ip6), 16);
  GENERAL_NAMES_free(names);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  EXPECT_EQ(X509_REQ_verify(req.get(), key.get()), 1);
}

TEST(Csr, RefusesBadAddressesAndNames) {
  PkeyPtr key = GenerateP256Key();
  CsrSubject s{"system:nodes", "system:node:n", {"n"}, {"10.0.0.300"}};
  EXPECT_EQ(BuildCsrPem(s, key.get(), SoftwareSigner(key.get())).status().reason(), "csr_invalid");
  s = CsrSubject{"system:nodes", "system:node:n", {"bad name"}, {}};
  EXPECT_EQ(BuildCsrPem(s, key.get(), SoftwareSigner(key.get())).status().reason(), "csr_invalid");
  s = CsrSubject{"system:nodes", "", {}, {}};
  EXPECT_EQ(BuildCsrPem(s, key.get(), SoftwareSigner(key.get())).status().reason(), "csr_invalid");
}

TEST(Csr, ASignerWithTheWrongKeyIsCaught) {
  PkeyPtr key = GenerateP256Key();
  PkeyPtr other = GenerateP256Key();
  auto pem = BuildCsrPem(ClientSubject(), key.get(), SoftwareSigner(other.get()));
  EXPECT_EQ(pem.status().reason(), "csr_signature_invalid");
}

TEST(Csr, ASignerFailureIsPassedOn) {
  PkeyPtr key = GenerateP256Key();
  DigestSigner failing = [](std::span<const uint8_t>) -> Result<Bytes> {
    return Status::TpmError("tpm_command_failed", "TPM2_Sign: nope");
  };
  auto pem = BuildCsrPem(ClientSubject(), key.get(), failing);
  EXPECT_EQ(pem.status().code(), Status::Code::kTpmError);
}

TEST(Csr, PrivateKeyPemIsSec1AndParsesBack) {
  PkeyPtr key = GenerateP256Key();
  const std::string pem = PrivateKeyPem(key.get());
  EXPECT_EQ(pem.rfind("-----BEGIN EC PRIVATE KEY-----", 0), 0u);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* back = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(EVP_PKEY_eq(back, key.get()), 1);
  EVP_PKEY_free(back);
}

// The TPM path: the CSR's key comes from a TPM2B_PUBLIC and the signature
// from a TPMT_SIGNATURE (here from the software TPM stand-in).
TEST(Csr, TpmPublicAreaAndSignatureConvert) {
  testing::SoftKeySpec spec;
  spec.type = attest::kAlgEcc;
  spec.scheme = attest::kAlgEcdsa;
  spec.attributes = attest::kAttrFixedTpm | attest::kAttrFixedParent | attest::kAttrSensitiveDataOrigin |
                    attest::kAttrUserWithAuth | attest::kAttrSign;
  testing::SoftKey soft = testing::SoftKey::Generate(spec);
  auto pub = PublicKeyFromTpm2bPublic(soft.tpm2b_public());
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(EVP_PKEY_eq(pub->get(), soft.pkey()), 1);

  const std::vector<uint8_t> msg = {'h', 'e', 'l', 'l', 'o'};
  auto der = EcdsaDerFromTpmtSignature(soft.Sign(msg));
  ASSERT_TRUE(der.ok()) << der.status().ToString();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ASSERT_EQ(EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, pub->get()), 1);
  EXPECT_EQ(EVP_DigestVerify(ctx, der->data(), der->size(), msg.data(), msg.size()), 1);
  EVP_MD_CTX_free(ctx);

  auto csr = BuildCsrPem(ClientSubject(), pub->get(), SoftwareSigner(soft.pkey()));
  ASSERT_TRUE(csr.ok()) << csr.status().ToString();
}

TEST(Csr, TpmConversionsRefuseOtherKeys) {
  testing::SoftKey rsa = testing::SoftKey::Generate(testing::SoftKeySpec{});
  EXPECT_FALSE(PublicKeyFromTpm2bPublic(rsa.tpm2b_public()).ok());
  EXPECT_FALSE(EcdsaDerFromTpmtSignature(rsa.Sign(std::vector<uint8_t>{1, 2, 3})).ok());
  EXPECT_FALSE(PublicKeyFromTpm2bPublic(std::vector<uint8_t>{0, 1, 2}).ok());
}

TEST(Csr, IssuedCertificateMustBeForOurKeyAndName) {
  PkeyPtr key = GenerateP256Key();
  PkeyPtr other = GenerateP256Key();
  // A self-signed certificate standing in for the cluster CA's answer.
  X509* cert = X509_new();
  X509_set_version(cert, X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 7);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key.get());
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("system:nodes"), -1,
                             -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("system:node:node-1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  ASSERT_GT(X509_sign(cert, key.get(), EVP_sha256()), 0);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  const std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  X509_free(cert);

  auto ok = CheckIssuedCertificate(pem, key.get(), "system:node:node-1");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, pem);
  EXPECT_FALSE(CheckIssuedCertificate(pem, other.get(), "system:node:node-1").ok());
  EXPECT_FALSE(CheckIssuedCertificate(pem, key.get(), "system:node:node-2").ok());
  EXPECT_FALSE(CheckIssuedCertificate("not a pem", key.get(), "system:node:node-1").ok());
  EXPECT_FALSE(NormalizeCertificatesPem("").ok());
  EXPECT_FALSE(NormalizeCertificatesPem(pem.substr(0, pem.size() / 2)).ok());
  auto two = NormalizeCertificatesPem(pem + pem);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, pem + pem);
}

}  // namespace
}  // namespace rackgate::agent

namespace rackgate::agent {
namespace {

// Issue 40, item 10: after a 409 the agent waits only on a CSR of its own
// key, self-signed by it.
TEST(CheckOwnCsr, Issue40OnlyARequestOfOurKeySignedByItIsOurs) {
  PkeyPtr key = GenerateP256Key();
  PkeyPtr other = GenerateP256Key();
  auto ours = BuildCsrPem(ClientSubject(), key.get(), SoftwareSigner(key.get()));
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  EXPECT_TRUE(CheckOwnCsr(*ours, key.get()).ok());
  // Another key under our predictable name: not ours.
  auto theirs = BuildCsrPem(ClientSubject(), other.get(), SoftwareSigner(other.get()));
  ASSERT_TRUE(theirs.ok());
  Status s = CheckOwnCsr(*theirs, key.get());
  EXPECT_EQ(s.reason(), "kubelet_csr_not_ours");
  EXPECT_EQ(s.code(), Status::Code::kVerificationFailed);
  EXPECT_NE(s.message().find("another public key"), std::string::npos) << s.message();
  // Our public key, signed by someone else: not ours either.
  ReqPtr forged(X509_REQ_new());
  ASSERT_TRUE(forged);
  ASSERT_EQ(X509_REQ_set_pubkey(forged.get(), key.get()), 1);
  ASSERT_GT(X509_REQ_sign(forged.get(), other.get(), EVP_sha256()), 0);
  BIO* bio = BIO_new(BIO_s_mem());
  ASSERT_EQ(PEM_write_bio_X509_REQ(bio, forged.get()), 1);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  const std::string forged_pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  s = CheckOwnCsr(forged_pem, key.get());
  EXPECT_EQ(s.reason(), "kubelet_csr_not_ours");
  EXPECT_NE(s.message().find("self-signature"), std::string::npos) << s.message();
  // Not a request at all.
  EXPECT_EQ(CheckOwnCsr("garbage", key.get()).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckOwnCsr("", key.get()).reason(), "kubelet_csr_not_ours");
}

}  // namespace
}  // namespace rackgate::agent
