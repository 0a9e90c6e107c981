// Tests of rackgated's loggers, their two styles and the escaping of control bytes.
#include "base/log.h"

#include <gtest/gtest.h>

namespace rackgate {
namespace {

TEST(Logging, OneLoggerPerName) {
  auto a = Logger("test-a");
  EXPECT_EQ(a, Logger("test-a"));
  EXPECT_NE(a, Logger("test-b"));
  EXPECT_EQ(a->name(), "test-a");
}

TEST(Logging, LevelAppliesToExistingAndNewLoggers) {
  auto before = Logger("test-before");
  ASSERT_TRUE(ConfigureLogging({"debug", LogOptions::Style::kJournal}).ok());
  EXPECT_EQ(before->level(), spdlog::level::debug);
  EXPECT_EQ(Logger("test-after")->level(), spdlog::level::debug);
  ASSERT_TRUE(ConfigureLogging({"warning", LogOptions::Style::kJournal}).ok());
  EXPECT_EQ(before->level(), spdlog::level::warn);
}

TEST(Logging, UnknownLevelRefusedAndChangesNothing) {
  ASSERT_TRUE(ConfigureLogging({"error", LogOptions::Style::kJournal}).ok());
  Status s = ConfigureLogging({"verbose", LogOptions::Style::kJournal});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.reason(), "log_level_invalid");
  EXPECT_EQ(Logger("test-x")->level(), spdlog::level::err);
}

TEST(Logging, JournalStyleHasPriorityPrefixAndName) {
  ASSERT_TRUE(ConfigureLogging({"info", LogOptions::Style::kJournal}).ok());
  testing::internal::CaptureStderr();
  Logger("journal")->warn("disk {}", "full");
  Logger("journal")->info("hello");
  Logger("journal")->debug("hidden");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "<4>[journal] disk full\n<6>[journal] hello\n");
}

TEST(Logging, TerminalStyleHasTimeLevelAndName) {
  ASSERT_TRUE(ConfigureLogging({"info", LogOptions::Style::kTerminal}).ok());
  testing::internal::CaptureStderr();
  Logger("term")->error("oops");
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("error"), std::string::npos) << out;
  EXPECT_NE(out.find("[term] oops\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("<3>"), std::string::npos) << out;
}

TEST(LogEscape, ControlBytesBackslashAndDelete) {
  EXPECT_EQ(EscapeForLog("plain text, UTF-8 \xc3\xa9"), "plain text, UTF-8 \xc3\xa9");
  EXPECT_EQ(EscapeForLog("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeForLog(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(EscapeForLog("\x1b[31mred\x7f"), "\\x1b[31mred\\x7f");
  EXPECT_EQ(EscapeForLog("C:\\dir\\"), "C:\\\\dir\\\\");
  // An escape in the output stands for one input byte: a literal "\n" in
  // the message does not read as an escaped newline.
  EXPECT_EQ(EscapeForLog("\\n"), "\\\\n");
  EXPECT_EQ(EscapeForLog(""), "");
  for (int c = 0; c < 0x20; ++c) {
    const std::string out = EscapeForLog(std::string(1, static_cast<char>(c)));
    EXPECT_EQ(out.front(), '\\') << c;
    EXPECT_GE(out.size(), 2u) << c;
  }
}

// The regression of the log injection an outside test found (CWE-117): a
// client's text carrying "\n<3>forged" must not become a second journal line
// at priority 3, in either style.
constexpr char kHostileBytes[] = "pool x\n<3>forged\rover\x1b[2Kwiped\0nul\\";
const std::string kHostile(kHostileBytes, sizeof kHostileBytes - 1);

TEST(LogEscape, JournalStyleOneLinePerCall) {
  ASSERT_TRUE(ConfigureLogging({"info", LogOptions::Style::kJournal}).ok());
  testing::internal::CaptureStderr();
  Logger("journal")->info("config for {} refused", kHostile);
  const std::string out = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out,
            "<6>[journal] config for pool x\\n<3>forged\\rover\\x1b[2Kwiped\\x00nul\\\\ "
            "refused\n");
}

TEST(LogEscape, TerminalStyleOneLinePerCall) {
  ASSERT_TRUE(ConfigureLogging({"info", LogOptions::Style::kTerminal}).ok());
  testing::internal::CaptureStderr();
  Logger("term")->warn("config for {} refused", kHostile);
  const std::string out = testing::internal::GetCapturedStderr();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(out.find(std::string(1, '\0')), std::string::npos) << out;
  EXPECT_NE(out.find("[term] config for pool x\\n<3>forged\\rover\\x1b[2Kwiped\\x00nul\\\\ refused\n"),
            std::string::npos)
      << out;
  // The only ESC bytes left are the colour codes the sink adds itself
  // (none when stderr is not a terminal), never the client's.
  EXPECT_EQ(out.find("\x1b[2K"), std::string::npos) << out;
}

}  // namespace
}  // namespace rackgate
