// Test fixture of the core: a real store (SQLite in a temporary directory,
// or PostgreSQL under RACKGATE_TEST_STORE=postgresql, so the same tests
// check both backends), the services over it with a settable clock, and
// machines whose TPM is the software TPM (attest/testing/soft_tpm.h), so that challenges, credentials,
// quotes and certifies are real TPM bytes. For core/ tests only.
#ifndef RACKGATE_CORE_TESTING_CORE_FIXTURE_H_
#define RACKGATE_CORE_TESTING_CORE_FIXTURE_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "attest/credential.h"
#include "attest/ek_identity.h"
#include "attest/testing/soft_tpm.h"
#include "core/attestation.h"
#include "storage/store.h"

namespace rackgate::core::testing {

using attest::Bytes;

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A machine's TPM: an EK, an AK made under it, its PCR values (sha256 PCRs
// 0..23, PCR i filled with byte i) and its clock. Its keys come from the
// test binary's key pool (attest/testing/soft_tpm.h, TestKeyPool): distinct
// from every other key of this test, the same as another test's.
struct SoftMachine {
  SoftMachine();
  rackgate::testing::SoftKey ek;
  rackgate::testing::SoftKey ak;
  attest::PcrValues pcrs;
  attest::ClockInfo clock{5000, 1, 0, true};

  wire::ChallengeRequest ChallengeRequest() const;
  // The evidence that answers `challenge` honestly: ActivateCredential, a
  // quote over the nonce of the selected PCRs, signed by the AK.
  wire::EvidenceRequest Answer(const ChallengeResult& challenge) const;
  // The quote message alone (for tests that change it before signing).
  Bytes QuoteMessage(const ChallengeResult& challenge) const;
  Bytes EkHash() const;
};

class CoreTest : public ::testing::Test {
 protected:
  static constexpr int64_t kStart = 1800000000;

  CoreTest();
  // Skips the test when the backend asked for is not installed
  // (RACKGATE_TEST_STORE=postgresql without a server).
  void SetUp() override;

  // Enrolls `m` as `hostname` in pool "workers" (created by the fixture),
  // with InternalIP 10.0.0.5 and a DNS name `hostname`.example.
  storage::Machine Enroll(const SoftMachine& m, const std::string& hostname);
  // Challenge and evidence, expected to pass; the token.
  EvidenceResult Attest(const SoftMachine& m);
  // The reason of a failed result; "" when it is ok.
  template <typename T>
  static std::string ReasonOf(const Result<T>& r) {
    return r.ok() ? std::string() : r.status().reason();
  }

  ScratchDir dir_;
  std::unique_ptr<storage::Store> store_;
  TrustAnchors anchors_{attest::EkTrustStore()};
  AttestationOptions options_;
  int64_t now_ = kStart;
  std::unique_ptr<AttestationService> attestation_;
  Caller caller_{"192.0.2.7:4711", {}};

  // Why SetUp skips (the backend asked for is not there), or nullopt.
  std::optional<std::string> skip_;

  // Rebuilds the service with options_ (after a test changes them).
  void Restart();
};

}  // namespace rackgate::core::testing

#endif  // RACKGATE_CORE_TESTING_CORE_FIXTURE_H_
