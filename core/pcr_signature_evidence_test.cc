// The evidence's "pcr_signature" field through the core: a pool whose boot
// policy has a uki_signed rule attests a machine that sends the signature of
// its quoted PCR 11, and refuses one that sends none or a malformed one.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <nlohmann/json.hpp>

#include "attest/eventlog.h"
#include "attest/pcr_signature.h"
#include "attest/testing/event_log_builder.h"
#include "base/ossl.h"
#include "core/attestation.h"
#include "core/testing/core_fixture.h"
#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::core::testing {
namespace {

class PcrSignatureEvidenceTest : public CoreTest {};

// An RSA key; its PEM public key and systemd-measure's signature of `pol`.
struct BuilderKey {
  BuilderKey() {
    ossl::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nullptr));
    EVP_PKEY* raw = nullptr;
    if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
        EVP_PKEY_CTX_set_rsa_keygen_bits(ctx.get(), 2048) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
      throw std::runtime_error("RSA keygen failed");
    }
    key.reset(raw);
  }
  std::string Pem() const {
    ossl::BioPtr bio(BIO_new(BIO_s_mem()));
    PEM_write_bio_PUBKEY(bio.get(), key.get());
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(n));
  }
  Bytes Spki() const {
    unsigned char* der = nullptr;
    const int n = i2d_PUBKEY(key.get(), &der);
    Bytes out(der, der + n);
    OPENSSL_free(der);
    return out;
  }
  // {"sha256": [{"pcrs": [11], "pkfp", "pol", "sig"}]} for PCR 11 = value.
  std::string Document(const Bytes& pcr11) const {
    const Bytes pol = *attest::PolicyPcrDigest(attest::kAlgSha256, 11, pcr11);
    ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
    size_t len = 0;
    EVP_DigestSignInit_ex(ctx.get(), nullptr, "SHA256", nullptr, nullptr, key.get(), nullptr);
    EVP_DigestSign(ctx.get(), nullptr, &len, pol.data(), pol.size());
    Bytes sig(len);
    EVP_DigestSign(ctx.get(), sig.data(), &len, pol.data(), pol.size());
    sig.resize(len);
    nlohmann::json entry = {{"pcrs", {11}},
                            {"pkfp", hex::Encode(*attest::SystemdPublicKeyFingerprint(Spki()))},
                            {"pol", hex::Encode(pol)},
                            {"sig", wire::Base64Encode(sig)}};
    return nlohmann::json{{"sha256", {entry}}}.dump();
  }
  ossl::PkeyPtr key;
};

TEST_F(PcrSignatureEvidenceTest, UkiSignedPolicyJudgesTheSentSignature) {
  const BuilderKey builder;
  storage::Pool pool{"workers"};
  pool.token_required = false;
  pool.boot_policy_json =
      nlohmann::json{{"version", 1}, {"uki_signed", {{"public_keys", {builder.Pem()}}}}}.dump();
  ASSERT_TRUE(store_->PutPool(pool, storage::Actor{"test", ""}, now_).ok());

  // A machine booted through systemd-stub: its log's PCR 11 sections, its
  // TPM's PCR 11 also extended by systemd-pcrphase with "enter-initrd".
  SoftMachine m;
  Enroll(m, "node-1");
  rackgate::testing::EventLogBuilder b;
  b.Measure(11, attest::kEvIpl, rackgate::testing::Str(std::string_view(".linux\0", 7)),
            rackgate::testing::Utf16(".linux", true));
  b.Measure(11, attest::kEvIpl, rackgate::testing::Str("kernel"),
            rackgate::testing::Utf16(".linux", true));
  auto log = attest::ParseEventLog(b.bytes());
  ASSERT_TRUE(log.ok());
  const attest::PcrValues replayed = *attest::Replay(*log);
  for (uint32_t pcr = 0; pcr < 24; ++pcr) m.pcrs[attest::kAlgSha256][pcr] = attest::InitialPcrValue(pcr, 32);
  Bytes pcr11 = replayed.at(attest::kAlgSha256).at(11);
  rackgate::testing::Put(&pcr11, rackgate::testing::Digest(attest::kAlgSha256, rackgate::testing::Str("enter-initrd")));
  pcr11 = rackgate::testing::Digest(attest::kAlgSha256, pcr11);
  m.pcrs[attest::kAlgSha256][11] = pcr11;

  auto answer = [&](std::optional<std::string> signature) {
    auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
    EXPECT_TRUE(challenge.ok());
    EXPECT_EQ(attest::FormatPcrSelectionList(challenge->pcr_selection), "sha256:0,1,2,3,4,5,6,7,11");
    wire::EvidenceRequest e = m.Answer(*challenge);
    e.event_log = b.bytes();
    e.pcr_signature = std::move(signature);
    return attestation_->Evidence(e, caller_);
  };
  auto last_reasons = [&] {
    auto failures = store_->RecentFailures(1);
    return failures.ok() && !failures->empty() ? failures->front().reasons : std::vector<std::string>{};
  };

  EXPECT_EQ(ReasonOf(answer(std::nullopt)), "boot_policy_violation");
  EXPECT_EQ(last_reasons(), std::vector<std::string>{"uki_signed:uki_signature_missing"});
  // Malformed: fails the rule closed, not the request.
  EXPECT_EQ(ReasonOf(answer(R"({"sha256": [{"pcrs": [11]}]})")), "boot_policy_violation");
  EXPECT_EQ(last_reasons(), std::vector<std::string>{"uki_signed:uki_signature_missing"});
  // Another key's signature.
  EXPECT_EQ(ReasonOf(answer(BuilderKey().Document(pcr11))), "boot_policy_violation");
  EXPECT_EQ(last_reasons(), std::vector<std::string>{"uki_signed:uki_signature_untrusted_key"});
  auto ok = answer(builder.Document(pcr11));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->state, "attested");
}

}  // namespace
}  // namespace rackgate::core::testing
