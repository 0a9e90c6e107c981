#include "daemon/log.h"

#include <gtest/gtest.h>

namespace rackgate::daemon {
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

}  // namespace
}  // namespace rackgate::daemon
