// Tests of --kernel-cmdline: kernel word splitting and the rackgate.url= words.
#include "agent/cmdline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace rackgate::agent {
namespace {

using Params = std::vector<KernelParam>;

TEST(SplitKernelCmdline, WordsValuesAndBareNames) {
  EXPECT_EQ(SplitKernelCmdline("  ro quiet root=/dev/vda2 ignition.firstboot\n"),
            (Params{{"ro", std::nullopt}, {"quiet", std::nullopt}, {"root", "/dev/vda2"},
                    {"ignition.firstboot", std::nullopt}}));
  EXPECT_TRUE(SplitKernelCmdline("").empty());
  EXPECT_TRUE(SplitKernelCmdline(" \t\n").empty());
  // Only the first '=' splits; an empty value is a value.
  EXPECT_EQ(SplitKernelCmdline("a=b=c d="), (Params{{"a", "b=c"}, {"d", ""}}));
  // A word starting with '=' has no name: the kernel treats it as bare.
  EXPECT_EQ(SplitKernelCmdline("=x"), (Params{{"=x", std::nullopt}}));
}

TEST(SplitKernelCmdline, QuotesAsTheKernelHandlesThem) {
  // A quoted value keeps its spaces and loses its quotes.
  EXPECT_EQ(SplitKernelCmdline("a=\"x y\" b"), (Params{{"a", "x y"}, {"b", std::nullopt}}));
  // A quoted word: the leading and the last quote go.
  EXPECT_EQ(SplitKernelCmdline("\"a=x y\" b"), (Params{{"a", "x y"}, {"b", std::nullopt}}));
  // Quotes inside a value are kept (the kernel strips only the ends).
  EXPECT_EQ(SplitKernelCmdline("a=x\"y z\"w"), (Params{{"a", "x\"y z\"w"}}));
  // An unterminated quote runs to the end of the line.
  EXPECT_EQ(SplitKernelCmdline("a=\"x y b=c"), (Params{{"a", "x y b=c"}}));
  // A value that is only a quote is empty.
  EXPECT_EQ(SplitKernelCmdline("a=\" b"), (Params{{"a", " b"}}));
  EXPECT_EQ(SplitKernelCmdline("a=\""), (Params{{"a", ""}}));
  EXPECT_EQ(SplitKernelCmdline("\""), (Params{{"", std::nullopt}}));
}

TEST(SplitKernelCmdline, DoubleDashEndsTheKernelsParameters) {
  EXPECT_EQ(SplitKernelCmdline("a=1 -- rackgate.url=https://x"), (Params{{"a", "1"}}));
  EXPECT_EQ(SplitKernelCmdline("--=1 b"), (Params{{"--", "1"}, {"b", std::nullopt}}));
}

TEST(KernelCmdlineUrls, EveryUrlWordInOrder) {
  EXPECT_EQ(KernelCmdlineUrls("ro rackgate.url=https://a:22623 ignition.firstboot "
                              "rackgate.url=\"https://b:22623, https://c:22623\"\n"),
            (std::vector<std::string>{"https://a:22623", "https://b:22623, https://c:22623"}));
  // A bare rackgate.url carries nothing; a look-alike name is another word.
  EXPECT_TRUE(KernelCmdlineUrls("rackgate.url rackgate.urls=https://x xrackgate.url=https://y").empty());
  EXPECT_EQ(KernelCmdlineUrls("rackgate.url rackgate.url=https://a"), (std::vector<std::string>{"https://a"}));
  EXPECT_EQ(KernelCmdlineUrls("rackgate.url="), (std::vector<std::string>{""}));
}

TEST(KernelCmdlineUrls, TruncationNeverReadsPastTheEnd) {
  const std::string line = "ro \"rackgate.url=https://a:22623\" x=\"y z\" rackgate.url=\"https://b\" --";
  for (size_t n = 0; n <= line.size(); ++n) {
    // Every prefix splits without error, and never yields more URL words
    // than the whole line has.
    const auto urls = KernelCmdlineUrls(std::string_view(line).substr(0, n));
    EXPECT_LE(urls.size(), 2u) << n;
    for (const auto& u : urls) EXPECT_TRUE(u.rfind("https://", 0) == 0 || std::string("https://").rfind(u, 0) == 0) << n;
  }
  EXPECT_EQ(KernelCmdlineUrls(line), (std::vector<std::string>{"https://a:22623", "https://b"}));
}

class ReadKernelCmdlineUrlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cmdline_test." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::filesystem::path dir_;
};

TEST_F(ReadKernelCmdlineUrlsTest, ReadsTheUrls) {
  auto r = ReadKernelCmdlineUrls(Write("cmdline", "BOOT_IMAGE=/vmlinuz rackgate.url=https://10.0.2.2:22623\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<std::string>{"https://10.0.2.2:22623"}));
}

TEST_F(ReadKernelCmdlineUrlsTest, NoUrlNamesTheFile) {
  const std::string p = Write("cmdline", "ro quiet rackgate.url\n");
  auto r = ReadKernelCmdlineUrls(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "cmdline_no_url");
  EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
}

TEST_F(ReadKernelCmdlineUrlsTest, OversizeAndMissingAreRefused) {
  auto big = ReadKernelCmdlineUrls(Write("big", std::string(kMaxKernelCmdlineBytes + 1, 'a')));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().reason(), "file_too_large");
  // Exactly at the limit is still read.
  std::string at_limit = "rackgate.url=https://a ";
  at_limit.resize(kMaxKernelCmdlineBytes, ' ');
  EXPECT_TRUE(ReadKernelCmdlineUrls(Write("limit", at_limit)).ok());
  const std::string missing = (dir_ / "missing").string();
  auto r = ReadKernelCmdlineUrls(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "file_unreadable");
  EXPECT_NE(r.status().message().find(missing), std::string::npos);
}

}  // namespace
}  // namespace rackgate::agent
