// The appliance CA bundle (the rotation record through a bounded cache) and
// the PKI helpers the rotation uses.
#include "core/appliance_ca.h"

#include <gtest/gtest.h>

#include <string>

#include "core/pki.h"
#include "core/testing/csr_test_util.h"
#include "storage/testing/fake_store.h"

namespace rackgate::core {
namespace {

using csr::test_util::TempDir;

// The fake's rotation record, counting reads and able to fail them.
class CountingStore : public storage::CaRotationStore {
 public:
  Result<std::optional<storage::CaRotation>> GetCaRotation(const std::string& kind) override {
    ++reads;
    if (fail) return Status::IoError("db_error", "down");
    return fake_.GetCaRotation(kind);
  }
  Result<storage::CaRotation> PrepareCaRotation(const storage::CaRotation& r, const std::string& detail,
                                                const storage::Actor& actor, int64_t now) override {
    return fake_.PrepareCaRotation(r, detail, actor, now);
  }
  Result<storage::CaRotation> SwitchCaRotation(const std::string& kind, const std::string& sha,
                                               const std::string& detail, const storage::Actor& actor,
                                               int64_t now) override {
    return fake_.SwitchCaRotation(kind, sha, detail, actor, now);
  }
  Status RetireCaRotation(const std::string& kind, const std::string& sha, const std::string& detail,
                          const storage::Actor& actor, int64_t now) override {
    return fake_.RetireCaRotation(kind, sha, detail, actor, now);
  }
  int reads = 0;
  bool fail = false;

 private:
  storage::testing::FakeStore fake_;
};

storage::CaRotation Rotation() {
  storage::CaRotation r;
  r.current_pem = "CURRENT\n";
  r.current_sha256 = std::string(64, 'a');
  r.next_pem = "NEXT\n";
  r.next_sha256 = std::string(64, 'b');
  return r;
}

TEST(ApplianceCaBundle, LocalFilesWithoutARotation) {
  CountingStore store;
  ApplianceCaBundle bundle(&store, "LOCAL", "", std::chrono::hours(1));
  EXPECT_EQ(bundle.Pem(), "LOCAL\n");
  EXPECT_FALSE(bundle.Rotation().has_value());
  // An appliance that has not retired while another has: its next CA too.
  bundle.SetLocal("LOCAL\n", "LOCALNEXT\n");
  EXPECT_EQ(bundle.Pem(), "LOCAL\nLOCALNEXT\n");
}

TEST(ApplianceCaBundle, ReadsTheRecordOncePerTtlAndAtOnceWhenInvalidated) {
  CountingStore store;
  ApplianceCaBundle bundle(&store, "LOCAL\n", "", std::chrono::hours(1));
  EXPECT_EQ(bundle.Pem(), "LOCAL\n");
  EXPECT_EQ(bundle.Pem(), "LOCAL\n");
  EXPECT_EQ(store.reads, 1);  // no read per attestation
  ASSERT_TRUE(store.PrepareCaRotation(Rotation(), "{}", {"test", ""}, 10).ok());
  EXPECT_EQ(bundle.Pem(), "LOCAL\n");  // within the TTL, and not told
  bundle.Invalidate();                 // the "ca" notification
  EXPECT_EQ(bundle.Pem(), "CURRENT\nNEXT\n");
  EXPECT_EQ(bundle.Rotation()->stage, storage::kCaStagePrepared);
  EXPECT_EQ(store.reads, 2);
}

TEST(ApplianceCaBundle, AnExpiredEntryIsReadAgain) {
  CountingStore store;
  ApplianceCaBundle bundle(&store, "LOCAL\n", "", std::chrono::seconds(0));
  EXPECT_EQ(bundle.Pem(), "LOCAL\n");
  ASSERT_TRUE(store.PrepareCaRotation(Rotation(), "{}", {"test", ""}, 10).ok());
  EXPECT_EQ(bundle.Pem(), "CURRENT\nNEXT\n");
}

TEST(ApplianceCaBundle, AStoreFailureKeepsTheLastRecord) {
  CountingStore store;
  ASSERT_TRUE(store.PrepareCaRotation(Rotation(), "{}", {"test", ""}, 10).ok());
  ApplianceCaBundle bundle(&store, "LOCAL\n", "", std::chrono::seconds(0));
  EXPECT_EQ(bundle.Pem(), "CURRENT\nNEXT\n");
  store.fail = true;
  EXPECT_EQ(bundle.Pem(), "CURRENT\nNEXT\n");
}

TEST(MachinesWithoutBundle, CountsInstalledAgentsNotAttestedSincePublished) {
  using storage::MachineState;
  auto machine = [](const std::string& name, MachineState state, std::optional<int64_t> at) {
    storage::Machine m;
    m.hostname = name;
    m.state = state;
    m.last_attested_at = at;
    return m;
  };
  storage::CaRotation r = Rotation();
  r.prepared_at = 100;
  EXPECT_EQ(BundlePublishedAt(r), 100 + kCaBundleCacheSeconds);
  const std::vector<storage::Machine> machines = {
      machine("joined-old", MachineState::kJoined, 50),   machine("joined-new", MachineState::kJoined, 200),
      machine("edge", MachineState::kProvisioned, 102),    machine("never", MachineState::kAttested, std::nullopt),
      machine("enrolled", MachineState::kEnrolled, std::nullopt), machine("revoked", MachineState::kRevoked, 10),
      machine("pending", MachineState::kPending, std::nullopt)};
  std::vector<std::string> names;
  for (const auto& m : MachinesWithoutBundle(machines, BundlePublishedAt(r))) names.push_back(m.hostname);
  EXPECT_EQ(names, (std::vector<std::string>{"joined-old", "edge", "never"}));
}

TEST(Pki, CaCertificateKeyPairAndSignedBy) {
  TempDir dir;
  ASSERT_TRUE(CreateCa({}, dir / "ca/ca.crt", dir / "ca/ca.key").ok());
  ASSERT_TRUE(CreateCa({"next CA", 3650}, dir / "ca/next.crt", dir / "ca/next.key").ok());
  auto info = ReadCaCertificate(dir / "ca/next.crt");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->subject, "CN=next CA");
  EXPECT_EQ(info->sha256.size(), 64u);
  EXPECT_EQ(*CertificateFingerprint(dir / "ca/next.crt"), info->sha256);
  EXPECT_NE(info->pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_GT(info->not_after, 0);

  EXPECT_TRUE(CheckCaKeyPair(dir / "ca/next.crt", dir / "ca/next.key").ok());
  EXPECT_EQ(CheckCaKeyPair(dir / "ca/next.crt", dir / "ca/ca.key").reason(), "pki_invalid");
  EXPECT_EQ(CheckCaKeyPair(dir / "ca/none.crt", dir / "ca/ca.key").reason(), "file_unreadable");

  ServingCertOptions names;
  names.dns_names = {"rackgate.example"};
  ASSERT_TRUE(IssueServingCertificate(names, dir / "ca/next.crt", dir / "ca/next.key", dir / "tls/server.crt",
                                      dir / "tls/server.key")
                  .ok());
  EXPECT_TRUE(*SignedBy(dir / "tls/server.crt", dir / "ca/next.crt"));
  EXPECT_FALSE(*SignedBy(dir / "tls/server.crt", dir / "ca/ca.crt"));
  // A leaf is no CA.
  EXPECT_EQ(ReadCaCertificate(dir / "tls/server.crt").status().reason(), "pki_invalid");
}

}  // namespace
}  // namespace rackgate::core
