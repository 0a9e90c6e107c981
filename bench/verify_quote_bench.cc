// verify-quote benchmark: in-process TPM2_Quote verifications per second
// (parse TPMS_ATTEST and TPMT_SIGNATURE, verify the signature, check nonce and
// PCR selection, recompute pcrDigest) against the raw OpenSSL signature-verify
// rate for the same key, message and signature, measured in the same run.
// Last line: `verify-quote: rate=R/s ceiling=C/s ratio=X`.
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "attest/quote.h"
#include "attest/testing/soft_tpm.h"

namespace {

using namespace rackgate;          // NOLINT
using namespace rackgate::attest;  // NOLINT
using Clock = std::chrono::steady_clock;

// What a bare verifier does with the same inputs: hash the message and check
// the signature with the key, nothing else.
bool RawVerify(EVP_PKEY* key, const Bytes& msg, const Bytes& der_or_raw_sig, bool rsa) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_PKEY_CTX* pctx = nullptr;
  bool ok = EVP_DigestVerifyInit(ctx, &pctx, EVP_sha256(), nullptr, key) == 1;
  if (ok && rsa) ok = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) == 1;
  ok = ok && EVP_DigestVerify(ctx, der_or_raw_sig.data(), der_or_raw_sig.size(), msg.data(),
                              msg.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

// The signature in the form OpenSSL verifies: the RSA bytes, or DER for ECDSA.
Bytes OpensslSignature(const Bytes& tpmt) {
  auto sig = ParseTpmtSignature(tpmt);
  if (!sig.ok()) throw std::runtime_error("bad signature");
  if (sig->sig_alg != kAlgEcdsa) return sig->rsa_sig;
  ECDSA_SIG* es = ECDSA_SIG_new();
  ECDSA_SIG_set0(es, BN_bin2bn(sig->ecc_r.data(), static_cast<int>(sig->ecc_r.size()), nullptr),
                 BN_bin2bn(sig->ecc_s.data(), static_cast<int>(sig->ecc_s.size()), nullptr));
  unsigned char* p = nullptr;
  int n = i2d_ECDSA_SIG(es, &p);
  Bytes der(p, p + n);
  OPENSSL_free(p);
  ECDSA_SIG_free(es);
  return der;
}

template <typename F>
double RatePerSecond(int iterations, F&& f) {
  auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    if (!f()) throw std::runtime_error("verification failed during the benchmark");
  }
  std::chrono::duration<double> d = Clock::now() - start;
  return iterations / d.count();
}

}  // namespace

int main(int argc, char** argv) {
  bool ecc = false;
  double seconds = 3.0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--key") && i + 1 < argc) {
      ecc = !std::strcmp(argv[++i], "ecc");
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else {
      std::printf("Usage: verify-quote [--key rsa|ecc] [--seconds S]\n"
                  "Quote verifications per second against raw OpenSSL verify of the same\n"
                  "signature, interleaved in rounds; the best round of each is compared.\n");
      return std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  testing::SoftKeySpec spec;
  if (ecc) {
    spec.type = kAlgEcc;
    spec.scheme = kAlgEcdsa;
  }
  testing::SoftKey ak = testing::SoftKey::Generate(spec);
  const Bytes nonce(32, 0x5c);
  PcrValues pcrs;
  testing::SoftQuoteSpec q;
  q.selection = *ParsePcrSelectionList("sha256:0,1,2,3,4,5,6,7,8,9,14");
  for (uint32_t pcr : q.selection[0].pcrs) pcrs[kAlgSha256][pcr] = Bytes(32, static_cast<uint8_t>(pcr));
  const Bytes msg = testing::MakeQuoteMessage(q, pcrs, nonce);
  const Bytes sig = ak.Sign(msg);
  const Bytes raw_sig = OpensslSignature(sig);
  const auto required = *ParsePcrSelectionList("sha256:0,2,4,7");
  auto key = VerifyKey::FromTpmPublic(ak.pub());
  if (!key.ok()) return 1;

  auto ours = [&] { return VerifyQuote(*key, msg, sig, pcrs, nonce, required).ok(); };
  auto raw = [&] { return RawVerify(ak.pkey(), msg, raw_sig, !ecc); };

  // Calibrate a round to ~50 ms, then interleave rounds so that both sides
  // see the same machine load; keep the best round of each.
  const double probe = RatePerSecond(50, raw);
  const int per_round = std::max(20, static_cast<int>(probe * 0.05));
  const int rounds = std::max(4, static_cast<int>(seconds / 0.1));
  double best_raw = 0, best_ours = 0;
  for (int r = 0; r < rounds; ++r) {
    best_raw = std::max(best_raw, RatePerSecond(per_round, raw));
    best_ours = std::max(best_ours, RatePerSecond(per_round, ours));
  }
  std::printf("key=%s pcrs=%zu rounds=%d per_round=%d\n", ecc ? "ecdsa-p256" : "rsa-2048-rsassa",
              q.selection[0].pcrs.size(), rounds, per_round);
  std::printf("verify-quote: rate=%.0f/s ceiling=%.0f/s ratio=%.3f\n", best_ours, best_raw,
              best_ours / best_raw);
  return 0;
}
