// The core's test fixture: a real store, the services and soft-TPM machines.
#include "core/testing/core_fixture.h"

#include <stdlib.h>

#include <stdexcept>

#include "attest/quote.h"
#include "core/secrets.h"
#include "core/signer.h"
#include "storage/testing/fake_store.h"
#include "storage/testing/test_store.h"

namespace rackgate::core::testing {

namespace {

using rackgate::testing::SoftKey;

}  // namespace

ScratchDir::ScratchDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/rackgate-core-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

SoftMachine::SoftMachine()
    : ek(rackgate::testing::TestKeyPool().Next(SoftKey::EkSpec(attest::kAlgRsa))),
      ak(rackgate::testing::TestKeyPool().Next(SoftKey::AkSpec(attest::kAlgRsa))) {
  for (uint32_t i = 0; i < 24; ++i) pcrs[attest::kAlgSha256][i] = Bytes(32, static_cast<uint8_t>(i));
}

wire::ChallengeRequest SoftMachine::ChallengeRequest() const {
  wire::ChallengeRequest r;
  r.ek_public = ek.tpm2b_public();
  r.ak_public = ak.tpm2b_public();
  return r;
}

Bytes SoftMachine::QuoteMessage(const ChallengeResult& challenge) const {
  rackgate::testing::SoftQuoteSpec q;
  q.selection = challenge.pcr_selection;
  q.clock = clock;
  q.qualified_signer = rackgate::testing::AkQualifiedName(ek, ak);
  return rackgate::testing::MakeQuoteMessage(q, pcrs, challenge.nonce);
}

wire::EvidenceRequest SoftMachine::Answer(const ChallengeResult& challenge) const {
  auto cred = attest::DecodeCredentialFile(challenge.credential);
  if (!cred.ok()) throw std::runtime_error("credential: " + cred.status().ToString());
  auto secret = ek.ActivateCredential(*cred, ak.name());
  if (!secret) throw std::runtime_error("ActivateCredential refused the credential");
  wire::EvidenceRequest e;
  e.session = challenge.session;
  e.secret = *secret;
  e.quote = QuoteMessage(challenge);
  e.signature = ak.Sign(e.quote);
  for (const auto& s : challenge.pcr_selection) {
    for (uint32_t i : s.pcrs) e.pcrs[s.hash_alg][i] = pcrs.at(s.hash_alg).at(i);
  }
  return e;
}

Bytes SoftMachine::EkHash() const {
  auto h = attest::EkKeyHash(ek.pub());
  if (!h.ok()) throw std::runtime_error("EK hash: " + h.status().ToString());
  return *h;
}

std::string StoreBackendName(const ::testing::TestParamInfo<StoreBackend>& info) {
  if (info.param == StoreBackend::kFake) return "fake";
  return storage::testing::TestingPostgres() ? "postgresql" : "sqlite";
}

CoreTest::CoreTest(StoreBackend backend) {
  // A fresh store: the machines of earlier tests are in none of it, so this
  // test's may have their keys (SoftMachine).
  rackgate::testing::TestKeyPool().Rewind();
  if (backend == StoreBackend::kFake) {
    store_ = std::make_unique<storage::testing::FakeStore>();
  } else {
    // The backend the environment asks for (storage/testing/test_store.h).
    // On a machine without PostgreSQL the test skips (SetUp); SQLite keeps
    // the services' pointers valid until then.
    skip_ = storage::testing::BackendUnavailable();
    auto opened = skip_ ? storage::Store::Open(dir_.File("rackgate.db"))
                        : storage::testing::OpenTestStore(dir_.File("rackgate.db"));
    if (!opened.ok() && opened.status().reason() == "db_backend_unsupported") {
      // A build without the PostgreSQL backend, asked for it: skip, saying so.
      skip_ = opened.status().message();
      opened = storage::Store::Open(dir_.File("rackgate.db"));
    }
    if (!opened.ok()) throw std::runtime_error("store: " + opened.status().ToString());
    store_ = std::move(opened).value();
  }
  storage::Pool pool;
  pool.name = "workers";
  pool.token_required = false;
  if (!store_->PutPool(pool, storage::Actor{"test", "fixture"}, kStart).ok()) throw std::runtime_error("pool");
  options_.require_ek_certificate = false;
  options_.default_pcr_selection = *attest::ParsePcrSelectionList("sha256:0,1,2,3,4,5,6,7");
  options_.busy_queue_delay_ms = 0;
  Restart();
}

void CoreTest::SetUp() {
  if (skip_) GTEST_SKIP() << *skip_;
}

void CoreTest::Restart() {
  attestation_ = std::make_unique<AttestationService>(store_.get(), &anchors_, options_, nullptr,
                                                      [this] { return now_; });
}

storage::Machine CoreTest::Enroll(const SoftMachine& m, const std::string& hostname) {
  storage::Enrollment e;
  e.hostname = hostname;
  e.pool = "workers";
  e.ek_public = m.ek.tpm2b_public();
  e.ek_hash = m.EkHash();
  e.addresses = {{std::string(storage::kAddressInternalIP), "10.0.0.5"}, {std::string(storage::kAddressInternalDNS), hostname + ".example"}};
  auto enrolled = store_->Enroll(e, storage::Actor{"test", "enroll"}, false, now_);
  if (!enrolled.ok()) throw std::runtime_error("enroll: " + enrolled.status().ToString());
  return *enrolled;
}

EvidenceResult CoreTest::Attest(const SoftMachine& m) {
  auto challenge = attestation_->Challenge(m.ChallengeRequest(), caller_);
  if (!challenge.ok()) throw std::runtime_error("challenge: " + challenge.status().ToString());
  auto result = attestation_->Evidence(m.Answer(*challenge), caller_);
  if (!result.ok()) throw std::runtime_error("evidence: " + result.status().ToString());
  return std::move(result).value();
}

namespace {
constexpr char kJoinPublicTemplate[] =
    R"({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/etc/pool", "mode": 420,)"
    R"( "contents": {"source": "data:,{{pool}}"}}]}})";
}  // namespace

JoinTest::JoinTest() {
  csr_options_.cluster_ca_certificate = dir_.File("ca.crt");
  csr_options_.cluster_ca_key = dir_.File("ca.key");
  if (!csr::GenerateClusterCa("test cluster CA", 3650, csr_options_.cluster_ca_certificate,
                              csr_options_.cluster_ca_key)
           .ok()) {
    throw std::runtime_error("cluster CA");
  }
  BuildJoinServices();
}

void JoinTest::BuildJoinServices() {
  csrs_ = std::make_unique<CsrService>(store_.get(), attestation_.get(), csr_options_, nullptr);
  IgnitionOptions o;
  o.appliance_url = "https://appliance.example:22623";
  o.appliance_ca_pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
  ignition_ = std::make_unique<IgnitionService>(store_.get(), attestation_.get(), o, nullptr);
}

void JoinTest::SetUp() {
  CoreTest::SetUp();
  if (skip_) return;
  ASSERT_TRUE(store_->SetPoolTemplate("workers", "public", std::string(kJoinPublicTemplate),
                                      Sha256Hex(kJoinPublicTemplate), storage::Actor{"test", ""}, now_)
                  .ok());
}

}  // namespace rackgate::core::testing
