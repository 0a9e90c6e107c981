// Test fixture of the core: a store (SQLite in a temporary directory, or
// PostgreSQL under RACKGATE_TEST_STORE=postgresql, or the in-memory fake of
// storage/testing/fake_store.h, so the same tests check every backend), the
// services over it with a settable clock, and
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
#include "core/csr_service.h"
#include "core/ignition_service.h"
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

// Which store a test runs on: the real one the environment asks for
// (SQLite, or PostgreSQL under script/pg-lab), or the in-memory fake.
enum class StoreBackend { kEnvironment, kFake };

// "fake", or the real backend's name ("sqlite", "postgresql"): the suffix
// of a parameterized test's name.
std::string StoreBackendName(const ::testing::TestParamInfo<StoreBackend>& info);

class CoreTest : public ::testing::Test {
 protected:
  static constexpr int64_t kStart = 1800000000;

  explicit CoreTest(StoreBackend backend = StoreBackend::kEnvironment);
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

// A CoreTest with the services a machine joins through after it attested:
// the attested config (IgnitionService; SetUp gives pool "workers" a public
// template writing /etc/pool) and kubelet CSRs (CsrService, with a cluster
// CA made for the test). A fixture that replaces attestation_ calls
// BuildJoinServices() again, since both services hold it.
class JoinTest : public CoreTest {
 protected:
  JoinTest();
  void SetUp() override;
  void BuildJoinServices();

  CsrOptions csr_options_;
  std::unique_ptr<CsrService> csrs_;
  std::unique_ptr<IgnitionService> ignition_;
};

// A CoreTest that runs once per store: on the fake and on the environment's
// real backend. Use TEST_P, and RACKGATE_ON_EVERY_STORE(Fixture) once per
// fixture.
class EveryStoreTest : public ::testing::WithParamInterface<StoreBackend>, public CoreTest {
 protected:
  EveryStoreTest() : CoreTest(GetParam()) {}
};

#define RACKGATE_ON_EVERY_STORE(fixture)                                                                          \
  INSTANTIATE_TEST_SUITE_P(Stores, fixture,                                                                       \
                           ::testing::Values(::rackgate::core::testing::StoreBackend::kFake,                      \
                                             ::rackgate::core::testing::StoreBackend::kEnvironment),              \
                           ::rackgate::core::testing::StoreBackendName)

}  // namespace rackgate::core::testing

#endif  // RACKGATE_CORE_TESTING_CORE_FIXTURE_H_
