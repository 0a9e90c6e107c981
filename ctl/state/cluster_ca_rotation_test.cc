// Tests for the cluster CA's rotation (ctl/state/cluster_ca_rotation.h):
// every stage's refusal, the bundle at each stage, and the issuer that
// signs under the next CA after switch and a reload (issue 44).
#include "ctl/state/cluster_ca_rotation.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "base/ossl.h"
#include "core/issuer.h"
#include "core/signer.h"
#include "core/testing/csr_test_util.h"
#include "wire/reasons.h"

namespace rackgate::ctl {
namespace {

namespace fs = std::filesystem;
using core::csr::ClusterCaStage;

int CountCertificates(const std::string& pem) {
  int n = 0;
  for (size_t at = pem.find("BEGIN CERTIFICATE"); at != std::string::npos; at = pem.find("BEGIN CERTIFICATE", at + 1)) {
    ++n;
  }
  return n;
}

using core::csr::test_util::ReadText;

std::string IssuerCn(const std::string& pem) {
  ossl::X509Ptr cert = core::csr::test_util::CertFromPem(pem);
  char cn[256] = {};
  if (!cert || X509_NAME_get_text_by_NID(X509_get_issuer_name(cert.get()), NID_commonName, cn, sizeof(cn)) < 0) {
    return "";
  }
  return cn;
}

class ClusterCaRotationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rackgate-cluster-ca-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cluster-ca";
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
    ASSERT_TRUE(core::csr::GenerateClusterCa("old CA", 30, dir_ + "/ca.crt", dir_ + "/ca.key").ok());
    old_pem_ = ReadText(dir_ + "/ca.crt");
  }
  void TearDown() override { fs::remove_all(root_); }

  ClusterCaStage Stage() {
    auto s = core::csr::ReadClusterCaState(dir_ + "/ca.crt");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->stage : ClusterCaStage::kNone;
  }
  static NextClusterCa Generated() {
    NextClusterCa n;
    n.generate = true;
    n.name = "next CA";
    n.days = 30;
    return n;
  }
  // Raised with its registry row's code (wire/reasons.def): a refusal, never an I/O error.
  static void ExpectRefused(const Status& s, const char* reason) {
    const wire::ReasonInfo* row = wire::FindReason(reason);
    ASSERT_NE(row, nullptr) << reason;
    EXPECT_EQ(s.code(), row->code) << s.ToString();
    EXPECT_NE(s.code(), Status::Code::kIoError) << s.ToString();
    EXPECT_EQ(s.reason(), reason) << s.ToString();
  }

  std::string root_, dir_, old_pem_;
};

TEST_F(ClusterCaRotationTest, StagesInOrderAndTheBundleAtEach) {
  auto none = core::csr::ReadClusterCaState(dir_ + "/ca.crt");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->stage, ClusterCaStage::kNone);
  EXPECT_EQ(CountCertificates(none->bundle_pem), 1);

  ASSERT_TRUE(PrepareClusterCaFiles(dir_, Generated()).ok());
  auto prepared = core::csr::ReadClusterCaState(dir_ + "/ca.crt");
  ASSERT_TRUE(prepared.ok());
  EXPECT_EQ(prepared->stage, ClusterCaStage::kPrepared);
  EXPECT_EQ(CountCertificates(prepared->bundle_pem), 2);
  EXPECT_EQ(prepared->bundle_pem.substr(0, old_pem_.size()), old_pem_);  // current first
  EXPECT_EQ(prepared->other_subject, "CN=next CA");
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/next.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  ASSERT_TRUE(SwitchClusterCaFiles(dir_).ok());
  auto switched = core::csr::ReadClusterCaState(dir_ + "/ca.crt");
  ASSERT_TRUE(switched.ok());
  EXPECT_EQ(switched->stage, ClusterCaStage::kSwitched);
  EXPECT_EQ(switched->subject, "CN=next CA");
  EXPECT_EQ(switched->other_sha256, none->sha256);
  EXPECT_EQ(CountCertificates(switched->bundle_pem), 2);
  EXPECT_EQ(ReadText(dir_ + "/previous.crt"), old_pem_);
  EXPECT_TRUE(core::csr::ValidateClusterCa(dir_ + "/ca.crt", dir_ + "/ca.key").ok());

  auto retired = RetireClusterCaFiles(dir_, 1800000000);
  ASSERT_TRUE(retired.ok()) << retired.status().ToString();
  EXPECT_EQ(*retired, dir_ + "/retired/20270115T080000Z");
  EXPECT_EQ(ReadText(*retired + "/ca.crt"), old_pem_);
  EXPECT_TRUE(fs::exists(*retired + "/ca.key"));
  EXPECT_FALSE(fs::exists(dir_ + "/previous.crt"));
  EXPECT_FALSE(fs::exists(dir_ + "/previous.key"));
  auto after = core::csr::ReadClusterCaState(dir_ + "/ca.crt");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->stage, ClusterCaStage::kNone);
  EXPECT_EQ(CountCertificates(after->bundle_pem), 1);
  EXPECT_EQ(after->sha256, switched->sha256);

  // A second rotation may start once the first is retired.
  EXPECT_TRUE(PrepareClusterCaFiles(dir_, Generated()).ok());
}

TEST_F(ClusterCaRotationTest, PrepareRefusedWhileARotationRuns) {
  ASSERT_TRUE(PrepareClusterCaFiles(dir_, Generated()).ok());
  const std::string next = ReadText(dir_ + "/next.crt");
  ExpectRefused(PrepareClusterCaFiles(dir_, Generated()), "ca_rotation_in_progress");
  EXPECT_EQ(ReadText(dir_ + "/next.crt"), next);  // nothing changed
  ASSERT_TRUE(SwitchClusterCaFiles(dir_).ok());
  ExpectRefused(PrepareClusterCaFiles(dir_, Generated()), "ca_rotation_in_progress");
}

TEST_F(ClusterCaRotationTest, PrepareImportsCheckedAsCaImport) {
  ASSERT_TRUE(core::csr::GenerateClusterCa("imported", 30, root_ + "/new.crt", root_ + "/new.key").ok());
  ASSERT_TRUE(core::csr::GenerateClusterCa("other", 30, root_ + "/other.crt", root_ + "/other.key").ok());
  NextClusterCa mismatched;
  mismatched.cert = root_ + "/new.crt";
  mismatched.key = root_ + "/other.key";
  ExpectRefused(PrepareClusterCaFiles(dir_, mismatched), "ca_key_mismatch");
  // The current CA's own key under another certificate rotates nothing.
  NextClusterCa same;
  same.cert = dir_ + "/ca.crt";
  same.key = dir_ + "/ca.key";
  ExpectRefused(PrepareClusterCaFiles(dir_, same), "ca_invalid");
  EXPECT_EQ(Stage(), ClusterCaStage::kNone);
  NextClusterCa good;
  good.cert = root_ + "/new.crt";
  good.key = root_ + "/new.key";
  ASSERT_TRUE(PrepareClusterCaFiles(dir_, good).ok());
  EXPECT_EQ(Stage(), ClusterCaStage::kPrepared);
  EXPECT_EQ(ReadText(dir_ + "/next.crt"), ReadText(root_ + "/new.crt"));
}

TEST_F(ClusterCaRotationTest, PrepareWithoutACurrentCaIsUnusable) {
  fs::remove(dir_ + "/ca.crt");
  const Status s = PrepareClusterCaFiles(dir_, Generated());
  EXPECT_EQ(s.code(), Status::Code::kIoError);
  EXPECT_EQ(s.reason(), "file_unreadable");
}

TEST_F(ClusterCaRotationTest, SwitchRefusals) {
  ExpectRefused(SwitchClusterCaFiles(dir_), "ca_rotation_none");
  ASSERT_TRUE(PrepareClusterCaFiles(dir_, Generated()).ok());
  fs::rename(dir_ + "/next.key", root_ + "/next.key");
  ExpectRefused(SwitchClusterCaFiles(dir_), "ca_next_missing");
  // Another key in next.key's place: the switch is bound to the prepared CA.
  ASSERT_TRUE(core::csr::GenerateClusterCa("other", 30, root_ + "/o.crt", root_ + "/o.key").ok());
  fs::copy_file(root_ + "/o.key", dir_ + "/next.key");
  ExpectRefused(SwitchClusterCaFiles(dir_), "ca_next_mismatch");
  EXPECT_EQ(ReadText(dir_ + "/ca.crt"), old_pem_);  // nothing moved
  fs::remove(dir_ + "/next.key");
  fs::rename(root_ + "/next.key", dir_ + "/next.key");
  ASSERT_TRUE(SwitchClusterCaFiles(dir_).ok());
  ExpectRefused(SwitchClusterCaFiles(dir_), "ca_rotation_stage");
}

// A switch stopped after its links (1) or after moving the key (2): the
// files say "switching", ca.crt is there, the bundle holds both CAs, and
// switch again finishes it.
TEST_F(ClusterCaRotationTest, AnInterruptedSwitchIsFinishedByRunningItAgain) {
  for (int step : {1, 2}) {
    SCOPED_TRACE(step);
    fs::remove_all(dir_);
    ASSERT_TRUE(fs::create_directory(dir_));
    ASSERT_TRUE(core::csr::GenerateClusterCa("old CA", 30, dir_ + "/ca.crt", dir_ + "/ca.key").ok());
    old_pem_ = ReadText(dir_ + "/ca.crt");
    ASSERT_TRUE(PrepareClusterCaFiles(dir_, Generated()).ok());
    const std::string next = ReadText(dir_ + "/next.crt");
    fs::create_hard_link(dir_ + "/ca.crt", dir_ + "/previous.crt");
    fs::create_hard_link(dir_ + "/ca.key", dir_ + "/previous.key");
    if (step == 2) fs::rename(dir_ + "/next.key", dir_ + "/ca.key");
    auto mid = core::csr::ReadClusterCaState(dir_ + "/ca.crt");
    ASSERT_TRUE(mid.ok()) << mid.status().ToString();
    EXPECT_EQ(mid->stage, ClusterCaStage::kSwitching);
    EXPECT_EQ(CountCertificates(mid->bundle_pem), 2);  // old once, next
    ExpectRefused(RetireClusterCaFiles(dir_, 1800000000).status(), "ca_rotation_stage");
    ASSERT_TRUE(SwitchClusterCaFiles(dir_).ok());
    EXPECT_EQ(Stage(), ClusterCaStage::kSwitched);
    EXPECT_EQ(ReadText(dir_ + "/ca.crt"), next);
    EXPECT_EQ(ReadText(dir_ + "/previous.crt"), old_pem_);
    EXPECT_TRUE(core::csr::ValidateClusterCa(dir_ + "/ca.crt", dir_ + "/ca.key").ok());
    EXPECT_TRUE(core::csr::ValidateClusterCa(dir_ + "/previous.crt", dir_ + "/previous.key").ok());
  }
}

TEST_F(ClusterCaRotationTest, RetireRefusals) {
  ExpectRefused(RetireClusterCaFiles(dir_, 1800000000).status(), "ca_rotation_none");
  ASSERT_TRUE(PrepareClusterCaFiles(dir_, Generated()).ok());
  ExpectRefused(RetireClusterCaFiles(dir_, 1800000000).status(), "ca_rotation_stage");
  EXPECT_FALSE(fs::exists(dir_ + "/retired"));
  EXPECT_EQ(Stage(), ClusterCaStage::kPrepared);
}

// The daemon's issuer: the bundle beside each certificate during the
// overlap, the next CA's signature after switch and a reload.
TEST_F(ClusterCaRotationTest, TheIssuerSendsTheBundleAndSignsUnderTheNextCaAfterSwitch) {
  core::LocalCaIssuer issuer(dir_ + "/ca.crt", dir_ + "/ca.key");
  EXPECT_EQ(CountCertificates(issuer.ca_pem()), 1);
  ASSERT_TRUE(PrepareClusterCaFiles(dir_, Generated()).ok());
  EXPECT_EQ(CountCertificates(issuer.ca_pem()), 1);  // loaded before; nothing changes until a reload
  ASSERT_TRUE(issuer.Reload().ok());
  EXPECT_EQ(CountCertificates(issuer.ca_pem()), 2);

  core::IssueRequest request;
  request.hostname = "node-1";
  ossl::PkeyPtr key = core::csr::test_util::NewKey("EC", "P-256");
  request.csr = core::csr::test_util::MustParse(core::csr::test_util::MakeCsr(key.get()));
  request.profile = core::csr::DefaultProfile(core::csr::Kind::kClient);
  auto issued = issuer.Issue(request, std::time(nullptr));
  ASSERT_TRUE(issued.issued()) << issued.status().ToString();
  EXPECT_NE(issued.certificate().certificate_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_EQ(CountCertificates(issued.certificate().ca_pem), 2);
  EXPECT_EQ(IssuerCn(issued.certificate().certificate_pem), "old CA");

  ASSERT_TRUE(SwitchClusterCaFiles(dir_).ok());
  ASSERT_TRUE(issuer.Reload().ok());
  auto renewed = issuer.Issue(request, std::time(nullptr));
  ASSERT_TRUE(renewed.issued()) << renewed.status().ToString();
  EXPECT_EQ(IssuerCn(renewed.certificate().certificate_pem), "next CA");
  EXPECT_EQ(CountCertificates(renewed.certificate().ca_pem), 2);

  ASSERT_TRUE(RetireClusterCaFiles(dir_, std::time(nullptr)).ok());
  ASSERT_TRUE(issuer.Reload().ok());
  EXPECT_EQ(CountCertificates(issuer.ca_pem()), 1);
  EXPECT_EQ(issuer.ca_pem(), ReadText(dir_ + "/ca.crt"));
}

}  // namespace
}  // namespace rackgate::ctl
