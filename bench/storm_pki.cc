// The boot storm's lab PKI, fleet and crypto ceiling (storm_pki.h).
#include "bench/storm_pki.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <thread>

#include "attest/credential.h"
#include "attest/quote.h"
#include "wire/protocol.h"

namespace rackgate::bench {

namespace {

void Check(bool ok, const std::string& what) {
  if (!ok) {
    char buf[256] = {};
    ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
    throw std::runtime_error("boot-storm pki: " + what + (buf[0] ? std::string(": ") + buf : ""));
  }
}

std::string Pem(const std::function<int(BIO*)>& write) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  Check(bio && write(bio.get()) == 1, "PEM write");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  ossl::ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  Check(ext && X509_add_ext(cert, ext.get(), -1) == 1, std::string("extension ") + value);
}

void SetValidity(X509* x, long back_days, long forward_days) {
  Check(X509_gmtime_adj(X509_getm_notBefore(x), -back_days * 86400) != nullptr &&
            X509_gmtime_adj(X509_getm_notAfter(x), forward_days * 86400) != nullptr,
        "validity");
}

void SetSerial(X509* x, uint64_t serial) {
  ossl::BnPtr bn(BN_new());
  Check(bn && BN_set_word(bn.get(), serial) == 1, "serial");
  Check(BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x)) != nullptr, "serial");
}

X509_NAME* NameOf(const std::string& cn, const std::string& o) {
  X509_NAME* n = X509_NAME_new();
  Check(n != nullptr, "name");
  X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                             0);
  return n;
}

LabCa MakeCa(const std::string& cn, const LabCa* issuer, bool path_len_zero) {
  LabCa ca;
  ca.key.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048}));
  Check(ca.key != nullptr, "CA keygen");
  ca.cert.reset(X509_new());
  X509* x = ca.cert.get();
  Check(X509_set_version(x, 2) == 1, "version");
  uint64_t serial = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial));
  SetSerial(x, (serial >> 2) | 1);
  ossl::X509NamePtr name(NameOf(cn, "rackgate boot-storm lab"));
  X509_set_subject_name(x, name.get());
  X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer->cert.get()) : name.get());
  SetValidity(x, 1, 30 * 365);
  X509_set_pubkey(x, ca.key.get());
  AddExt(x, issuer ? issuer->cert.get() : x, NID_basic_constraints,
         path_len_zero ? "critical,CA:TRUE,pathlen:0" : "critical,CA:TRUE");
  AddExt(x, issuer ? issuer->cert.get() : x, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExt(x, issuer ? issuer->cert.get() : x, NID_subject_key_identifier, "hash");
  if (issuer) AddExt(x, issuer->cert.get(), NID_authority_key_identifier, "keyid:always");
  Check(X509_sign(x, issuer ? issuer->key.get() : ca.key.get(), EVP_sha256()) > 0, "CA sign");
  return ca;
}

bool LoadCa(const std::string& cert_path, const std::string& key_path, LabCa* ca) {
  ossl::BioPtr cb(BIO_new_file(cert_path.c_str(), "r"));
  ossl::BioPtr kb(BIO_new_file(key_path.c_str(), "r"));
  if (!cb || !kb) {
    ERR_clear_error();
    return false;
  }
  ca->cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  ca->key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return ca->cert && ca->key;
}

void WriteFile(const std::string& path, const std::string& data, bool secret = false) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  if (!f) throw std::runtime_error("cannot write " + path);
  f.close();
  if (secret) std::filesystem::permissions(path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

}  // namespace

std::string LabCa::cert_pem() const {
  return Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
}
std::string LabCa::key_pem() const {
  return Pem([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
}

EkManufacturer EkManufacturer::Create(const std::string& name) {
  EkManufacturer m;
  m.root = MakeCa(name + " EK Root CA", nullptr, false);
  m.intermediate = MakeCa(name + " EK Intermediate CA", &m.root, true);
  return m;
}

bool EkManufacturer::Load(const std::string& dir, EkManufacturer* out) {
  return LoadCa(dir + "/root.pem", dir + "/root.key", &out->root) &&
         LoadCa(dir + "/intermediate.pem", dir + "/intermediate.key", &out->intermediate);
}

void EkManufacturer::Write(const std::string& dir) const {
  std::filesystem::create_directories(dir);
  WriteFile(dir + "/root.pem", root.cert_pem());
  WriteFile(dir + "/root.key", root.key_pem(), true);
  WriteFile(dir + "/intermediate.pem", intermediate.cert_pem());
  WriteFile(dir + "/intermediate.key", intermediate.key_pem(), true);
}

Bytes EkManufacturer::IssueEkCertificate(EVP_PKEY* ek, uint64_t serial) const {
  ossl::X509Ptr cert(X509_new());
  X509* x = cert.get();
  X509* issuer = intermediate.cert.get();
  Check(x && X509_set_version(x, 2) == 1, "version");
  SetSerial(x, serial);
  X509_set_issuer_name(x, X509_get_subject_name(issuer));
  // TCG EK profile: the subject is empty and the TPM is named in a critical
  // SubjectAltName (RFC 5280 4.2.1.6).
  ossl::X509NamePtr empty(X509_NAME_new());
  X509_set_subject_name(x, empty.get());
  SetValidity(x, 1, 20 * 365);
  X509_set_pubkey(x, ek);

  AddExt(x, issuer, NID_basic_constraints, "critical,CA:FALSE");
  AddExt(x, issuer, NID_key_usage,
         EVP_PKEY_get_base_id(ek) == EVP_PKEY_RSA ? "critical,keyEncipherment" : "critical,keyAgreement");
  AddExt(x, issuer, NID_ext_key_usage, "2.23.133.8.1");
  AddExt(x, issuer, NID_authority_key_identifier, "keyid:always");

  // SAN: directoryName { tcg-at-tpmManufacturer, tcg-at-tpmModel,
  // tcg-at-tpmVersion }, each its own RDN, as TPM vendors write it.
  ossl::X509NamePtr dn(X509_NAME_new());
  const std::pair<const char*, const char*> attrs[] = {
      {"2.23.133.2.1", "id:524B4754"}, {"2.23.133.2.2", "boot-storm"}, {"2.23.133.2.3", "id:00010002"}};
  for (const auto& [oid, value] : attrs) {
    ASN1_OBJECT* obj = OBJ_txt2obj(oid, 1);
    Check(obj != nullptr, "oid");
    Check(X509_NAME_add_entry_by_OBJ(dn.get(), obj, MBSTRING_UTF8,
                                     reinterpret_cast<const unsigned char*>(value), -1, -1, 0) == 1,
          "SAN attribute");
    ASN1_OBJECT_free(obj);
  }
  ossl::GeneralNamesPtr names(GENERAL_NAMES_new());
  GENERAL_NAME* gn = GENERAL_NAME_new();
  gn->type = GEN_DIRNAME;
  gn->d.directoryName = dn.release();
  sk_GENERAL_NAME_push(names.get(), gn);
  Check(X509_add1_ext_i2d(x, NID_subject_alt_name, names.get(), /*crit=*/1, X509V3_ADD_DEFAULT) == 1, "SAN");

  Check(X509_sign(x, intermediate.key.get(), EVP_sha256()) > 0, "EK certificate signature");
  unsigned char* der = nullptr;
  const int n = i2d_X509(x, &der);
  Check(n > 0, "EK certificate DER");
  Bytes out(der, der + n);
  OPENSSL_free(der);
  return out;
}

// ------------------------------------------------------------- RSA keys ----

RsaKeyFactory::RsaKeyFactory(size_t keys, int threads) {
  size_t primes = 2;
  while (primes * (primes - 1) / 2 < keys) ++primes;
  primes_.resize(primes);
  std::vector<std::thread> pool;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  for (int t = 0; t < std::max(1, threads); ++t) {
    pool.emplace_back([&] {
      ossl::BnCtxPtr ctx(BN_CTX_new());
      for (size_t i = next++; i < primes; i = next++) {
        for (;;) {
          ossl::BnPtr p(BN_new());
          if (!p || BN_generate_prime_ex2(p.get(), 1024, 0, nullptr, nullptr, nullptr, ctx.get()) != 1) {
            failed = true;
            return;
          }
          // e = 65537 must be invertible mod p - 1.
          if (BN_mod_word(p.get(), 65537) == 1) continue;
          primes_[i] = std::move(p);
          break;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  if (failed) throw std::runtime_error("boot-storm pki: prime generation failed");
  // Distinct primes: a repeat would give a square modulus (not a valid key).
  std::sort(primes_.begin(), primes_.end(),
            [](const ossl::BnPtr& a, const ossl::BnPtr& b) { return BN_cmp(a.get(), b.get()) < 0; });
  for (size_t i = 1; i < primes_.size(); ++i) {
    if (BN_cmp(primes_[i - 1].get(), primes_[i].get()) == 0) throw std::runtime_error("repeated prime");
  }
}

size_t RsaKeyFactory::capacity() const { return primes_.size() * (primes_.size() - 1) / 2; }

EVP_PKEY* RsaKeyFactory::Key(size_t index) const {
  // The index-th pair (i < j) in row order.
  size_t i = 0, row = primes_.size() - 1;
  while (index >= row) {
    index -= row;
    ++i;
    --row;
  }
  const size_t j = i + 1 + index;
  // p > q so that the CRT coefficient convention (q^-1 mod p) is the usual one.
  const BIGNUM* p = primes_[j].get();
  const BIGNUM* q = primes_[i].get();
  ossl::BnCtxPtr ctx(BN_CTX_new());
  ossl::BnPtr n(BN_new()), e(BN_new()), d(BN_new()), p1(BN_new()), q1(BN_new()), phi(BN_new()),
      dp(BN_new()), dq(BN_new()), qinv(BN_new());
  Check(ctx && n && e && d && p1 && q1 && phi && dp && dq && qinv, "bn alloc");
  Check(BN_mul(n.get(), p, q, ctx.get()) == 1 && BN_num_bits(n.get()) == 2048, "modulus");
  BN_set_word(e.get(), 65537);
  BN_sub(p1.get(), p, BN_value_one());
  BN_sub(q1.get(), q, BN_value_one());
  BN_mul(phi.get(), p1.get(), q1.get(), ctx.get());
  Check(BN_mod_inverse(d.get(), e.get(), phi.get(), ctx.get()) != nullptr, "d");
  BN_mod(dp.get(), d.get(), p1.get(), ctx.get());
  BN_mod(dq.get(), d.get(), q1.get(), ctx.get());
  Check(BN_mod_inverse(qinv.get(), q, p, ctx.get()) != nullptr, "qinv");

  ossl::ParamBldPtr bld(OSSL_PARAM_BLD_new());
  Check(bld && OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) == 1 &&
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, e.get()) == 1 &&
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_D, d.get()) == 1 &&
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_FACTOR1, p) == 1 &&
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_FACTOR2, q) == 1 &&
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_EXPONENT1, dp.get()) == 1 &&
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_EXPONENT2, dq.get()) == 1 &&
            OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_COEFFICIENT1, qinv.get()) == 1,
        "rsa params");
  ossl::ParamPtr params(OSSL_PARAM_BLD_to_param(bld.get()));
  ossl::PkeyCtxPtr pctx(EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr));
  EVP_PKEY* key = nullptr;
  Check(params && pctx && EVP_PKEY_fromdata_init(pctx.get()) == 1 &&
            EVP_PKEY_fromdata(pctx.get(), &key, EVP_PKEY_KEYPAIR, params.get()) == 1,
        "rsa key from primes");
  return key;
}

// ----------------------------------------------------------------- fleet ----

std::string KubeletClientCsr(const std::string& hostname) {
  ossl::PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  ossl::X509ReqPtr req(X509_REQ_new());
  Check(key && req, "csr alloc");
  // kubelet: O=system:nodes, CN=system:node:<name>, nothing else.
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  const std::string cn = "system:node:" + hostname;
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("system:nodes"), -1, -1,
                             0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                             0);
  Check(X509_REQ_set_version(req.get(), 0) == 1 && X509_REQ_set_pubkey(req.get(), key.get()) == 1 &&
            X509_REQ_sign(req.get(), key.get(), EVP_sha256()) > 0,
        "csr sign");
  return Pem([&](BIO* b) { return PEM_write_bio_X509_REQ(b, req.get()); });
}

std::vector<SimMachine> MakeMachines(const FleetSpec& spec, const EkManufacturer& mfr, const RsaKeyFactory* rsa,
                                     const std::string& host_prefix, size_t first, size_t count) {
  std::vector<SimMachine> out;
  out.reserve(count);
  for (size_t i = first; i < first + count; ++i) {
    char host[96];
    std::snprintf(host, sizeof(host), "%s%05zu", host_prefix.c_str(), i);
    const testing::SoftKeySpec ek_spec = testing::SoftKey::EkSpec(spec.ek_type, spec.ek_curve);
    testing::SoftKey ek = spec.ek_type == attest::kAlgRsa ? testing::SoftKey::FromKey(rsa->Key(i), ek_spec)
                                                          : testing::SoftKey::Generate(ek_spec);
    const testing::SoftKeySpec ak_spec = testing::SoftKey::AkSpec(spec.ak_type);
    testing::SoftKey ak = spec.ak_type == attest::kAlgRsa
                              ? testing::SoftKey::FromKey(rsa->Key(spec.rsa_ak_offset + i), ak_spec)
                              : testing::SoftKey::Generate(ak_spec);
    SimMachine m{host, std::move(ek), std::move(ak), {}, {}, {}, {}, {}};
    m.ak_name = m.ak.name();
    m.ak_qualified_name = testing::AkQualifiedName(m.ek, m.ak);
    m.ek_cert_der = mfr.IssueEkCertificate(m.ek.pkey(), 0x5354000000000000ull + i);
    m.csr_pem = KubeletClientCsr(m.hostname);
    wire::ChallengeRequest challenge;
    challenge.ek_public = m.ek.tpm2b_public();
    challenge.ek_certificate = m.ek_cert_der;
    challenge.ak_public = m.ak.tpm2b_public();
    m.challenge_body = wire::EncodeChallengeRequest(challenge);
    out.push_back(std::move(m));
  }
  return out;
}

// --------------------------------------------------------------- ceiling ----

double CryptoCeiling::seconds_per_machine() const {
  return 1.0 / ek_encrypt_per_s + 1.0 / quote_verify_per_s + 1.0 / cert_sign_per_s;
}

double CryptoCeiling::essential_seconds_per_machine() const {
  double s = seconds_per_machine() + 1.0 / csr_verify_per_s;
  if (tls_kex_per_s > 0) s += 1.0 / tls_kex_per_s;
  if (tls_sign_per_s > 0) s += 1.0 / tls_sign_per_s;
  return s;
}

void CryptoCeiling::KeepBest(const CryptoCeiling& o) {
  ek_encrypt_per_s = std::max(ek_encrypt_per_s, o.ek_encrypt_per_s);
  quote_verify_per_s = std::max(quote_verify_per_s, o.quote_verify_per_s);
  csr_verify_per_s = std::max(csr_verify_per_s, o.csr_verify_per_s);
  cert_sign_per_s = std::max(cert_sign_per_s, o.cert_sign_per_s);
  tls_kex_per_s = std::max(tls_kex_per_s, o.tls_kex_per_s);
  tls_sign_per_s = std::max(tls_sign_per_s, o.tls_sign_per_s);
}

namespace {

// This thread's CPU time, in seconds.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Runs `op` for about `seconds` of this thread's CPU and returns operations
// per CPU second: CPU time, as rackgated's cost is counted, so that time the
// thread spent descheduled on a busy machine does not count against it.
template <typename F>
double Rate(double seconds, F&& op) {
  const double start = ThreadCpuSeconds();
  int n = 0;
  double elapsed = 0;
  do {
    for (int i = 0; i < 8; ++i) op();
    n += 8;
    elapsed = ThreadCpuSeconds() - start;
  } while (elapsed < seconds);
  return n / elapsed;
}

Bytes DigestSign(EVP_PKEY* key, const Bytes& msg, bool rsa_pss = false) {
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  EVP_PKEY_CTX* pctx = nullptr;
  Check(EVP_DigestSignInit(ctx.get(), &pctx, EVP_sha256(), nullptr, key) == 1, "sign init");
  if (rsa_pss) EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING);
  size_t n = 0;
  Check(EVP_DigestSign(ctx.get(), nullptr, &n, msg.data(), msg.size()) == 1, "sign size");
  Bytes sig(n);
  Check(EVP_DigestSign(ctx.get(), sig.data(), &n, msg.data(), msg.size()) == 1, "sign");
  sig.resize(n);
  return sig;
}

bool DigestVerify(EVP_PKEY* key, const Bytes& msg, const Bytes& sig) {
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  EVP_PKEY_CTX* pctx = nullptr;
  if (EVP_DigestVerifyInit(ctx.get(), &pctx, EVP_sha256(), nullptr, key) != 1) return false;
  return EVP_DigestVerify(ctx.get(), sig.data(), sig.size(), msg.data(), msg.size()) == 1;
}

// A public-only copy of a key pair, as the appliance holds an EK or AK.
ossl::PkeyPtr PublicOnly(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(key, &der);
  Check(n > 0, "pubkey der");
  const unsigned char* p = der;
  ossl::PkeyPtr pub(d2i_PUBKEY(nullptr, &p, n));
  OPENSSL_free(der);
  Check(pub != nullptr, "pubkey");
  return pub;
}

std::string Describe(EVP_PKEY* key) {
  if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA) return "rsa-" + std::to_string(EVP_PKEY_get_bits(key));
  char group[64] = {};
  size_t len = 0;
  EVP_PKEY_get_group_name(key, group, sizeof(group), &len);
  return std::string("ecdsa-") + group;
}

}  // namespace

CryptoCeiling MeasureCeiling(const SimMachine& m, const std::string& ca_key_path, int rounds, double round_seconds,
                             const std::string& serving_key_path) {
  CryptoCeiling c;
  // EK encryption: what attest::MakeCredential does with the EK's key.
  ossl::PkeyPtr ek_pub = PublicOnly(m.ek.pkey());
  const bool rsa_ek = EVP_PKEY_get_base_id(ek_pub.get()) == EVP_PKEY_RSA;
  Bytes seed(32, 0x11);
  std::function<void()> ek_op;
  std::string ek_group;
  if (rsa_ek) {
    c.ek_op = "rsa-2048 oaep-sha256 encrypt";
    ek_op = [&] {
      ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, ek_pub.get(), nullptr));
      unsigned char* label = static_cast<unsigned char*>(OPENSSL_memdup("IDENTITY", 9));
      Check(EVP_PKEY_encrypt_init(ctx.get()) == 1 && EVP_PKEY_CTX_set_rsa_padding(ctx.get(), RSA_PKCS1_OAEP_PADDING) == 1 &&
                EVP_PKEY_CTX_set_rsa_oaep_md(ctx.get(), EVP_sha256()) == 1 &&
                EVP_PKEY_CTX_set0_rsa_oaep_label(ctx.get(), label, 9) == 1,
            "oaep");
      unsigned char out[512];
      size_t n = sizeof(out);
      Check(EVP_PKEY_encrypt(ctx.get(), out, &n, seed.data(), seed.size()) == 1, "oaep encrypt");
    };
  } else {
    char group[64] = {};
    size_t len = 0;
    EVP_PKEY_get_group_name(ek_pub.get(), group, sizeof(group), &len);
    ek_group = group;
    c.ek_op = std::string("ecdh ") + group + " (ephemeral keygen + derive)";
    ek_op = [&] {
      ossl::PkeyPtr eph(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", ek_group.c_str()));
      ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, eph.get(), nullptr));
      unsigned char z[128];
      size_t n = sizeof(z);
      Check(eph && ctx && EVP_PKEY_derive_init(ctx.get()) == 1 && EVP_PKEY_derive_set_peer(ctx.get(), ek_pub.get()) == 1 &&
                EVP_PKEY_derive(ctx.get(), z, &n) == 1,
            "ecdh");
    };
  }

  // Quote signature: a TPMS_ATTEST of a quote's size, signed by the AK.
  ossl::PkeyPtr ak_pub = PublicOnly(m.ak.pkey());
  testing::SoftQuoteSpec qs;
  qs.selection = *attest::ParsePcrSelectionList("sha256:0,1,2,3,4,5,6,7");
  attest::PcrValues pcrs;
  for (uint32_t i = 0; i < 8; ++i) pcrs[attest::kAlgSha256][i] = Bytes(32, static_cast<uint8_t>(i));
  const Bytes quote = testing::MakeQuoteMessage(qs, pcrs, Bytes(32, 0x22));
  const Bytes quote_sig = DigestSign(m.ak.pkey(), quote);
  c.quote_op = Describe(ak_pub.get()) + " verify";

  // CSR self-signature: a P-256 signature over a request's size.
  ossl::PkeyPtr csr_key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  ossl::PkeyPtr csr_pub = PublicOnly(csr_key.get());
  const Bytes csr_info(180, 0x33);
  const Bytes csr_sig = DigestSign(csr_key.get(), csr_info);
  c.csr_op = "ecdsa-P-256 verify";

  // Certificate signature by the cluster CA's own key, over a TBS of a
  // kubelet client certificate's size.
  ossl::BioPtr kb(BIO_new_file(ca_key_path.c_str(), "r"));
  Check(kb != nullptr, "cannot read " + ca_key_path);
  ossl::PkeyPtr ca_key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  Check(ca_key != nullptr, "cluster CA key " + ca_key_path);
  const Bytes tbs(420, 0x44);
  c.sign_op = Describe(ca_key.get()) + " sign";

  // One TLS 1.3 server handshake's public-key work: the server's X25519
  // share (a key generated, the secret derived with the client's share) and
  // its CertificateVerify, a signature over 64 spaces, the context string and
  // the transcript hash (130 bytes) with the serving key.
  ossl::PkeyPtr client_share(EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519"));
  ossl::PkeyPtr serving_key;
  if (!serving_key_path.empty()) {
    ossl::BioPtr sb(BIO_new_file(serving_key_path.c_str(), "r"));
    Check(sb != nullptr, "cannot read " + serving_key_path);
    serving_key.reset(PEM_read_bio_PrivateKey(sb.get(), nullptr, nullptr, nullptr));
    Check(serving_key != nullptr, "serving key " + serving_key_path);
    c.tls_sign_op = Describe(serving_key.get()) + " sign";
  }
  const Bytes certificate_verify(130, 0x20);
  auto kex = [&] {
    ossl::PkeyPtr share(EVP_PKEY_Q_keygen(nullptr, nullptr, "X25519"));
    ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_pkey(nullptr, share.get(), nullptr));
    unsigned char z[32];
    size_t n = sizeof(z);
    Check(share && ctx && EVP_PKEY_derive_init(ctx.get()) == 1 &&
              EVP_PKEY_derive_set_peer(ctx.get(), client_share.get()) == 1 && EVP_PKEY_derive(ctx.get(), z, &n) == 1,
          "x25519");
  };

  for (int r = 0; r < rounds; ++r) {
    if (serving_key) {
      c.tls_kex_per_s = std::max(c.tls_kex_per_s, Rate(round_seconds, kex));
      c.tls_sign_per_s =
          std::max(c.tls_sign_per_s, Rate(round_seconds, [&] { DigestSign(serving_key.get(), certificate_verify); }));
    }
    c.ek_encrypt_per_s = std::max(c.ek_encrypt_per_s, Rate(round_seconds, ek_op));
    c.quote_verify_per_s = std::max(c.quote_verify_per_s, Rate(round_seconds, [&] {
                                      Check(DigestVerify(ak_pub.get(), quote, quote_sig), "quote verify");
                                    }));
    c.csr_verify_per_s = std::max(c.csr_verify_per_s, Rate(round_seconds, [&] {
                                    Check(DigestVerify(csr_pub.get(), csr_info, csr_sig), "csr verify");
                                  }));
    c.cert_sign_per_s =
        std::max(c.cert_sign_per_s, Rate(round_seconds, [&] { DigestSign(ca_key.get(), tbs); }));
  }
  return c;
}

}  // namespace rackgate::bench
