// Tests for kubelet CSR parsing, the vouching rules, the TPM-resident key
// proof and the local cluster-CA signer.
#include "daemon/csr.h"

#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "attest/testing/soft_tpm.h"
#include "base/ossl.h"
#include "daemon/signer.h"

namespace rackgate::daemon::csr {
namespace {

using testing::SoftKey;
using testing::SoftKeySpec;

constexpr const char* kOpenssl = "/usr/bin/openssl";
const std::string kCn = "system:node:node-a";
const std::string kO = "system:nodes";
const std::vector<std::string> kClientUsages = {"digital signature", "client auth"};
const std::vector<std::string> kServingUsages = {"digital signature", "server auth"};

// ---------------------------------------------------------------- helpers

ossl::PkeyPtr NewKey(const char* type, const char* param) {
  ossl::PkeyPtr k;
  if (std::string(type) == "RSA") {
    k.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(std::atoi(param))));
  } else if (std::string(type) == "EC") {
    k.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", param));
  } else {
    k.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, type));
  }
  if (!k) throw std::runtime_error(std::string("keygen ") + type);
  return k;
}

struct CsrSpec {
  std::vector<std::pair<std::string, std::string>> subject = {{"O", kO}, {"CN", kCn}};
  std::string san;  // openssl config syntax, e.g. "DNS:a,IP:10.0.0.1"
  std::string key_usage;
  std::string ext_key_usage;
  const EVP_MD* md = EVP_sha256();
};

// A PEM CSR made the way kubelet's Go code makes one: subject entries in the
// given order, extensions only when asked for, signed by `key`.
std::string MakeCsr(EVP_PKEY* key, const CsrSpec& spec = {}) {
  ossl::X509ReqPtr req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), X509_REQ_VERSION_1) != 1) throw std::runtime_error("req");
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  for (const auto& [field, value] : spec.subject) {
    if (X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                   0) != 1) {
      throw std::runtime_error("subject");
    }
  }
  if (X509_REQ_set_pubkey(req.get(), key) != 1) throw std::runtime_error("pubkey");
  ossl::ExtStackPtr exts(sk_X509_EXTENSION_new_null());
  auto add = [&](int nid, const std::string& value) {
    if (value.empty()) return;
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, nullptr, nullptr, req.get(), nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (!ext) throw std::runtime_error("extension " + value);
    sk_X509_EXTENSION_push(exts.get(), ext);
  };
  add(NID_subject_alt_name, spec.san);
  add(NID_key_usage, spec.key_usage);
  add(NID_ext_key_usage, spec.ext_key_usage);
  if (sk_X509_EXTENSION_num(exts.get()) > 0 && X509_REQ_add_extensions(req.get(), exts.get()) != 1) {
    throw std::runtime_error("add extensions");
  }
  const bool eddsa = EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519;
  if (X509_REQ_sign(req.get(), key, eddsa ? nullptr : spec.md) <= 0) throw std::runtime_error("sign");
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509_REQ(bio.get(), req.get());
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Csr MustParse(const std::string& pem) {
  auto csr = ParseCsr(pem);
  if (!csr.ok()) throw std::runtime_error("ParseCsr: " + csr.status().ToString());
  return std::move(csr).value();
}

MachineFacts Facts() {
  MachineFacts f;
  f.hostname = "node-a";
  f.dns_names = {"node-a.rack1.example.com"};
  f.ip_addresses = {"10.0.0.5", "fd00::5"};
  f.state = "provisioned";
  f.last_attested_at = 1'700'000'000 - 60;
  return f;
}
constexpr int64_t kNow = 1'700'000'000;

std::vector<std::string> Reasons(const std::vector<Refusal>& refusals) {
  std::vector<std::string> out;
  for (const auto& r : refusals) out.push_back(r.reason);
  return out;
}
using Rs = std::vector<std::string>;

std::vector<Refusal> CheckClient(const Csr& csr, const MachineFacts& f = Facts(),
                                 const std::vector<std::string>& usages = kClientUsages) {
  return Check(csr, Kind::kClient, usages, f, RuleOptions{}, false, kNow);
}
std::vector<Refusal> CheckServing(const Csr& csr, const MachineFacts& f = Facts(),
                                  const std::vector<std::string>& usages = kServingUsages) {
  return Check(csr, Kind::kServing, usages, f, RuleOptions{}, false, kNow);
}

std::string Dump(const std::vector<Refusal>& refusals) {
  std::string out;
  for (const auto& r : refusals) out += r.reason + ": " + r.message + "\n";
  return out;
}

// A fresh directory under $TMPDIR, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rackgate-csr-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool HaveOpenssl() { return ::access(kOpenssl, X_OK) == 0; }

// Runs a shell command; returns its exit status and, in *out, its stdout+stderr.
int Shell(const std::string& cmd, std::string* out = nullptr) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  int rc = pclose(p);
  if (out) *out = text;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string ReadText(const std::string& path) {
  std::string text;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

ossl::X509Ptr CertFromPem(const std::string& pem) {
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return ossl::X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

std::string Pem(const std::string& type, const std::vector<uint8_t>& der) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio(bio.get(), type.c_str(), "", der.data(), static_cast<long>(der.size()));
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::vector<uint8_t> Der(const std::string& pem) {
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  ossl::X509ReqPtr req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  unsigned char* der = nullptr;
  int n = i2d_X509_REQ(req.get(), &der);
  std::vector<uint8_t> out(der, der + n);
  OPENSSL_free(der);
  return out;
}

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

// ---------------------------------------------------------------- signing

class SignerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = GenerateClusterCa("rackgate lab cluster CA", 30, dir_ / "ca.pem", dir_ / "ca.key");
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto signer = LocalCaSigner::Load(dir_ / "ca.pem", dir_ / "ca.key");
    ASSERT_TRUE(signer.ok()) << signer.status().ToString();
    signer_ = std::move(*signer);
  }

  Issued MustSign(const Csr& csr, Kind kind, int64_t now = std::time(nullptr)) {
    auto issued = signer_->Sign(csr, DefaultProfile(kind), now);
    if (!issued.ok()) throw std::runtime_error(issued.status().ToString());
    return std::move(issued).value();
  }

  // `openssl verify` against the CA, for `purpose` (sslclient/sslserver).
  void ExpectOpensslVerifies(const Issued& issued, const char* purpose) {
    if (!HaveOpenssl()) return;
    WriteText(dir_ / "leaf.pem", issued.certificate_pem);
    std::string out;
    EXPECT_EQ(Shell(std::string(kOpenssl) + " verify -x509_strict -purpose " + purpose + " -CAfile " +
                      (dir_ / "ca.pem") + " " + (dir_ / "leaf.pem"),
                  &out),
              0)
        << out;
  }

  TempDir dir_;
  std::unique_ptr<LocalCaSigner> signer_;
};

std::set<std::string> Eku(X509* cert) {
  std::set<std::string> out;
  ossl::EkuPtr eku(static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(cert, NID_ext_key_usage, nullptr, nullptr)));
  for (int i = 0; eku && i < sk_ASN1_OBJECT_num(eku.get()); ++i) {
    out.insert(OBJ_nid2sn(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku.get(), i))));
  }
  return out;
}

std::vector<std::string> SubjectEntries(X509* cert) {
  std::vector<std::string> out;
  X509_NAME* name = X509_get_subject_name(cert);
  for (int i = 0; i < X509_NAME_entry_count(name); ++i) {
    X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
    const ASN1_STRING* v = X509_NAME_ENTRY_get_data(e);
    out.push_back(std::string(OBJ_nid2sn(OBJ_obj2nid(X509_NAME_ENTRY_get_object(e)))) + "=" +
                  std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(v)),
                              static_cast<size_t>(ASN1_STRING_length(v))));
  }
  return out;
}

int64_t UnixTime(const ASN1_TIME* t) {
  struct tm tm = {};
  ASN1_TIME_to_tm(t, &tm);
  return timegm(&tm);
}

TEST_F(SignerTest, IssuesClientCertificate) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  const int64_t now = std::time(nullptr);
  Issued issued = MustSign(csr, Kind::kClient, now);
  ExpectOpensslVerifies(issued, "sslclient");
  EXPECT_EQ(issued.ca_pem, ReadText(dir_ / "ca.pem"));
  EXPECT_EQ(issued.ca_pem, signer_->ca_pem());

  auto cert = CertFromPem(issued.certificate_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(SubjectEntries(cert.get()), (Rs{"O=system:nodes", "CN=system:node:node-a"}));
  EXPECT_EQ(X509_get_ext_by_NID(cert.get(), NID_subject_alt_name, -1), -1) << "no SAN on a client cert";
  EXPECT_EQ(Eku(cert.get()), std::set<std::string>{"clientAuth"});
  EXPECT_EQ(X509_get_key_usage(cert.get()), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  const uint32_t flags = X509_get_extension_flags(cert.get());
  EXPECT_FALSE(flags & EXFLAG_CA);
  EXPECT_TRUE(flags & EXFLAG_BCONS);
  int crit = 0;
  BASIC_CONSTRAINTS* bc = static_cast<BASIC_CONSTRAINTS*>(X509_get_ext_d2i(cert.get(), NID_basic_constraints, &crit, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(crit, 1);
  BASIC_CONSTRAINTS_free(bc);
  ASSERT_NE(X509_get0_subject_key_id(cert.get()), nullptr);
  auto ca = CertFromPem(issued.ca_pem);
  const ASN1_OCTET_STRING* akid = X509_get0_authority_key_id(cert.get());
  ASSERT_NE(akid, nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(akid, X509_get0_subject_key_id(ca.get())), 0);

  EXPECT_EQ(issued.not_before, now - 300);
  EXPECT_EQ(issued.not_after, now + 365 * 86400 < UnixTime(X509_get0_notAfter(ca.get()))
                                  ? now + 365 * 86400
                                  : UnixTime(X509_get0_notAfter(ca.get())));
  EXPECT_EQ(UnixTime(X509_get0_notBefore(cert.get())), issued.not_before);
  EXPECT_EQ(UnixTime(X509_get0_notAfter(cert.get())), issued.not_after);

  EXPECT_EQ(issued.serial_hex.size(), 32u);
  ossl::BnPtr serial(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  char* hex = BN_bn2hex(serial.get());
  std::string want = issued.serial_hex;
  want.erase(0, want.find_first_not_of('0'));
  std::string got(hex);
  for (auto& c : got) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  got.erase(0, got.find_first_not_of('0'));
  OPENSSL_free(hex);
  EXPECT_EQ(got, want);
  EXPECT_FALSE(BN_is_negative(serial.get()));
  EXPECT_EQ(X509_get_signature_nid(cert.get()), NID_ecdsa_with_SHA256);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key.get()), 1);
}

TEST_F(SignerTest, IssuesServingCertificateWithCanonicalSans) {
  auto key = NewKey("EC", "P-256");
  CsrSpec spec;
  spec.san = "DNS:NODE-A.Rack1.Example.COM.,DNS:node-a,IP:10.0.0.5,IP:fd00:0:0:0:0:0:0:5";
  Csr csr = MustParse(MakeCsr(key.get(), spec));
  ASSERT_TRUE(CheckServing(csr).empty());
  Issued issued = MustSign(csr, Kind::kServing);
  ExpectOpensslVerifies(issued, "sslserver");
  auto cert = CertFromPem(issued.certificate_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(Eku(cert.get()), std::set<std::string>{"serverAuth"});
  EXPECT_EQ(X509_check_host(cert.get(), "node-a.rack1.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "fd00::5", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "10.0.0.5", 0), 1);
  // The issued certificate is itself a parseable, canonical set of SANs.
  ossl::GeneralNamesPtr names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  ASSERT_TRUE(names);
  std::vector<std::string> dns;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names.get(), i);
    if (gn->type == GEN_DNS) {
      dns.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(gn->d.dNSName)),
                       static_cast<size_t>(ASN1_STRING_length(gn->d.dNSName)));
    }
  }
  EXPECT_EQ(dns, (Rs{"node-a.rack1.example.com", "node-a"}));
  EXPECT_EQ(sk_GENERAL_NAME_num(names.get()), 4);
}

TEST_F(SignerTest, RsaKeysAlsoGetKeyEncipherment) {
  auto key = NewKey("RSA", "2048");
  Issued issued = MustSign(MustParse(MakeCsr(key.get())), Kind::kClient);
  ExpectOpensslVerifies(issued, "sslclient");
  auto cert = CertFromPem(issued.certificate_pem);
  EXPECT_EQ(X509_get_key_usage(cert.get()),
            static_cast<uint32_t>(KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT));
}

// The signer copies the request's SubjectPublicKeyInfo into the certificate
// without re-encoding the key: the certificate's SPKI is byte for byte what
// OpenSSL encodes for the key, for each accepted kind, and for a request that
// sent a compressed point (re-encoded once, at parsing).
TEST_F(SignerTest, CertificateCarriesTheCanonicalKey) {
  auto der_of = [](auto&& encode) {
    unsigned char* der = nullptr;
    const int n = encode(&der);
    Bytes out(der, der + std::max(n, 0));
    OPENSSL_free(der);
    return out;
  };
  std::vector<std::pair<std::string, ossl::PkeyPtr>> keys;
  keys.emplace_back("P-256", NewKey("EC", "P-256"));
  keys.emplace_back("P-384", NewKey("EC", "P-384"));
  keys.emplace_back("RSA-2048", NewKey("RSA", "2048"));
  keys.emplace_back("P-256 compressed", NewKey("EC", "P-256"));
  ASSERT_EQ(EVP_PKEY_set_utf8_string_param(keys.back().second.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                           OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_COMPRESSED),
            1);
  for (const auto& [name, key] : keys) {
    Csr csr = MustParse(MakeCsr(key.get()));
    auto cert = CertFromPem(MustSign(csr, Kind::kClient).certificate_pem);
    ASSERT_TRUE(cert) << name;
    const Bytes in_cert = der_of([&](unsigned char** out) { return i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert.get()), out); });
    ossl::PkeyPtr uncompressed(EVP_PKEY_dup(key.get()));
    if (name == "P-256 compressed") {
      ASSERT_EQ(EVP_PKEY_set_utf8_string_param(uncompressed.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT,
                                               OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_UNCOMPRESSED),
                1);
    }
    const Bytes canonical = der_of([&](unsigned char** out) { return i2d_PUBKEY(uncompressed.get(), out); });
    EXPECT_FALSE(canonical.empty()) << name;
    EXPECT_EQ(csr.spki_der, canonical) << name;
    EXPECT_EQ(in_cert, canonical) << name;
    EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(cert.get()), key.get()), 1) << name;
  }
}

TEST_F(SignerTest, NeverOutlivesTheCa) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  auto ca = CertFromPem(signer_->ca_pem());
  const int64_t ca_end = UnixTime(X509_get0_notAfter(ca.get()));
  Issued issued = MustSign(csr, Kind::kClient);
  EXPECT_EQ(issued.not_after, ca_end) << "30-day CA, one-year profile";
  auto late = signer_->Sign(csr, DefaultProfile(Kind::kClient), ca_end);
  EXPECT_EQ(late.status().reason(), "ca_expired");
}

TEST_F(SignerTest, RefusesBadProfilesAndSubjects) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  Profile p = DefaultProfile(Kind::kClient);
  p.validity_seconds = 0;
  EXPECT_EQ(signer_->Sign(csr, p, std::time(nullptr)).status().reason(), "csr_profile_invalid");
  csr.common_names.push_back("system:node:node-b");
  EXPECT_EQ(signer_->Sign(csr, DefaultProfile(Kind::kClient), std::time(nullptr)).status().reason(),
            "csr_subject_common_name");
  Csr no_sans = MustParse(MakeCsr(key.get()));
  EXPECT_EQ(signer_->Sign(no_sans, DefaultProfile(Kind::kServing), std::time(nullptr)).status().reason(),
            "csr_serving_no_sans");
}

// Sign is thread-safe: concurrent issuance yields distinct, valid serials.
TEST_F(SignerTest, ConcurrentSigning) {
  auto key = NewKey("EC", "P-256");
  Csr csr = MustParse(MakeCsr(key.get()));
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::vector<std::string>> serials(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto issued = signer_->Sign(csr, DefaultProfile(Kind::kClient), std::time(nullptr));
        if (issued.ok() && CertFromPem(issued->certificate_pem)) serials[t].push_back(issued->serial_hex);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> all;
  for (const auto& v : serials) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(SignerTest, GenerateRefusesToOverwrite) {
  EXPECT_EQ(GenerateClusterCa("x", 30, dir_ / "ca.pem", dir_ / "other.key").reason(), "pki_exists");
  EXPECT_EQ(GenerateClusterCa("x", 30, dir_ / "other.pem", dir_ / "ca.key").reason(), "pki_exists");
  struct stat st = {};
  ASSERT_EQ(::stat((dir_ / "ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(ValidateClusterCa(dir_ / "ca.pem", dir_ / "ca.key").ok());
}

// A P-384 CA made the way an operator might make one; signs with SHA-384.
TEST(ClusterCa, P384CaSignsWithSha384) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no " << kOpenssl;
  TempDir dir;
  std::string out;
  ASSERT_EQ(Shell(std::string(kOpenssl) +
                    " req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-384 -nodes -days 30"
                    " -subj '/CN=cluster CA' -keyout " + (dir / "ca.key") + " -out " + (dir / "ca.pem") +
                    " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign",
                &out),
            0)
      << out;
  ASSERT_TRUE(ValidateClusterCa(dir / "ca.pem", dir / "ca.key").ok());
  auto signer = LocalCaSigner::Load(dir / "ca.pem", dir / "ca.key");
  ASSERT_TRUE(signer.ok()) << signer.status().ToString();
  auto key = NewKey("EC", "P-256");
  auto issued = (*signer)->Sign(MustParse(MakeCsr(key.get())), DefaultProfile(Kind::kClient), std::time(nullptr));
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  auto cert = CertFromPem(issued->certificate_pem);
  EXPECT_EQ(X509_get_signature_nid(cert.get()), NID_ecdsa_with_SHA384);
  WriteText(dir / "leaf.pem", issued->certificate_pem);
  EXPECT_EQ(Shell(std::string(kOpenssl) + " verify -CAfile " + (dir / "ca.pem") + " " + (dir / "leaf.pem"), &out), 0)
      << out;
}

// Writes a self-signed certificate for `key` with the given CA bits and
// validity (days relative to now) to `path`.
void WriteSelfSigned(EVP_PKEY* key, bool ca, bool cert_sign, int from_days, int to_days,
                     const std::string& path) {
  ossl::X509Ptr cert(X509_new());
  X509_set_version(cert.get(), X509_VERSION_3);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(from_days) * 86400);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(to_days) * 86400);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("ca"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), key);
  auto add = [&](int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
    ossl::ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    X509_add_ext(cert.get(), ext.get(), -1);
  };
  add(NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  add(NID_key_usage, cert_sign ? "critical,keyCertSign" : "critical,digitalSignature");
  X509_sign(cert.get(), key, EVP_sha256());
  ossl::BioPtr bio(BIO_new_file(path.c_str(), "w"));
  PEM_write_bio_X509(bio.get(), cert.get());
}

void WriteKey(EVP_PKEY* key, const std::string& path, const char* passphrase = nullptr) {
  ossl::BioPtr bio(BIO_new_file(path.c_str(), "w"));
  if (passphrase) {
    PEM_write_bio_PrivateKey(bio.get(), key, EVP_aes_256_cbc(), nullptr, 0, nullptr,
                             const_cast<char*>(passphrase));
  } else {
    PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  }
}

TEST(ClusterCa, ValidateRefusesUnusableCas) {
  TempDir dir;
  auto key = NewKey("EC", "P-256");
  auto other = NewKey("EC", "P-256");
  WriteKey(key.get(), dir / "key.pem");
  auto validate = [&](bool ca, bool cert_sign, int from, int to) {
    WriteSelfSigned(key.get(), ca, cert_sign, from, to, dir / "ca.pem");
    return ValidateClusterCa(dir / "ca.pem", dir / "key.pem").reason();
  };
  EXPECT_EQ(validate(true, true, -1, 30), "");
  EXPECT_EQ(validate(false, true, -1, 30), "ca_invalid") << "CA:FALSE";
  EXPECT_EQ(validate(true, false, -1, 30), "ca_invalid") << "no keyCertSign";
  EXPECT_EQ(validate(true, true, -30, -1), "ca_expired");
  EXPECT_EQ(validate(true, true, 1, 30), "ca_invalid") << "not yet valid";

  WriteSelfSigned(key.get(), true, true, -1, 30, dir / "ca.pem");
  WriteKey(other.get(), dir / "other.pem");
  EXPECT_EQ(ValidateClusterCa(dir / "ca.pem", dir / "other.pem").reason(), "ca_key_mismatch");
  // An encrypted key fails instead of prompting for a passphrase.
  WriteKey(key.get(), dir / "enc.pem", "secret");
  EXPECT_EQ(ValidateClusterCa(dir / "ca.pem", dir / "enc.pem").reason(), "ca_invalid");
  Status missing = ValidateClusterCa(dir / "nope.pem", dir / "key.pem");
  EXPECT_EQ(missing.code(), Status::Code::kIoError);
  EXPECT_FALSE(LocalCaSigner::Load(dir / "ca.pem", dir / "other.pem").ok());

  auto rsa = NewKey("RSA", "1024");
  WriteKey(rsa.get(), dir / "rsa.pem");
  WriteSelfSigned(rsa.get(), true, true, -1, 30, dir / "rsa-ca.pem");
  EXPECT_EQ(ValidateClusterCa(dir / "rsa-ca.pem", dir / "rsa.pem").reason(), "ca_key_unsupported");
}

}  // namespace
}  // namespace rackgate::daemon::csr
