// The one escaper of untrusted text, and the printable checks (the former
// attest EscapeForDisplay, kube::Printable and storage's IsPrintableAscii
// cases).
#include "base/text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rackgate::text {
namespace {

TEST(PrintableAscii, KeepsPrintableAsciiAsItIs) {
  EXPECT_EQ(PrintableAscii("", 10), "");
  EXPECT_EQ(PrintableAscii("a b~!", 10), "a b~!");
}

// An EK certificate's strings: a newline cannot forge a log line, an escape
// sequence cannot reach a terminal, and bytes over 0x7e show as \xNN.
TEST(PrintableAscii, EscapesControlAndHighBytesAsHex) {
  EXPECT_EQ(PrintableAscii("sw\x1b[31mtpm\n", 100), "sw\\x1b[31mtpm\\x0a");
  EXPECT_EQ(PrintableAscii("evil\nname", 100), "evil\\x0aname");
  EXPECT_EQ(PrintableAscii(std::string("\0\x7f\x80\xff", 4), 100), "\\x00\\x7f\\x80\\xff");
  EXPECT_EQ(PrintableAscii("\\x41", 100), "\\x41");  // a backslash is printable
}

TEST(PrintableAscii, CutsToMaxEndingInDots) {
  const std::string cut = PrintableAscii(std::string(300, 'a'), 256);
  EXPECT_EQ(cut.size(), 256u);
  EXPECT_EQ(cut, std::string(253, 'a') + "...");
  // Escapes count toward the bound: the result never exceeds it.
  EXPECT_LE(PrintableAscii(std::string(300, '\x01'), 256).size(), 256u);
  EXPECT_EQ(PrintableAscii("abcdefgh", 6), "abc...");
  EXPECT_EQ(PrintableAscii("ab", 6), "ab");
}

TEST(IsPrintableAscii, SpaceYesControlNo) {
  EXPECT_TRUE(IsPrintableAscii(""));
  EXPECT_TRUE(IsPrintableAscii("denied: not ours ~"));
  for (const std::string& bad : std::vector<std::string>{"a\nb", "tab\t", std::string("nul\0", 4), "del\x7f", "\xc3\xa9"}) {
    EXPECT_FALSE(IsPrintableAscii(bad)) << PrintableAscii(bad, 40);
  }
}

TEST(IsVisibleAscii, NoSpaceNoControl) {
  EXPECT_TRUE(IsVisibleAscii(""));
  EXPECT_TRUE(IsVisibleAscii("10.0.0.1"));
  EXPECT_TRUE(IsVisibleAscii(".linux"));
  for (const std::string& bad : std::vector<std::string>{"a b", " ", "a\nb", "del\x7f", "\xc3\xa9"}) {
    EXPECT_FALSE(IsVisibleAscii(bad)) << PrintableAscii(bad, 40);
  }
}

}  // namespace
}  // namespace rackgate::text
