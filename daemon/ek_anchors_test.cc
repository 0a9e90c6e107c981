// The EK trust anchors rackgated runs with (issue 41, item 2): the
// ek_anchor_relaxations config read and granted, a relaxation naming no
// anchor or no relaxation refused at start, and the start-up report and
// gauges (anchors loaded, expiring within a year).
#include "daemon/ek_anchors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "attest/testing/ek_cert_test_pki.h"
#include "base/sha256.h"

namespace rackgate::daemon {
namespace {

namespace ekt = attest::ek_testing;
using attest::Bytes;

class EkAnchorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new ekt::Pki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }
  void SetUp() override {
    char tmpl[] = "/tmp/rackgate-anchors-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const Bytes& b) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<long>(b.size()));
    return path;
  }
  static std::string RootSha() { return sha256::Hex(ekt::Der(pki_->root.get())); }

  std::string dir_;
  static inline ekt::Pki* pki_ = nullptr;
};

TEST_F(EkAnchorsTest, ConfigReadsRelaxationsAndRefusesTheirWrongShapes) {
  const std::string sha(64, 'a');
  auto c = ParseConfig(R"({"ek_anchor_relaxations": {")" + sha + R"(": ["sha1", "expired-ca"]}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ek_anchor_relaxations.at(sha), (std::vector<std::string>{"sha1", "expired-ca"}));
  for (const std::string& bad : std::vector<std::string>{R"({"ek_anchor_relaxations": ["sha1"]})",
                                R"({"ek_anchor_relaxations": {"abc": ["sha1"]}})",
                                R"({"ek_anchor_relaxations": {")" + sha + R"(": "sha1"}})",
                                R"({"ek_anchor_relaxations": {")" + sha + R"(": []}})"}) {
    auto x = ParseConfig(bad);
    EXPECT_FALSE(x.ok()) << bad;
    EXPECT_NE(x.status().message().find("ek_anchor_relaxations"), std::string::npos) << x.status().ToString();
  }
}

TEST_F(EkAnchorsTest, RelaxationsAreGrantedToTheNamedAnchor) {
  Config c;
  c.ek_roots = {Write("root.pem", ekt::Pem(pki_->root.get()))};
  c.ek_anchor_relaxations[RootSha()] = {"sha1", "no-ek-marks"};
  auto store = LoadEkAnchors(c);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const auto anchors = store->Anchors();
  ASSERT_EQ(anchors.size(), 1u);
  EXPECT_EQ(anchors[0].relaxations, (std::vector<std::string>{"sha1", "no-ek-marks"}));
  const EkAnchorReport r = ReportEkAnchors(*store, ekt::kNow);
  ASSERT_EQ(r.relaxed.size(), 2u);
  EXPECT_NE(r.relaxed[0].find(RootSha()), std::string::npos);
}

// Refused at start (and by --check-config, which loads the anchors too),
// the message naming the key and what is wrong.
TEST_F(EkAnchorsTest, RelaxationOfNoAnchorOrOfNoKnownNameIsAConfigError) {
  Config c;
  c.ek_roots = {Write("root.pem", ekt::Pem(pki_->root.get()))};
  c.ek_anchor_relaxations[std::string(64, 'b')] = {"sha1"};
  auto unknown_anchor = LoadEkAnchors(c);
  EXPECT_EQ(unknown_anchor.status().reason(), "ek_trust_store_invalid");
  EXPECT_NE(unknown_anchor.status().message().find("ek_anchor_relaxations"), std::string::npos);
  EXPECT_NE(unknown_anchor.status().message().find(std::string(64, 'b')), std::string::npos)
      << unknown_anchor.status().ToString();

  c.ek_anchor_relaxations.clear();
  c.ek_anchor_relaxations[RootSha()] = {"md5"};
  auto unknown_name = LoadEkAnchors(c);
  EXPECT_EQ(unknown_name.status().reason(), "ek_trust_store_invalid");
  EXPECT_NE(unknown_name.status().message().find("md5"), std::string::npos) << unknown_name.status().ToString();

  Config no_roots;
  no_roots.ek_anchor_relaxations[RootSha()] = {"sha1"};
  EXPECT_EQ(LoadEkAnchors(no_roots).status().reason(), "ek_trust_store_invalid");
  EXPECT_TRUE(LoadEkAnchors(Config{}).ok());  // no roots, no relaxations: an empty store
}

// A folder mixing a root and a CA it issued: both anchors, one partial;
// the one that expires within a year is named and counted.
TEST_F(EkAnchorsTest, ReportAndGaugesCountAnchorsAndThoseExpiringWithinAYear) {
  ekt::CertSpec soon = ekt::CaSpec("Vendor CA Expiring Soon");
  soon.not_after = ekt::kNow + 100 * ekt::kDay;
  ossl::PkeyPtr key = ekt::GenEc("P-256");
  ossl::X509Ptr expiring = ekt::MakeCert(soon, key.get(), pki_->root.get(), pki_->root_key.get());
  std::filesystem::create_directory(dir_ + "/roots");
  Write("roots/root.pem", ekt::Pem(pki_->root.get()));
  Write("roots/soon.der", ekt::Der(expiring.get()));
  Config c;
  c.ek_roots = {dir_ + "/roots"};
  auto store = LoadEkAnchors(c);
  ASSERT_TRUE(store.ok()) << store.status().ToString();

  const EkAnchorReport r = ReportEkAnchors(*store, ekt::kNow);
  EXPECT_NE(r.summary.find("2 EK trust anchors loaded (1 self-signed, 1 partial-chain CAs)"), std::string::npos)
      << r.summary;
  ASSERT_EQ(r.expiring.size(), 1u);
  EXPECT_NE(r.expiring[0].find("Vendor CA Expiring Soon"), std::string::npos) << r.expiring[0];
  EXPECT_NE(r.expiring[0].find("expires at"), std::string::npos) << r.expiring[0];
  // Past its notAfter: still counted, and said to be expired.
  EXPECT_NE(ReportEkAnchors(*store, ekt::kNow + 200 * ekt::kDay).expiring[0].find("EXPIRED"), std::string::npos);

  Metrics m;
  CollectEkAnchorMetrics(&m, *store, ekt::kNow);
  const std::string text = m.Render();
  EXPECT_NE(text.find("rackgate_ek_anchors 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rackgate_ek_anchors_expiring_within_year 1\n"), std::string::npos) << text;
  // Eleven years on, both are within (past) the year.
  Metrics later;
  CollectEkAnchorMetrics(&later, *store, ekt::kNow + 4000 * ekt::kDay);
  EXPECT_NE(later.Render().find("rackgate_ek_anchors_expiring_within_year 2\n"), std::string::npos);
}

}  // namespace
}  // namespace rackgate::daemon
