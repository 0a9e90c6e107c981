// `rackgatectl ca rotate --appliance` in process, on a scratch state
// directory and SQLite store: every stage, and every reason it refuses with.
#include "ctl/state/appliance_ca_rotation.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/pki.h"
#include "storage/store.h"

namespace rackgate::ctl {
namespace {

class ApplianceCaRotation : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ca_rotation_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(core::CreateCa({}, dir_ + "/ca/ca.crt", dir_ + "/ca/ca.key").ok());
    core::ServingCertOptions names;
    names.dns_names = {"rackgate.example"};
    names.ip_addresses = {"192.0.2.10"};
    ASSERT_TRUE(core::IssueServingCertificate(names, dir_ + "/ca/ca.crt", dir_ + "/ca/ca.key",
                                              dir_ + "/tls/server.crt", dir_ + "/tls/server.key")
                    .ok());
    auto store = storage::OpenStore(dir_ + "/rackgate.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    ASSERT_TRUE(store_->PutPool(storage::Pool{"workers"}, {"test", ""}, 1, std::nullopt, {}, nullptr).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `rackgatectl ca ARGS... --state-dir DIR`; its exit code, stderr in err_.
  int Ca(std::vector<std::string> args) {
    args.insert(args.begin(), {"rackgatectl", "ca"});
    args.push_back("--state-dir");
    args.push_back(dir_);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    ::testing::internal::CaptureStdout();
    const int rc = RunApplianceCa(static_cast<int>(argv.size()), argv.data(), 2);
    out_ = ::testing::internal::GetCapturedStdout();
    err_ = ::testing::internal::GetCapturedStderr();
    return rc;
  }
  // A machine with an installed agent that never attested (as one that
  // was off all along): it has not taken the bundle.
  void EnrollJoined(const std::string& hostname, uint8_t tag) {
    storage::Enrollment e;
    e.hostname = hostname;
    e.pool = "workers";
    e.ek_public = storage::Bytes(64, tag);
    e.ek_hash = storage::Bytes(32, tag);
    auto m = store_->Enroll(e, {"test", ""}, false, 2);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto joined = store_->Transition(m->id, {storage::MachineState::kEnrolled}, storage::MachineState::kJoined,
                                     {"test", ""}, "test", 3);
    ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  }
  std::string Fingerprint(const std::string& path) { return *core::CertificateFingerprint(path); }

  std::string dir_, out_, err_;
  std::unique_ptr<storage::Store> store_;
};

TEST_F(ApplianceCaRotation, EveryStageAndEveryRefusal) {
  EXPECT_EQ(Ca({"rotate", "--appliance", "switch"}), 1);
  EXPECT_NE(err_.find("ca_rotation_none"), std::string::npos) << err_;
  EXPECT_EQ(Ca({"rotate", "--appliance", "retire"}), 1);
  EXPECT_NE(err_.find("ca_rotation_none"), std::string::npos) << err_;

  ASSERT_EQ(Ca({"rotate", "--appliance", "prepare"}), 0) << err_;
  const std::string next = Fingerprint(dir_ + "/ca/next.crt");
  EXPECT_TRUE(core::CheckCaKeyPair(dir_ + "/ca/next.crt", dir_ + "/ca/next.key").ok());
  EXPECT_EQ(Ca({"rotate", "--appliance", "prepare"}), 1);
  EXPECT_NE(err_.find("ca_rotation_in_progress"), std::string::npos) << err_;
  EXPECT_EQ(Ca({"rotate", "--appliance", "retire"}), 1);
  EXPECT_NE(err_.find("ca_rotation_stage"), std::string::npos) << err_;
  ASSERT_EQ(Ca({"bundle", "--appliance"}), 0) << err_;
  EXPECT_EQ(out_.find("-----BEGIN CERTIFICATE-----", out_.find("-----END CERTIFICATE-----")) == std::string::npos,
            false)
      << "the bundle holds both CAs: " << out_;

  // Another appliance, before next.* were copied to it.
  std::filesystem::rename(dir_ + "/ca/next.key", dir_ + "/next.key.saved");
  EXPECT_EQ(Ca({"rotate", "--appliance", "switch"}), 1);
  EXPECT_NE(err_.find("ca_next_missing"), std::string::npos) << err_;
  EXPECT_NE(err_.find("docs/ha.md"), std::string::npos) << err_;
  // ... or with a key that is not the next CA's.
  std::filesystem::copy_file(dir_ + "/ca/ca.key", dir_ + "/ca/next.key");
  EXPECT_EQ(Ca({"rotate", "--appliance", "switch"}), 1);
  EXPECT_NE(err_.find("ca_next_mismatch"), std::string::npos) << err_;
  std::filesystem::rename(dir_ + "/next.key.saved", dir_ + "/ca/next.key");

  EnrollJoined("node-off", 7);
  EXPECT_EQ(Ca({"rotate", "--appliance", "switch"}), 1);
  EXPECT_NE(err_.find("ca_rotation_unconfirmed: 1 machine(s)"), std::string::npos) << err_;
  EXPECT_NE(err_.find("node-off"), std::string::npos) << err_;
  EXPECT_FALSE(*core::SignedBy(dir_ + "/tls/server.crt", dir_ + "/ca/next.crt"));  // refused: nothing changed
  ASSERT_EQ(Ca({"rotate", "--appliance", "switch", "--force"}), 0) << err_;
  EXPECT_TRUE(*core::SignedBy(dir_ + "/tls/server.crt", dir_ + "/ca/next.crt"));
  auto names = core::ReadServingCertNames(dir_ + "/tls/server.crt");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->dns_names, std::vector<std::string>{"rackgate.example"});
  EXPECT_EQ(names->ip_addresses, std::vector<std::string>{"192.0.2.10"});
  EXPECT_EQ((*store_->GetCaRotation("appliance"))->stage, "switched");

  const std::string old = Fingerprint(dir_ + "/ca/ca.crt");
  ASSERT_EQ(Ca({"rotate", "--appliance", "retire", "--json"}), 0) << err_;
  EXPECT_EQ(Fingerprint(dir_ + "/ca/ca.crt"), next);
  EXPECT_TRUE(core::CheckCaKeyPair(dir_ + "/ca/ca.crt", dir_ + "/ca/ca.key").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ca/next.crt"));
  size_t retired = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/ca/retired")) {
    EXPECT_EQ(Fingerprint(e.path().string() + "/ca.crt"), old);
    ++retired;
  }
  EXPECT_EQ(retired, 1u);
  EXPECT_FALSE(store_->GetCaRotation("appliance")->has_value());
  EXPECT_EQ(Ca({"rotate", "--appliance", "retire"}), 1);
  EXPECT_NE(err_.find("ca_rotation_none"), std::string::npos) << err_;
}

TEST_F(ApplianceCaRotation, UsageIsStrict) {
  EXPECT_EQ(Ca({"rotate", "--appliance"}), 2);
  EXPECT_EQ(Ca({"rotate", "--appliance", "prepar"}), 2);
  EXPECT_NE(err_.find("did you mean 'prepare'"), std::string::npos) << err_;
  EXPECT_EQ(Ca({"rotate", "status"}), 2);  // which CA?
  EXPECT_EQ(Ca({"bundle", "--appliance", "--force"}), 2);
  EXPECT_EQ(Ca({"rotate", "--appliance", "status", "--json"}), 0) << err_;
  EXPECT_NE(out_.find("\"stage\": \"none\""), std::string::npos) << out_;
}

}  // namespace
}  // namespace rackgate::ctl
