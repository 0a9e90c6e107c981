// Helpers of the CSR tests (core/csr_test.cc, core/signer_test.cc,
// core/csr_service_test.cc): keys and requests made with OpenSSL, the rules'
// facts, scratch directories and PEM/DER conversions. For tests only.
#ifndef RACKGATE_CORE_TESTING_CSR_TEST_UTIL_H_
#define RACKGATE_CORE_TESTING_CSR_TEST_UTIL_H_

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
#include "core/signer.h"
#include "core/csr.h"

namespace rackgate::core::csr::test_util {


using rackgate::testing::SoftKey;
using rackgate::testing::SoftKeySpec;

inline constexpr const char* kOpenssl = "/usr/bin/openssl";
inline const std::string kCn = "system:node:node-a";
inline const std::string kO = "system:nodes";
inline const std::vector<std::string> kClientUsages = {"digital signature", "client auth"};
inline const std::vector<std::string> kServingUsages = {"digital signature", "server auth"};

// ---------------------------------------------------------------- helpers

inline ossl::PkeyPtr NewKey(const char* type, const char* param) {
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
inline std::string MakeCsr(EVP_PKEY* key, const CsrSpec& spec = {}) {
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

// What the agent does for a renewal: sign RenewalSignedMessage(nonce,
// SHA-256(new SPKI)) with the current certificate's key (ECDSA DER or RSA
// PKCS#1 v1.5, SHA-256).
inline attest::Bytes SignWith(EVP_PKEY* key, const attest::Bytes& message) {
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  size_t n = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &n, message.data(), message.size()) != 1) {
    throw std::runtime_error("sign");
  }
  attest::Bytes sig(n);
  if (EVP_DigestSign(ctx.get(), sig.data(), &n, message.data(), message.size()) != 1) throw std::runtime_error("sign");
  sig.resize(n);
  return sig;
}

inline Csr MustParse(const std::string& pem) {
  auto csr = ParseCsr(pem);
  if (!csr.ok()) throw std::runtime_error("ParseCsr: " + csr.status().ToString());
  return std::move(csr).value();
}

inline MachineFacts Facts() {
  MachineFacts f;
  f.hostname = "node-a";
  f.dns_names = {"node-a.rack1.example.com"};
  f.ip_addresses = {"10.0.0.5", "fd00::5"};
  f.state = "provisioned";
  f.last_attested_at = 1'700'000'000 - 60;
  return f;
}
constexpr int64_t kNow = 1'700'000'000;

inline std::vector<std::string> Reasons(const std::vector<Refusal>& refusals) {
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

inline std::string Dump(const std::vector<Refusal>& refusals) {
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

inline bool HaveOpenssl() { return ::access(kOpenssl, X_OK) == 0; }

// Runs a shell command; returns its exit status and, in *out, its stdout+stderr.
inline int Shell(const std::string& cmd, std::string* out = nullptr) {
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

inline std::string ReadText(const std::string& path) {
  std::string text;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

inline ossl::X509Ptr CertFromPem(const std::string& pem) {
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return ossl::X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

inline std::string Pem(const std::string& type, const std::vector<uint8_t>& der) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio(bio.get(), type.c_str(), "", der.data(), static_cast<long>(der.size()));
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

inline std::vector<uint8_t> Der(const std::string& pem) {
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  ossl::X509ReqPtr req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  unsigned char* der = nullptr;
  int n = i2d_X509_REQ(req.get(), &der);
  std::vector<uint8_t> out(der, der + n);
  OPENSSL_free(der);
  return out;
}

}  // namespace rackgate::core::csr::test_util

#endif  // RACKGATE_CORE_TESTING_CSR_TEST_UTIL_H_
