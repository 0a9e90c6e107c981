// Tests for kubelet CSR parsing, the vouching rules and the TPM-resident key
// proof. The signer's tests are in core/signer_test.cc.
#include "core/csr.h"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/rsa.h>

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

class TpmKeyTest : public ::testing::Test {
 protected:
  static SoftKeySpec KeySpec(uint16_t type = attest::kAlgEcc) {
    SoftKeySpec s;
    s.type = type;
    s.scheme = attest::kAlgNull;  // an unrestricted key leaves the scheme to the caller
    s.attributes &= ~attest::kAttrRestricted;
    return s;
  }

  const Bytes nonce_ = Bytes(32, 0x5a);
  SoftKey ak_ = SoftKey::Generate(SoftKeySpec{});  // restricted RSA signing key
  SoftKey key_ = SoftKey::Generate(KeySpec());

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

  SoftKey rsa = SoftKey::Generate(KeySpec(attest::kAlgRsa));
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
  SoftKey other = SoftKey::Generate(KeySpec());
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
  SoftKey rogue = SoftKey::Generate(SoftKeySpec{});
  Bytes info = testing::MakeCertifyMessage(key_.name(), nonce_);
  EXPECT_EQ(CheckTpmKey(key_.tpm2b_public(), info, rogue.Sign(info), ak_.tpm2b_public(), nonce_, csr)
                .reason(),
            "signature_invalid");
}

// An unrestricted "AK" could sign a forged TPMS_ATTEST itself.
TEST_F(TpmKeyTest, RefusesUnrestrictedAttestationKey) {
  SoftKeySpec spec;
  spec.attributes &= ~attest::kAttrRestricted;
  SoftKey fake_ak = SoftKey::Generate(spec);
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
    SoftKey weak = SoftKey::Generate(spec);
    Csr csr = MustParse(MakeCsr(weak.pkey()));
    EXPECT_EQ(Prove(weak, csr, nonce_).reason(), "csr_tpm_key_attributes") << drop;
  }
  SoftKeySpec restricted = KeySpec();
  restricted.attributes |= attest::kAttrRestricted;
  restricted.scheme = attest::kAlgEcdsa;
  SoftKey r = SoftKey::Generate(restricted);
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
    if (!r.ok()) EXPECT_EQ(r.status().code(), Status::Code::kVerificationFailed);
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
