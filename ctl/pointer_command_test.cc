#include "ctl/pointer_command.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "ctl/initramfs_cpio.h"
#include "ctl/offline.h"

namespace rackgate::ctl {
namespace {

// A newc entry read back: mode, uid, gid, mtime and data by name.
struct Entry {
  uint32_t mode = 0, uid = 0, gid = 0, mtime = 0;
  std::string data;
};

uint32_t Field(const std::vector<uint8_t>& a, size_t at, int i) {
  return static_cast<uint32_t>(std::stoul(std::string(a.begin() + at + 6 + 8 * i, a.begin() + at + 14 + 8 * i),
                                          nullptr, 16));
}

// The entries of a newc archive in order, as the kernel's unpacker walks
// it; an empty list when any header is not "070701" or runs past the end.
std::vector<std::pair<std::string, Entry>> ReadNewc(const std::vector<uint8_t>& a) {
  std::vector<std::pair<std::string, Entry>> out;
  size_t at = 0;
  auto pad = [](size_t n) { return (n + 3) & ~size_t{3}; };
  while (at + 110 <= a.size()) {
    if (std::string(a.begin() + at, a.begin() + at + 6) != "070701") return {};
    Entry e{Field(a, at, 1), Field(a, at, 2), Field(a, at, 3), Field(a, at, 5), ""};
    const size_t size = Field(a, at, 6), namesize = Field(a, at, 11);
    const size_t name_at = at + 110, data_at = pad(name_at + namesize);
    if (namesize == 0 || data_at + size > a.size() || a[name_at + namesize - 1] != 0) return {};
    const std::string name(a.begin() + name_at, a.begin() + name_at + namesize - 1);
    e.data.assign(a.begin() + data_at, a.begin() + data_at + size);
    out.emplace_back(name, e);
    at = pad(data_at + size);
    if (name == "TRAILER!!!") return at == a.size() ? out : std::vector<std::pair<std::string, Entry>>{};
  }
  return {};
}

std::vector<uint8_t> Gunzip(const std::vector<uint8_t>& gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::vector<uint8_t> out(1 << 20);
  z.next_in = const_cast<Bytef*>(gz.data());
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_FINISH);
  EXPECT_EQ(rc, Z_STREAM_END);
  EXPECT_EQ(z.avail_in, 0u) << "bytes after the gzip member";
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  return out;
}

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

TEST(InitramfsCpio, HoldsTheCaWithItsParentsAndATrailer) {
  const auto entries = ReadNewc(CaInitramfsCpio(kPem));
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].first, "etc");
  EXPECT_EQ(entries[0].second.mode, 040755u);
  EXPECT_EQ(entries[1].first, "etc/rackgate");
  EXPECT_EQ(entries[1].second.mode, 040755u);
  EXPECT_EQ("/" + entries[2].first, kInitramfsCaPath);
  EXPECT_EQ(entries[2].second.mode, 0100644u);
  EXPECT_EQ(entries[2].second.data, kPem);
  EXPECT_EQ(entries[3].first, "TRAILER!!!");
  for (const auto& [name, e] : entries) {
    EXPECT_EQ(e.uid, 0u) << name;
    EXPECT_EQ(e.gid, 0u) << name;
    EXPECT_EQ(e.mtime, 0u) << name;
  }
}

TEST(InitramfsCpio, EveryLengthIsPaddedToFour) {
  // Names and data of every length mod 4 keep the next header aligned.
  for (std::string pem = kPem; pem.size() < sizeof kPem + 8; pem += "x") {
    const auto a = CaInitramfsCpio(pem);
    EXPECT_EQ(a.size() % 4, 0u);
    const auto entries = ReadNewc(a);
    ASSERT_EQ(entries.size(), 4u) << pem.size();
    EXPECT_EQ(entries[2].second.data, pem);
  }
}

TEST(InitramfsCpio, GzipRoundTripsAndIsReproducible) {
  const auto cpio = CaInitramfsCpio(kPem);
  const auto gz = Gzip(cpio);
  ASSERT_GE(gz.size(), 18u);
  EXPECT_EQ(gz[0], 0x1f);
  EXPECT_EQ(gz[1], 0x8b);
  EXPECT_EQ(gz[4] | gz[5] | gz[6] | gz[7], 0) << "mtime is 0";
  EXPECT_EQ(Gunzip(gz), cpio);
  EXPECT_EQ(Gzip(cpio), gz);
  EXPECT_EQ(Gunzip(Gzip({})), std::vector<uint8_t>{});
}

KernelArgsOptions Options() {
  KernelArgsOptions o;
  o.urls = {"https://10.0.2.100:22623"};
  o.bundle_file = "/usr/lib/rackgate/agent-initramfs.cpio.zst";
  o.bundle_sha256 = std::string(64, 'a');
  o.bundle_bytes = 7655249;
  return o;
}

TEST(KernelArgs, NamesEveryAppliance) {
  KernelArgsOptions o = Options();
  EXPECT_EQ(KernelArgs(o), "rackgate.url=https://10.0.2.100:22623 rd.neednet=1");
  o.urls.push_back("https://rg2.example:22623");
  EXPECT_EQ(KernelArgs(o), "rackgate.url=https://10.0.2.100:22623,https://rg2.example:22623 rd.neednet=1");
}

TEST(KernelArgs, UrlsThatWouldSplitOrQuoteTheCommandLineAreRefused) {
  EXPECT_TRUE(KernelArgsUrl("https://10.0.2.100:22623").ok());
  EXPECT_TRUE(KernelArgsUrl("https://[fd00::1]:22623").ok());
  for (const char* bad : {"http://10.0.2.100:22623", "https://", "https://a b", "https://a,https://b", "https://a\"",
                          "https://a'", "https://a\\b", "https://a\tb", "https://\x7f", "https://\xc3\xa9"}) {
    EXPECT_FALSE(KernelArgsUrl(bad).ok()) << bad;
  }
  EXPECT_FALSE(KernelArgsUrl("https://" + std::string(600, 'a')).ok());
}

TEST(KernelArgs, JsonNamesTheBundleItsDigestAndTheCaPart) {
  KernelArgsOptions o = Options();
  auto doc = nlohmann::json::parse(KernelArgsJson(o));
  EXPECT_EQ(doc.at("kernel_args"), "rackgate.url=https://10.0.2.100:22623 rd.neednet=1");
  EXPECT_EQ(doc.at("agent_initramfs").at("url"), "https://10.0.2.100:22623/v1/agent/initramfs");
  EXPECT_EQ(doc.at("agent_initramfs").at("sha256_url"), "https://10.0.2.100:22623/v1/agent/initramfs.sha256");
  EXPECT_EQ(doc.at("agent_initramfs").at("sha256"), std::string(64, 'a'));
  EXPECT_EQ(doc.at("agent_initramfs").at("bytes"), 7655249);
  EXPECT_EQ(doc.at("agent_initramfs").at("file"), "/usr/lib/rackgate/agent-initramfs.cpio.zst");
  EXPECT_TRUE(doc.at("ca_initramfs").is_null());
  o.ca_initramfs_file = "ca.cpio.gz";
  o.ca_initramfs_sha256 = std::string(64, 'b');
  doc = nlohmann::json::parse(KernelArgsJson(o));
  EXPECT_EQ(doc.at("ca_initramfs").at("file"), "ca.cpio.gz");
  EXPECT_EQ(doc.at("ca_initramfs").at("sha256"), std::string(64, 'b'));
  EXPECT_EQ(doc.at("ca_initramfs").at("path"), "/etc/rackgate/ca.pem");
}

TEST(KernelArgs, TextHasTheArgumentsAsItsOnlyLineThatIsNoComment) {
  KernelArgsOptions o = Options();
  o.ca_initramfs_file = "ca.cpio.gz";
  o.ca_initramfs_sha256 = std::string(64, 'b');
  const std::string text = KernelArgsText(o);
  std::vector<std::string> plain;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string line = text.substr(at, nl - at);
    if (line.rfind("#", 0) != 0) plain.push_back(line);
  }
  EXPECT_EQ(at, text.size()) << "ends with a newline";
  EXPECT_EQ(plain, std::vector<std::string>{"rackgate.url=https://10.0.2.100:22623 rd.neednet=1"});
  EXPECT_NE(text.find(std::string(64, 'a')), std::string::npos);
  EXPECT_NE(text.find("ca.cpio.gz"), std::string::npos);
  // The bundle comes first, then the CA.
  EXPECT_LT(text.find("/v1/agent/initramfs"), text.find("ca.cpio.gz"));
}

// Issue 40 item 7: what pointer prints, the agent parses with its own parser;
// a URL the agent would refuse at boot is refused here (exit 2), naming the fix.
TEST(KernelArgs, UrlsTheAgentWouldRefuseAtBootAreRefused) {
  for (const char* bad : {"https://rg.example:22623/rackgate", "https://rg.example:99999",
                          "https://user:pw@rg.example:22623", "https://rg.example:22623?x=1",
                          "https://rg.example:22623#f", "https://rg.example:0", "https://rg.example:", "https://[fd00::1"}) {
    EXPECT_FALSE(KernelArgsUrl(bad).ok()) << bad;
    auto r = KernelArgsUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "url_invalid");
    EXPECT_NE(r.status().message().find("https://HOST[:PORT]"), std::string::npos) << r.status().message();
  }
  // The agent's form: a trailing slash dropped, the host lower-cased.
  EXPECT_EQ(KernelArgsUrl("https://RG.example:22623/").value(), "https://rg.example:22623");
  EXPECT_EQ(KernelArgsUrl("https://[fd00::1]:22623").value(), "https://[fd00::1]:22623");
}

// Issue 40 item 8: the --ca file's certificates and nothing else.
constexpr char kCert[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
constexpr char kKey[] = "-----BEGIN PRIVATE KEY-----\nSECRETKEYBYTES\n-----END PRIVATE KEY-----\n";

TEST(CaFile, AFileWithAPrivateKeyBesideTheCertificateIsRefused) {
  for (const std::string& file : {std::string(kCert) + "\n" + kKey, std::string(kKey) + kCert + "\n",
                                  std::string(kCert) + "\n-----BEGIN EC PRIVATE KEY-----\nX\n-----END EC PRIVATE KEY-----\n"}) {
    auto r = CaCertificatesOnly(file, "ca.pem");
    ASSERT_FALSE(r.ok()) << file;
    EXPECT_EQ(r.status().reason(), "ca_invalid");
    EXPECT_NE(r.status().message().find("openssl x509 -in ca.pem"), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().message().find("SECRETKEYBYTES"), std::string::npos);
  }
  EXPECT_EQ(CaCertificatesOnly("no pem here", "ca.pem").status().reason(), "ca_invalid");
}

TEST(CaFile, OnlyTheCertificatesAreKept) {
  const std::string two = std::string("subject=CN=x\n") + kCert + "\n" + kCert + "\n";
  auto r = CaCertificatesOnly(two, "ca.pem");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::string(kCert) + "\n" + kCert + "\n");
}

// The command itself: exit 2 and nothing written for a URL the agent would
// refuse or a --ca file with a key (fails on the code before issue 40).
class PointerRun : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pointer_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Write("bundle", "bundle bytes");
    Write("ca.crt", std::string(kCert) + "\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  int Run(const std::string& url, const std::string& ca) {
    std::vector<std::string> a = {"rackgatectl", "pointer", "--kernel-args", "--url", url, "--ca", dir_ + "/" + ca,
                                  "--bundle", dir_ + "/bundle", "--initramfs-ca", dir_ + "/ca.cpio.gz"};
    std::vector<char*> argv;
    for (auto& x : a) argv.push_back(x.data());
    return RunPointer(static_cast<int>(argv.size()), argv.data(), 2);
  }
  bool Wrote() const { return std::filesystem::exists(dir_ + "/ca.cpio.gz"); }
  std::string dir_;
};

TEST_F(PointerRun, RefusesUrlsTheAgentRefusesAndCaFilesWithAKey) {
  for (const char* bad : {"https://rg.example:22623/rackgate", "https://rg.example:99999",
                          "https://user@rg.example:22623", "https://rg.example:22623?x=1"}) {
    EXPECT_EQ(Run(bad, "ca.crt"), 2) << bad;
    EXPECT_FALSE(Wrote()) << bad;
  }
  Write("both.pem", std::string(kCert) + "\n" + kKey);
  EXPECT_EQ(Run("https://rg.example:22623", "both.pem"), 2);
  EXPECT_FALSE(Wrote());
  EXPECT_EQ(Run("https://rg.example:22623", "ca.crt"), 0);
  ASSERT_TRUE(Wrote());
  auto gz = ReadFile(dir_ + "/ca.cpio.gz", 1 << 20);
  ASSERT_TRUE(gz.ok());
  const auto cpio = Gunzip(*gz);
  const std::string text(cpio.begin(), cpio.end());
  EXPECT_NE(text.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_EQ(text.find("PRIVATE KEY"), std::string::npos);
}

// Issue 44: during a CA rotation (STATE/ca/next.crt present), the
// initramfs CA part carries the bundle: current then next CA.
TEST_F(PointerRun, CarriesTheNextCaDuringARotation) {
  std::filesystem::create_directories(dir_ + "/state/ca");
  Write("state/ca/ca.crt", std::string(kCert) + "\n");
  auto run = [this]() {
    std::vector<std::string> a = {"rackgatectl", "pointer", "--kernel-args", "--url", "https://rg.example:22623",
                                  "--state-dir", dir_ + "/state", "--bundle", dir_ + "/bundle",
                                  "--initramfs-ca", dir_ + "/ca.cpio.gz"};
    std::vector<char*> argv;
    for (auto& x : a) argv.push_back(x.data());
    EXPECT_EQ(RunPointer(static_cast<int>(argv.size()), argv.data(), 2), 0);
    auto gz = ReadFile(dir_ + "/ca.cpio.gz", 1 << 20);
    EXPECT_TRUE(gz.ok());
    const auto cpio = Gunzip(*gz);
    const std::string text(cpio.begin(), cpio.end());
    size_t n = 0;
    for (size_t at = text.find("BEGIN CERTIFICATE"); at != std::string::npos; at = text.find("BEGIN CERTIFICATE", at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(run(), 1u);
  Write("state/ca/next.crt", std::string(kCert) + "\n");
  EXPECT_EQ(run(), 2u);
}

// init and pointer as a normal user: a bare "Permission denied" becomes a
// line that names whom to run as.
TEST(Issue32, PermissionDeniedNamesTheUser) {
  const Status denied = Status::IoError("file_unwritable", "/var/lib/rackgate: Permission denied");
  EXPECT_NE(PermissionHint("init", denied).find("sudo -u rackgate rackgatectl init"), std::string::npos);
  EXPECT_NE(PermissionHint("pointer", denied).find("sudo rackgatectl pointer"), std::string::npos);
  EXPECT_NE(PermissionHint("ca", denied).find("sudo"), std::string::npos);
  EXPECT_EQ(PermissionHint("init", Status::IoError("file_unwritable", "/x: No space left on device")), "");
}

}  // namespace
}  // namespace rackgate::ctl
