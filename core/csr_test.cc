// Tests for kubelet CSR parsing, the vouching rules and the TPM-resident key
// proof. The signer's tests are in core/signer_test.cc.
#include "core/csr.h"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/rsa.h>

#include "attest/testing/test_util.h"
#include "core/testing/csr_test_util.h"

namespace rackgate::core::csr {
namespace {

using namespace test_util;  // NOLINT: the helpers of every CSR test

// ---------------------------------------------------------------- parsing

TEST(KindFromSigner, KnowsTheTwoKubeletSigners) {
  EXPECT_EQ(*KindFromSigner("kubernetes.io/kube-apiserver-client-kubelet"), Kind::kClient);
  EXPECT_EQ(*KindFromSigner("kubernetes.io/kubelet-serving"), Kind::kServing);
  EXPECT_EQ(KindFromSigner("kubernetes.io/kube-apiserver-client").status().reason(),
            "csr_signer_unknown");
  EXPECT_EQ(SignerName(Kind::kServing), "kubernetes.io/kubelet-serving");
}

// kubelet (Go's x509.CreateCertificateRequest): P-256, O then CN, no
// extensionRequest at all; the usages come from the Kubernetes CSR object.
TEST(ParseCsr, AcceptsKubeletStyleEcdsaClientRequest) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  EXPECT_EQ(csr.common_names, Rs{kCn});
  EXPECT_EQ(csr.organizations, Rs{kO});
  EXPECT_TRUE(csr.other_subject_attributes.empty());
  EXPECT_FALSE(csr.has_extension_request);
  EXPECT_TRUE(csr.dns_names.empty() && csr.ip_addresses.empty() && csr.key_usages.empty());
  EXPECT_EQ(csr.key_algorithm, KeyAlgorithm::kEcdsa);
  EXPECT_EQ(csr.curve, "P-256");
  EXPECT_EQ(csr.key_bits, 256);
  ASSERT_NE(csr.public_key, nullptr);
  EXPECT_EQ(EVP_PKEY_eq(csr.public_key.get(), key.get()), 1);
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key.get(), &der);
  EXPECT_EQ(csr.spki_der, Bytes(der, der + n));
  OPENSSL_free(der);

  auto refusals = CheckClient(csr);
  EXPECT_TRUE(refusals.empty()) << Dump(refusals);
  // kubelet adds key encipherment for RSA keys; the approver accepts it for any.
  refusals = CheckClient(csr, Facts(), {"key encipherment", "digital signature", "client auth"});
  EXPECT_TRUE(refusals.empty()) << Dump(refusals);
}

TEST(ParseCsr, AcceptsRsa2048RequestFromOpensslReq) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no " << kOpenssl;
  TempDir dir;
  std::string out;
  ASSERT_EQ(Shell(std::string(kOpenssl) + " req -new -newkey rsa:2048 -nodes -keyout " + (dir / "k.pem") +
                    " -out " + (dir / "r.pem") + " -subj '/O=system:nodes/CN=system:node:node-a'",
                &out),
            0)
      << out;
  Csr csr = MustParse(ReadText(dir / "r.pem"));
  EXPECT_EQ(csr.key_algorithm, KeyAlgorithm::kRsa);
  EXPECT_EQ(csr.key_bits, 2048);
  EXPECT_EQ(csr.common_names, Rs{kCn});
  auto refusals = CheckClient(csr, Facts(), {"digital signature", "key encipherment", "client auth"});
  EXPECT_TRUE(refusals.empty()) << Dump(refusals);
}

TEST(ParseCsr, ReadsSansAndRequestedUsages) {
  auto key = NewKey("EC", "P-384");
  CsrSpec spec;
  spec.san = "DNS:Node-A.example.,IP:10.0.0.5,IP:fd00:0:0:0:0:0:0:5,email:a@b,URI:spiffe://x/y";
  spec.key_usage = "critical,digitalSignature,keyEncipherment";
  spec.ext_key_usage = "serverAuth,1.2.3.4";
  Csr csr = MustParse(MakeCsr(key.get(), spec));
  EXPECT_TRUE(csr.has_extension_request);
  EXPECT_EQ(csr.dns_names, Rs{"Node-A.example."});
  EXPECT_EQ(csr.ip_addresses, (Rs{"10.0.0.5", "fd00::5"}));  // canonical text
  EXPECT_EQ(csr.emails, Rs{"a@b"});
  EXPECT_EQ(csr.uris, Rs{"spiffe://x/y"});
  EXPECT_EQ(csr.key_usages, (Rs{"digital signature", "key encipherment"}));
  EXPECT_EQ(csr.extended_key_usages, (Rs{"server auth", "1.2.3.4"}));
  EXPECT_EQ(csr.curve, "P-384");
}

TEST(ParseCsr, RefusesMalformedInput) {
  auto key = NewKey("EC", "P-256");
  const std::string pem = MakeCsr(key.get());
  auto reason = [](std::string_view text) { return ParseCsr(text).status().reason(); };
  EXPECT_EQ(reason(""), "csr_malformed");
  EXPECT_EQ(reason("hello"), "csr_malformed");
  EXPECT_EQ(reason(pem + pem), "csr_malformed") << "two blocks";
  EXPECT_EQ(reason(Pem("CERTIFICATE", Der(pem))), "csr_malformed") << "wrong PEM type";
  EXPECT_EQ(reason(Pem("NEW CERTIFICATE REQUEST", Der(pem))), "csr_malformed");
  std::string huge = std::string(kMaxCsrPemBytes, '\n') + pem;
  EXPECT_EQ(reason(huge), "csr_malformed") << "over 64 KiB";
  // Text around the one block is ignored, as Go's pem.Decode ignores it.
  EXPECT_TRUE(ParseCsr("leading text\n" + pem + "trailing text\n").ok());
  // Trailing bytes after the DER request.
  auto der = Der(pem);
  der.push_back(0);
  EXPECT_EQ(reason(Pem("CERTIFICATE REQUEST", der)), "csr_malformed");
  // A PEM encryption header.
  std::string with_header = pem;
  with_header.insert(with_header.find('\n') + 1, "Proc-Type: 4,ENCRYPTED\n\n");
  EXPECT_FALSE(ParseCsr(with_header).ok());
}

// Every truncation of the DER, and of the PEM text, is refused cleanly.
TEST(ParseCsr, TruncationLoop) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.san = "DNS:node-a,IP:10.0.0.5";
  const std::string pem = MakeCsr(key.get(), spec);
  const auto der = Der(pem);
  for (size_t n = 0; n < der.size(); ++n) {
    std::vector<uint8_t> cut(der.begin(), der.begin() + static_cast<long>(n));
    EXPECT_FALSE(ParseCsr(Pem("CERTIFICATE REQUEST", cut)).ok()) << n;
  }
  const size_t end = pem.rfind("-----");  // cutting inside the END line too
  for (size_t n = 0; n < end; ++n) {
    EXPECT_FALSE(ParseCsr(std::string_view(pem).substr(0, n)).ok()) << n;
  }
}

TEST(ParseCsr, RefusesABrokenSelfSignature) {
  auto key = NewKey("EC", "P-256");
  auto der = Der(MakeCsr(key.get()));
  // Change the CN "node-a" to "node-b": still well-formed, no longer signed.
  const std::string needle = "node-a";
  auto it = std::search(der.begin(), der.end(), needle.begin(), needle.end());
  ASSERT_NE(it, der.end());
  it[5] = 'b';
  auto r = ParseCsr(Pem("CERTIFICATE REQUEST", der));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "csr_signature_invalid");
  EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
}

TEST(ParseCsr, RefusesSha1Signature) {
  auto key = NewKey("RSA", "2048");
  CsrSpec spec;
  spec.md = EVP_sha1();
  EXPECT_EQ(ParseCsr(MakeCsr(key.get(), spec)).status().reason(), "csr_signature_invalid");
}

// ---------------------------------------------------------------- parsing: the DER walk

// The parser walks the DER itself (docs/csr.md, "Parsing a request"); these
// requests are put together byte by byte, so that each breaks one thing.
Bytes Tlv(uint8_t tag, const Bytes& contents) { return rackgate::testing::DerTlv(tag, contents); }

Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

template <typename T, typename F>
Bytes I2d(const T* value, F i2d) {
  unsigned char* der = nullptr;
  const int n = i2d(value, &der);
  if (n <= 0) throw std::runtime_error("i2d");
  Bytes out(der, der + n);
  OPENSSL_free(der);
  return out;
}

const Bytes kVersion1 = {0x02, 0x01, 0x00};
const Bytes kNoAttributes = {0xa0, 0x00};
const Bytes kEcdsaSha256 = {0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02};
const Bytes kRsaSha256 = {0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7,
                          0x0d, 0x01, 0x01, 0x0b, 0x05, 0x00};
const Bytes kOidEcPublicKey = {0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01};
const Bytes kOidP256 = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
const Bytes kRsaEncryptionNull = {0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00};

Bytes Subject() {
  ossl::X509NamePtr name(X509_NAME_new());
  for (const auto& [field, value] : {std::pair{"O", kO}, std::pair{"CN", kCn}}) {
    X509_NAME_add_entry_by_txt(name.get(), field, MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  }
  return I2d(name.get(), i2d_X509_NAME);
}

Bytes Spki(EVP_PKEY* key) { return I2d(key, i2d_PUBKEY); }

// A request over `info` (one whole DER element), signed by `key` with SHA-256
// and labelled `sig_alg`; `unused_bits` goes into the signature BIT STRING.
std::string SignedRequest(EVP_PKEY* key, const Bytes& info, const Bytes& sig_alg, uint8_t unused_bits = 0) {
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  size_t n = 0;
  if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &n, info.data(), info.size()) != 1) {
    throw std::runtime_error("sign");
  }
  Bytes sig(n + 1, unused_bits);
  if (EVP_DigestSign(ctx.get(), sig.data() + 1, &n, info.data(), info.size()) != 1) throw std::runtime_error("sign");
  sig.resize(n + 1);
  return Pem("CERTIFICATE REQUEST", Tlv(0x30, Cat({info, sig_alg, Tlv(0x03, sig)})));
}

Bytes Info(const Bytes& spki, const Bytes& attributes = kNoAttributes, const Bytes& version = kVersion1) {
  return Tlv(0x30, Cat({version, Subject(), spki, attributes}));
}

Status Parsed(const std::string& pem) { return ParseCsr(pem).status(); }

TEST(ParseCsr, HandMadeRequestsParse) {
  auto ec = NewKey("EC", "P-256");
  Csr csr = MustParse(SignedRequest(ec.get(), Info(Spki(ec.get())), kEcdsaSha256));
  EXPECT_EQ(csr.common_names, Rs{kCn});
  EXPECT_EQ(csr.spki_der, Spki(ec.get()));
  EXPECT_EQ(EVP_PKEY_eq(csr.public_key.get(), ec.get()), 1);
  auto rsa = NewKey("RSA", "2048");
  csr = MustParse(SignedRequest(rsa.get(), Info(Spki(rsa.get())), kRsaSha256));
  EXPECT_EQ(csr.key_bits, 2048);
  // RFC 2986 requires the attributes, but some encoders leave them out and
  // OpenSSL has always taken such requests.
  EXPECT_TRUE(ParseCsr(SignedRequest(ec.get(), Tlv(0x30, Cat({kVersion1, Subject(), Spki(ec.get())})),
                                     kEcdsaSha256))
                  .ok());
}

TEST(ParseCsr, RefusesWhatIsNotStrictDer) {
  auto key = NewKey("EC", "P-256");
  const Bytes spki = Spki(key.get());
  auto malformed = [](const std::string& pem) {
    Status s = Parsed(pem);
    return s.reason() == "csr_malformed" && s.code() == Status::Code::kInvalidArgument;
  };
  // Bytes left over inside the request info, and inside the key, each signed.
  EXPECT_TRUE(malformed(SignedRequest(key.get(), Tlv(0x30, Cat({kVersion1, Subject(), spki, kNoAttributes, {0x05, 0x00}})),
                                      kEcdsaSha256)));
  Bytes long_spki(spki.begin() + 2, spki.end());
  long_spki = Tlv(0x30, Cat({long_spki, {0x05, 0x00}}));
  EXPECT_TRUE(malformed(SignedRequest(key.get(), Info(long_spki), kEcdsaSha256)));
  // A length in the long form that fits the short one; a zero-padded length.
  EXPECT_TRUE(malformed(SignedRequest(key.get(), Info(spki, kNoAttributes, {0x02, 0x81, 0x01, 0x00}), kEcdsaSha256)));
  const Bytes good = Der(SignedRequest(key.get(), Info(spki), kEcdsaSha256));
  ASSERT_EQ(good[1], 0x81) << "a request of 128 to 255 bytes";
  Bytes padded = {0x30, 0x82, 0x00};
  padded.insert(padded.end(), good.begin() + 2, good.end());
  EXPECT_TRUE(malformed(Pem("CERTIFICATE REQUEST", padded)));
  // BER's indefinite length.
  Bytes indefinite = {0x30, 0x80};
  indefinite.insert(indefinite.end(), good.begin() + 3, good.end());
  indefinite.insert(indefinite.end(), {0x00, 0x00});
  EXPECT_TRUE(malformed(Pem("CERTIFICATE REQUEST", indefinite)));
  // A length running past the end, and one stopping short of it.
  Bytes past = good;
  past[2] += 1;
  EXPECT_TRUE(malformed(Pem("CERTIFICATE REQUEST", past)));
  Bytes short_of = good;
  short_of[2] -= 1;
  EXPECT_TRUE(malformed(Pem("CERTIFICATE REQUEST", short_of)));
  // Version 2 (INTEGER 1), and a signature BIT STRING claiming 8 unused bits.
  EXPECT_TRUE(malformed(SignedRequest(key.get(), Info(spki, kNoAttributes, {0x02, 0x01, 0x01}), kEcdsaSha256)));
  EXPECT_TRUE(malformed(SignedRequest(key.get(), Info(spki), kEcdsaSha256, 8)));
}

TEST(ParseCsr, RefusesKeysThatAreNotWhatTheirAlgorithmSays) {
  auto key = NewKey("EC", "P-256");
  const Bytes spki = Spki(key.get());
  const Bytes bits(spki.end() - 66, spki.end());  // 0x00 unused bits, then the 65-byte point
  ASSERT_EQ(bits[0], 0x00);
  ASSERT_EQ(bits[1], 0x04);
  auto refused_key = [&](const Bytes& algorithm, Bytes key_bits) {
    const Bytes forged = Tlv(0x30, Cat({Tlv(0x30, algorithm), Tlv(0x03, key_bits)}));
    Status s = Parsed(SignedRequest(key.get(), Info(forged), kEcdsaSha256));
    return s.reason() == "csr_malformed" && s.message().find("public key") != std::string::npos;
  };
  ASSERT_FALSE(refused_key(Cat({kOidEcPublicKey, kOidP256}), bits)) << "the builder makes a good key";
  // An EC point under the RSA algorithm.
  EXPECT_TRUE(refused_key(kRsaEncryptionNull, bits));
  // A curve nobody knows (OID 1.2.3.4).
  EXPECT_TRUE(refused_key(Cat({kOidEcPublicKey, {0x06, 0x03, 0x2a, 0x03, 0x04}}), bits));
  // A point off the curve, and a point of another curve's size.
  Bytes off = bits;
  off.back() ^= 0x01;
  EXPECT_TRUE(refused_key(Cat({kOidEcPublicKey, kOidP256}), off));
  Bytes wide = bits;
  wide.insert(wide.end(), 32, 0x01);
  EXPECT_TRUE(refused_key(Cat({kOidEcPublicKey, kOidP256}), wide));
  // An RSA key whose modulus is negative.
  const Bytes rsa_bits = Cat({{0x00}, Tlv(0x30, Cat({{0x02, 0x02, 0x80, 0x01}, {0x02, 0x01, 0x03}}))});
  EXPECT_TRUE(refused_key(kRsaEncryptionNull, rsa_bits));
}

TEST(ParseCsr, SignatureChecksAsX509ReqVerifyDid) {
  auto rsa = NewKey("RSA", "2048");
  auto ec = NewKey("EC", "P-256");
  auto refused_signature = [](const std::string& pem) {
    Status s = Parsed(pem);
    return s.reason() == "csr_signature_invalid" && s.code() == Status::Code::kVerificationFailed;
  };
  // An RSA signature labelled ECDSA: the algorithm's key type is not the key's.
  EXPECT_TRUE(refused_signature(SignedRequest(rsa.get(), Info(Spki(rsa.get())), kEcdsaSha256)));
  // Signed by another key than the request's.
  EXPECT_TRUE(refused_signature(SignedRequest(ec.get(), Info(Spki(NewKey("EC", "P-256").get())), kEcdsaSha256)));
  // A signature BIT STRING with unused bits.
  EXPECT_TRUE(refused_signature(SignedRequest(ec.get(), Info(Spki(ec.get())), kEcdsaSha256, 1)));
}

// Requests made by `openssl req`, parsed by ParseCsr and by OpenSSL's own
// d2i_X509_REQ, X509_REQ_get_pubkey and X509_REQ_verify (what ParseCsr used
// to call): same verdict, same key, same SPKI, same names.
TEST(ParseCsr, AgreesWithOpensslOnOpensslReqRequests) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no " << kOpenssl;
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"rsa:2048", "RSA"}, {"rsa:3072", "RSA"}, {"ec -pkeyopt ec_paramgen_curve:P-256", "EC"},
      {"ec -pkeyopt ec_paramgen_curve:P-384", "EC"}, {"ec -pkeyopt ec_paramgen_curve:P-521", "EC"},
      {"ed25519", "ED25519"}};
  for (const auto& [newkey, type] : kinds) {
    SCOPED_TRACE(newkey);
    std::string out;
    ASSERT_EQ(Shell(std::string(kOpenssl) + " req -new -newkey " + newkey + " -nodes -keyout " + (dir / "k.pem") +
                        " -out " + (dir / "r.pem") +
                        " -subj '/O=system:nodes/CN=system:node:node-a' -addext "
                        "'subjectAltName=DNS:node-a.example,IP:10.0.0.5'",
                    &out),
              0)
        << out;
    const std::string pem = ReadText(dir / "r.pem");
    Bytes der = Der(pem);
    for (bool tamper : {false, true}) {
      if (tamper) der[der.size() - 3] ^= 0x01;  // inside the signature
      const std::string text = Pem("CERTIFICATE REQUEST", der);
      const unsigned char* p = der.data();
      ossl::X509ReqPtr req(d2i_X509_REQ(nullptr, &p, static_cast<long>(der.size())));
      ASSERT_TRUE(req);
      ossl::PkeyPtr ref(X509_REQ_get_pubkey(req.get()));
      ASSERT_TRUE(ref);
      const bool ref_ok = X509_REQ_verify(req.get(), ref.get()) == 1;
      ERR_clear_error();
      auto csr = ParseCsr(text);
      EXPECT_EQ(csr.ok(), ref_ok) << tamper << " " << csr.status().ToString();
      EXPECT_EQ(ref_ok, !tamper);
      if (!csr.ok()) {
        EXPECT_EQ(csr.status().reason(), "csr_signature_invalid");
        continue;
      }
      EXPECT_EQ(csr->key_type, type);
      EXPECT_EQ(EVP_PKEY_eq(csr->public_key.get(), ref.get()), 1);
      EXPECT_EQ(csr->key_bits, EVP_PKEY_get_bits(ref.get()));
      EXPECT_EQ(csr->spki_der, Spki(ref.get()));
      EXPECT_EQ(I2d(csr->spki.get(), i2d_X509_PUBKEY), csr->spki_der);
      EXPECT_EQ(csr->common_names, Rs{kCn});
      EXPECT_EQ(csr->organizations, Rs{kO});
      EXPECT_EQ(csr->dns_names, Rs{"node-a.example"});
      EXPECT_EQ(csr->ip_addresses, Rs{"10.0.0.5"});
    }
  }
}

// ---------------------------------------------------------------- rules: subject

TEST(Rules, WrongCommonName) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", kO}, {"CN", "kubelet"}};
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_subject_common_name"});
}

TEST(Rules, AnotherMachinesHostname) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", kO}, {"CN", "system:node:node-b"}};
  auto refusals = CheckClient(MustParse(MakeCsr(key.get(), spec)));
  ASSERT_EQ(Reasons(refusals), Rs{"csr_subject_common_name"});
  // The message names what was asked for, never the enrolled hostname.
  EXPECT_NE(refusals[0].message.find("node-b"), std::string::npos);
  EXPECT_EQ(refusals[0].message.find("node-a"), std::string::npos);
}

TEST(Rules, TwoCommonNames) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", kO}, {"CN", kCn}, {"CN", "system:node:node-b"}};
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_subject_common_name"});
}

// Without an enrolled hostname, "system:node:" must not match the empty name.
TEST(Rules, NoEnrolledHostname) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", kO}, {"CN", "system:node:"}};
  MachineFacts f = Facts();
  f.hostname.clear();
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)), f)), Rs{"csr_subject_common_name"});
}

TEST(Rules, WrongOrganization) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", "system:masters"}, {"CN", kCn}};
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_subject_organization"});
  spec.subject = {{"CN", kCn}};
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_subject_organization"});
}

// The classic escalation: an extra O=system:masters next to system:nodes.
TEST(Rules, ExtraOrganization) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", kO}, {"O", "system:masters"}, {"CN", kCn}};
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_subject_organization"});
}

TEST(Rules, ExtraSubjectAttribute) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"C", "DE"}, {"O", kO}, {"OU", "x"}, {"CN", kCn}};
  auto refusals = CheckClient(MustParse(MakeCsr(key.get(), spec)));
  ASSERT_EQ(Reasons(refusals), Rs{"csr_subject_extra"});
  EXPECT_NE(refusals[0].message.find("OU"), std::string::npos);
}

// ---------------------------------------------------------------- rules: client

TEST(Rules, ClientRequestWithSans) {
  auto key = NewKey("EC", "P-256");
  for (const char* san : {"DNS:node-a", "IP:10.0.0.5", "email:a@b", "URI:spiffe://x"}) {
    CsrSpec spec;
    spec.san = san;
    EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_client_has_sans"}) << san;
  }
}

TEST(Rules, WrongUsages) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  for (const Rs& usages : {Rs{"digital signature", "server auth"}, Rs{"client auth"},
                           Rs{"digital signature", "client auth", "server auth"},
                           Rs{"digital signature", "client auth", "client auth"},
                           Rs{"digital signature", "client auth", "cert sign"}, Rs{}}) {
    EXPECT_EQ(Reasons(CheckClient(csr, Facts(), usages)), Rs{"csr_usages"}) << usages.size();
  }
  MachineFacts f = Facts();
  EXPECT_EQ(Reasons(CheckServing(csr, f, kClientUsages)), (Rs{"csr_usages", "csr_serving_no_sans"}));
}

// The request's own extensions asking for more than the kind allows.
TEST(Rules, RequestExtensionAsksForServerAuthOnAClientRequest) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.ext_key_usage = "serverAuth";
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_usages"});
  spec.ext_key_usage = "clientAuth";
  spec.key_usage = "digitalSignature,keyCertSign";
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_usages"});
  spec.key_usage = "critical,digitalSignature";
  EXPECT_TRUE(CheckClient(MustParse(MakeCsr(key.get(), spec))).empty());
}

TEST(Rules, ClientWindowExpired) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  MachineFacts f = Facts();
  f.last_attested_at = kNow - 7200;
  EXPECT_TRUE(CheckClient(csr, f).empty()) << "the window's last second still counts";
  f.last_attested_at = kNow - 7201;
  EXPECT_EQ(Reasons(CheckClient(csr, f)), Rs{"csr_window_expired"});
  f.last_attested_at.reset();
  EXPECT_EQ(Reasons(CheckClient(csr, f)), Rs{"csr_window_expired"});
  RuleOptions shorter;
  shorter.client_window_seconds = 30;
  EXPECT_EQ(Reasons(Check(csr, Kind::kClient, kClientUsages, Facts(), shorter, false, kNow)),
            Rs{"csr_window_expired"});
}

TEST(Rules, SecondClientRequest) {
  auto key = NewKey("EC", "P-256");
  MachineFacts f = Facts();
  f.state = "joined";
  f.client_cert_issued_at = kNow - 10;
  EXPECT_EQ(Reasons(CheckClient(MustParse(MakeCsr(key.get())), f)), Rs{"client_cert_already_issued"});
}

TEST(Rules, MachineState) {
  auto key = NewKey("EC", "P-256");
  Csr client = MustParse(MakeCsr(key.get()));
  CsrSpec spec;
  spec.san = "DNS:node-a";
  Csr serving = MustParse(MakeCsr(key.get(), spec));
  MachineFacts f = Facts();
  for (const char* state : {"pending", "enrolled", "revoked", ""}) {
    f.state = state;
    EXPECT_EQ(Reasons(CheckClient(client, f)), Rs{"csr_state"}) << state;
    EXPECT_EQ(Reasons(CheckServing(serving, f)), Rs{"csr_state"}) << state;
  }
  f.state = "attested";
  EXPECT_TRUE(CheckClient(client, f).empty());
  EXPECT_EQ(Reasons(CheckServing(serving, f)), Rs{"csr_state"}) << "no config fetched yet";
  f.state = "joined";
  EXPECT_TRUE(CheckServing(serving, f).empty());
}

// ---------------------------------------------------------------- rules: serving

TEST(Rules, AcceptsServingRequestWithEnrolledDnsAndIpSans) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  // Case and a trailing dot do not matter; IPv6 compares as 16 bytes.
  spec.san = "DNS:NODE-A.Rack1.Example.COM.,DNS:node-a,IP:10.0.0.5,IP:fd00:0:0:0:0:0:0:5,IP:::1";
  Csr csr = MustParse(MakeCsr(key.get(), spec));
  MachineFacts f = Facts();
  f.dns_names = {"node-a.rack1.example.com."};
  f.ip_addresses = {"10.0.0.5", "fd00::5", "0:0:0:0:0:0:0:1"};
  auto refusals = CheckServing(csr, f);
  EXPECT_TRUE(refusals.empty()) << Dump(refusals);
  refusals = CheckServing(csr, f, {"key encipherment", "digital signature", "server auth"});
  EXPECT_TRUE(refusals.empty()) << Dump(refusals);
}

TEST(Rules, ServingSanNotEnrolled) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.san = "DNS:node-a,DNS:kubernetes.default.svc,IP:10.0.0.6,IP:::ffff:10.0.0.5,DNS:*.rack1.example.com";
  auto refusals = CheckServing(MustParse(MakeCsr(key.get(), spec)));
  ASSERT_EQ(Reasons(refusals), (Rs{"csr_san_not_enrolled", "csr_san_not_enrolled",
                                   "csr_san_not_enrolled", "csr_san_not_enrolled"}))
      << Dump(refusals);
  // Each names the requester's SAN, none names an enrolled value.
  EXPECT_NE(refusals[0].message.find("kubernetes.default.svc"), std::string::npos);
  EXPECT_NE(refusals[1].message.find("*.rack1"), std::string::npos);
  EXPECT_NE(refusals[2].message.find("10.0.0.6"), std::string::npos);
  for (const auto& r : refusals) {
    EXPECT_EQ(r.message.find("'10.0.0.5'"), std::string::npos) << r.message;
    EXPECT_EQ(r.message.find("fd00::5"), std::string::npos) << r.message;
  }
}

TEST(Rules, ServingRequestWithoutSans) {
  auto key = NewKey("EC", "P-256");
  EXPECT_EQ(Reasons(CheckServing(MustParse(MakeCsr(key.get())))), Rs{"csr_serving_no_sans"});
}

TEST(Rules, ServingRequestWithEmailOrUriSan) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.san = "DNS:node-a,email:root@node-a,URI:https://node-a/";
  EXPECT_EQ(Reasons(CheckServing(MustParse(MakeCsr(key.get(), spec)))), Rs{"csr_serving_san_kind"});
}

// ---------------------------------------------------------------- rules: keys

TEST(Rules, Rsa1024Refused) {
  auto key = NewKey("RSA", "1024");
  Csr csr = MustParse(MakeCsr(key.get()));
  EXPECT_EQ(csr.key_bits, 1024);
  EXPECT_EQ(Reasons(CheckClient(csr)), Rs{"csr_key_unsupported"});
}

TEST(Rules, Ed25519Refused) {
  auto key = NewKey("ED25519", nullptr);
  Csr csr = MustParse(MakeCsr(key.get()));
  EXPECT_EQ(csr.key_algorithm, KeyAlgorithm::kOther);
  EXPECT_EQ(csr.key_type, "ED25519");
  EXPECT_EQ(Reasons(CheckClient(csr)), Rs{"csr_key_unsupported"});
}

TEST(Rules, OtherCurvesRefused) {
  auto key = NewKey("EC", "P-521");
  Csr csr = MustParse(MakeCsr(key.get()));
  EXPECT_EQ(csr.curve, "P-521");
  EXPECT_EQ(Reasons(CheckClient(csr)), Rs{"csr_key_unsupported"});
}

TEST(Rules, TpmKeyRequiredButNotProven) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  RuleOptions options;
  options.require_tpm_key = true;
  EXPECT_EQ(Reasons(Check(csr, Kind::kClient, kClientUsages, Facts(), options, false, kNow)),
            Rs{"csr_tpm_key_required"});
  EXPECT_TRUE(Check(csr, Kind::kClient, kClientUsages, Facts(), options, true, kNow).empty());
}

// Serving keys stay files (kubelet's TLS server reads them): the pool's TPM
// requirement is for the client key.
TEST(Rules, TpmKeyRequirementIsForClientCsrsOnly) {
  auto key = NewKey("EC", "P-256");
  RuleOptions options;
  options.require_tpm_key = true;
  CsrSpec spec;
  spec.san = "DNS:node-a,IP:10.0.0.5";
  Csr serving = MustParse(MakeCsr(key.get(), spec));
  EXPECT_TRUE(Check(serving, Kind::kServing, kServingUsages, Facts(), options, false, kNow).empty())
      << Dump(Check(serving, Kind::kServing, kServingUsages, Facts(), options, false, kNow));
  Csr client = MustParse(MakeCsr(key.get()));
  EXPECT_EQ(Reasons(Check(client, Kind::kClient, kClientUsages, Facts(), options, false, kNow)),
            Rs{"csr_tpm_key_required"});
}

// Every violation is reported, not just the first.
TEST(Rules, ReportsEveryViolation) {
  auto key = NewKey("RSA", "1024");
  CsrSpec spec;
  spec.subject = {{"O", "system:masters"}, {"CN", "system:node:node-b"}, {"OU", "x"}};
  spec.san = "DNS:node-a";
  MachineFacts f = Facts();
  f.last_attested_at.reset();
  f.client_cert_issued_at = kNow;
  f.state = "revoked";
  RuleOptions options;
  options.require_tpm_key = true;
  auto refusals = Check(MustParse(MakeCsr(key.get(), spec)), Kind::kClient, {"server auth"}, f,
                        options, false, kNow);
  EXPECT_EQ(Reasons(refusals),
            (Rs{"csr_subject_organization", "csr_subject_common_name", "csr_subject_extra",
                "csr_key_unsupported", "csr_usages", "csr_state", "csr_client_has_sans",
                "csr_window_expired", "client_cert_already_issued", "csr_tpm_key_required"}));
}

// Hostile text in a value never reaches a message unescaped.
TEST(Rules, MessagesEscapeRequesterText) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.subject = {{"O", kO}, {"CN", "system:node:\x1b[31mevil"}};
  auto refusals = CheckClient(MustParse(MakeCsr(key.get(), spec)));
  ASSERT_EQ(Reasons(refusals), Rs{"csr_subject_common_name"});
  EXPECT_EQ(refusals[0].message.find('\x1b'), std::string::npos);
  EXPECT_NE(refusals[0].message.find("\\x1b"), std::string::npos);
}

// ---------------------------------------------------------------- TPM key proof

// Each test's keys come from the test key pool (attest/testing/soft_tpm.h),
// a round per test: making RSA keys anew was most of this binary's time.
struct KeyRound {
  KeyRound() { testing::TestKeyPool().Rewind(); }
};

class TpmKeyTest : public ::testing::Test {
 protected:
  static SoftKey Key(const SoftKeySpec& spec) { return testing::TestKeyPool().Next(spec); }
  static SoftKeySpec KeySpec(uint16_t type = attest::kAlgEcc) {
    SoftKeySpec s;
    s.type = type;
    s.scheme = attest::kAlgNull;  // an unrestricted key leaves the scheme to the caller
    s.attributes &= ~attest::kAttrRestricted;
    return s;
  }

  KeyRound round_;  // before the keys below
  const Bytes nonce_ = Bytes(32, 0x5a);
  SoftKey ak_ = Key(SoftKeySpec{});  // restricted RSA signing key
  SoftKey key_ = Key(KeySpec());

  Status Prove(const SoftKey& certified, const Csr& csr, const Bytes& certify_nonce) {
    Bytes info = testing::MakeCertifyMessage(certified.name(), certify_nonce);
    Bytes sig = ak_.Sign(info);
    return CheckTpmKey(certified.tpm2b_public(), info, sig, ak_.tpm2b_public(), nonce_, csr);
  }
};

TEST_F(TpmKeyTest, AcceptsCertifiedKeyThatSignedTheRequest) {
  Csr csr = MustParse(MakeCsr(key_.pkey()));
  Status s = Prove(key_, csr, nonce_);
  ASSERT_TRUE(s.ok()) << s.ToString();
  RuleOptions options;
  options.require_tpm_key = true;
  EXPECT_TRUE(Check(csr, Kind::kClient, kClientUsages, Facts(), options, true, kNow).empty());

  SoftKey rsa = Key(KeySpec(attest::kAlgRsa));
  Csr rsa_csr = MustParse(MakeCsr(rsa.pkey()));
  s = Prove(rsa, rsa_csr, nonce_);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// A compressed point in the request is the same key.
TEST_F(TpmKeyTest, AcceptsCompressedPointEncoding) {
  ossl::PkeyPtr copy(EVP_PKEY_dup(key_.pkey()));
  ASSERT_TRUE(copy);
  ASSERT_EQ(EVP_PKEY_set_utf8_string_param(copy.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                           OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_COMPRESSED),
            1);
  const std::string pem = MakeCsr(copy.get());
  const auto der = Der(pem);
  Csr csr = MustParse(pem);
  EXPECT_EQ(csr.spki_der.size(), 91u) << "re-encoded uncompressed";
  EXPECT_LT(der.size(), Der(MakeCsr(key_.pkey())).size()) << "the request itself is compressed";
  Status s = Prove(key_, csr, nonce_);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

// A genuine certify of some TPM key, sent along with a request for a
// software key: the proof is valid, but not for this request.
TEST_F(TpmKeyTest, CertifyOverADifferentKey) {
  SoftKey other = Key(KeySpec());
  Csr csr = MustParse(MakeCsr(key_.pkey()));
  EXPECT_EQ(Prove(other, csr, nonce_).reason(), "csr_tpm_key_mismatch");

  // The certify names one key, the public area sent is another.
  Bytes info = testing::MakeCertifyMessage(other.name(), nonce_);
  Status s = CheckTpmKey(key_.tpm2b_public(), info, ak_.Sign(info), ak_.tpm2b_public(), nonce_, csr);
  EXPECT_EQ(s.reason(), "certify_name_mismatch");
}

TEST_F(TpmKeyTest, CertifyWithStaleNonce) {
  Csr csr = MustParse(MakeCsr(key_.pkey()));
  EXPECT_EQ(Prove(key_, csr, Bytes(32, 0x11)).reason(), "certify_nonce_mismatch");
  Bytes info = testing::MakeCertifyMessage(key_.name(), nonce_);
  EXPECT_EQ(CheckTpmKey(key_.tpm2b_public(), info, ak_.Sign(info), ak_.tpm2b_public(), {}, csr).reason(),
            "csr_tpm_nonce_missing");
}

TEST_F(TpmKeyTest, CertifySignedByAnotherKey) {
  Csr csr = MustParse(MakeCsr(key_.pkey()));
  SoftKey rogue = Key(SoftKeySpec{});
  Bytes info = testing::MakeCertifyMessage(key_.name(), nonce_);
  EXPECT_EQ(CheckTpmKey(key_.tpm2b_public(), info, rogue.Sign(info), ak_.tpm2b_public(), nonce_, csr)
                .reason(),
            "signature_invalid");
}

// An unrestricted "AK" could sign a forged TPMS_ATTEST itself.
TEST_F(TpmKeyTest, RefusesUnrestrictedAttestationKey) {
  SoftKeySpec spec;
  spec.attributes &= ~attest::kAttrRestricted;
  SoftKey fake_ak = Key(spec);
  Csr csr = MustParse(MakeCsr(key_.pkey()));
  Bytes info = testing::MakeCertifyMessage(key_.name(), nonce_);
  EXPECT_EQ(CheckTpmKey(key_.tpm2b_public(), info, fake_ak.Sign(info), fake_ak.tpm2b_public(), nonce_, csr)
                .reason(),
            "ak_not_restricted_signing");
}

TEST_F(TpmKeyTest, RefusesKeysThatMayLeaveTheTpm) {
  for (uint32_t drop : {attest::kAttrFixedTpm, attest::kAttrFixedParent, attest::kAttrSensitiveDataOrigin,
                        attest::kAttrSign}) {
    SoftKeySpec spec = KeySpec();
    spec.attributes &= ~drop;
    if (drop == attest::kAttrSign) spec.attributes |= attest::kAttrDecrypt;
    SoftKey weak = Key(spec);
    Csr csr = MustParse(MakeCsr(weak.pkey()));
    EXPECT_EQ(Prove(weak, csr, nonce_).reason(), "csr_tpm_key_attributes") << drop;
  }
  SoftKeySpec restricted = KeySpec();
  restricted.attributes |= attest::kAttrRestricted;
  restricted.scheme = attest::kAlgEcdsa;
  SoftKey r = Key(restricted);
  EXPECT_EQ(Prove(r, MustParse(MakeCsr(r.pkey())), nonce_).reason(), "csr_tpm_key_attributes");
}

TEST_F(TpmKeyTest, RefusesMalformedPublicAreas) {
  Csr csr = MustParse(MakeCsr(key_.pkey()));
  Bytes info = testing::MakeCertifyMessage(key_.name(), nonce_);
  Bytes sig = ak_.Sign(info);
  Bytes cut(key_.tpm2b_public().begin(), key_.tpm2b_public().end() - 1);
  EXPECT_EQ(CheckTpmKey(cut, info, sig, ak_.tpm2b_public(), nonce_, csr).reason(), "tpm2b_public_malformed");
  EXPECT_EQ(CheckTpmKey(key_.tpm2b_public(), info, sig, {}, nonce_, csr).reason(), "tpm2b_public_malformed");
}

// ---------------------------------------------------------------- renewal

// A certificate for `key` with `serial` (big-endian bytes), self-signed.
std::string SelfSigned(EVP_PKEY* key, const Bytes& serial) {
  ossl::X509Ptr cert(X509_new());
  ossl::BnPtr bn(BN_bin2bn(serial.data(), static_cast<int>(serial.size()), nullptr));
  if (!cert || !bn || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600) == nullptr || X509_set_pubkey(cert.get(), key) != 1) {
    throw std::runtime_error("certificate");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("t"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  const bool eddsa = EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519;
  if (X509_sign(cert.get(), key, eddsa ? nullptr : EVP_sha256()) <= 0) throw std::runtime_error("sign");
  unsigned char* der = nullptr;
  const int n = i2d_X509(cert.get(), &der);
  std::vector<uint8_t> bytes(der, der + n);
  OPENSSL_free(der);
  return Pem("CERTIFICATE", bytes);
}

Bytes Sign(EVP_PKEY* key, const Bytes& message, int rsa_padding = RSA_PKCS1_PADDING) {
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  EVP_PKEY_CTX* pctx = nullptr;
  size_t n = 0;
  if (EVP_DigestSignInit(ctx.get(), &pctx, EVP_sha256(), nullptr, key) != 1) throw std::runtime_error("sign");
  if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA) EVP_PKEY_CTX_set_rsa_padding(pctx, rsa_padding);
  EVP_DigestSign(ctx.get(), nullptr, &n, message.data(), message.size());
  Bytes sig(n);
  if (EVP_DigestSign(ctx.get(), sig.data(), &n, message.data(), message.size()) != 1) throw std::runtime_error("sign");
  sig.resize(n);
  return sig;
}

const Bytes kSerial = {0x00, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};

TEST(PresentedCertificate, ReadsTheSerialAsTheSignerWritesIt) {
  auto key = NewKey("EC", "P-256");
  auto cert = ParsePresentedCertificate(SelfSigned(key.get(), kSerial));
  ASSERT_TRUE(cert.ok()) << cert.status().ToString();
  // A leading zero byte is kept: 16 bytes, lower-case hex.
  EXPECT_EQ(cert->serial_hex, "007f0102030405060708090a0b0c0d0e");
  EXPECT_EQ(EVP_PKEY_eq(cert->public_key.get(), key.get()), 1);
  EXPECT_FALSE(cert->der.empty());
}

TEST(PresentedCertificate, RefusesAnythingButOneCertificateOfOurs) {
  auto key = NewKey("EC", "P-256");
  const std::string pem = SelfSigned(key.get(), kSerial);
  for (const std::string& bad : {std::string(), std::string("garbage"), pem + pem, MakeCsr(key.get()),
                                 SelfSigned(key.get(), Bytes(17, 0x42)),  // a serial we never write
                                 SelfSigned(NewKey("ED25519", "").get(), kSerial),
                                 std::string(kMaxCsrPemBytes + 1, 'a')}) {
    auto r = ParsePresentedCertificate(bad);
    EXPECT_EQ(r.ok() ? "" : r.status().reason(), "renewal_proof_invalid") << bad.substr(0, 40);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
    }
  }
}

TEST(PresentedCertificate, TruncationLoop) {
  auto key = NewKey("EC", "P-256");
  const std::string pem = SelfSigned(key.get(), kSerial);
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  ossl::X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  unsigned char* der = nullptr;
  const int n = i2d_X509(cert.get(), &der);
  const Bytes bytes(der, der + n);
  OPENSSL_free(der);
  for (size_t len = 0; len < bytes.size(); ++len) {
    EXPECT_FALSE(ParsePresentedCertificate(Pem("CERTIFICATE", Bytes(bytes.begin(), bytes.begin() + len))).ok())
        << len;
  }
  // Trailing bytes after the certificate.
  Bytes longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(ParsePresentedCertificate(Pem("CERTIFICATE", longer)).ok());
}

TEST(RenewalSignature, EcdsaAndRsaPkcs1OverTheMessageOnly) {
  const Bytes message = {'r', 'e', 'n', 'e', 'w'};
  for (auto [type, param] : {std::pair{"EC", "P-256"}, std::pair{"EC", "P-384"}, std::pair{"RSA", "2048"}}) {
    auto key = NewKey(type, param);
    auto cert = ParsePresentedCertificate(SelfSigned(key.get(), kSerial));
    ASSERT_TRUE(cert.ok()) << cert.status().ToString();
    const Bytes sig = Sign(key.get(), message);
    EXPECT_TRUE(CheckRenewalSignature(*cert, message, sig).ok()) << type << param;
    const Bytes other = {'o', 't', 'h', 'e', 'r'};
    EXPECT_EQ(CheckRenewalSignature(*cert, other, sig).reason(), "renewal_proof_invalid");
    EXPECT_EQ(CheckRenewalSignature(*cert, message, {}).reason(), "renewal_proof_invalid");
    auto stranger = NewKey(type, param);
    EXPECT_EQ(CheckRenewalSignature(*cert, message, Sign(stranger.get(), message)).reason(), "renewal_proof_invalid");
  }
  // RSA-PSS is not what the proof is made with.
  auto rsa = NewKey("RSA", "2048");
  auto cert = ParsePresentedCertificate(SelfSigned(rsa.get(), kSerial));
  ASSERT_TRUE(cert.ok());
  EXPECT_EQ(CheckRenewalSignature(*cert, message, Sign(rsa.get(), message, RSA_PKCS1_PSS_PADDING)).reason(),
            "renewal_proof_invalid");
}

TEST(RenewalDue, TheLastFractionOfTheValidityOrAfterIt) {
  // Valid 3000 s from 1000: with one third, renewal opens at 3000.
  EXPECT_FALSE(RenewalDue(1000, 4000, 1.0 / 3.0, 1000));
  EXPECT_FALSE(RenewalDue(1000, 4000, 1.0 / 3.0, 2999));
  EXPECT_TRUE(RenewalDue(1000, 4000, 1.0 / 3.0, 3000));
  EXPECT_TRUE(RenewalDue(1000, 4000, 1.0 / 3.0, 4000));
  EXPECT_TRUE(RenewalDue(1000, 4000, 1.0 / 3.0, 1'000'000));
  EXPECT_TRUE(RenewalDue(1000, 4000, 1.0, 1000));
  EXPECT_FALSE(RenewalDue(1000, 4000, 0.1, 3699));
  EXPECT_TRUE(RenewalDue(1000, 4000, 0.1, 3700));
  // A year of seconds does not overflow.
  EXPECT_FALSE(RenewalDue(1'800'000'000, 1'800'000'000 + 365 * 86400, 1.0 / 3.0, 1'800'000'000 + 200 * 86400));
  EXPECT_TRUE(RenewalDue(1'800'000'000, 1'800'000'000 + 365 * 86400, 1.0 / 3.0, 1'800'000'000 + 250 * 86400));
}

}  // namespace
}  // namespace rackgate::core::csr
