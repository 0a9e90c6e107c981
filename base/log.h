// rackgated's logging: named spdlog loggers over one sink that escapes control bytes.
//
// One logger per module ("http", "protocol", ...), all sharing one sink,
// configured once at start-up.
#ifndef RACKGATE_BASE_LOG_H_
#define RACKGATE_BASE_LOG_H_

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "base/status.h"

namespace rackgate {

struct LogOptions {
  // "trace", "debug", "info", "warn" (or "warning"), "error", "critical", "off".
  std::string level = "info";
  enum class Style {
    kAuto,      // kJournal when stderr is not a terminal, else kTerminal
    kTerminal,  // "2024-05-01 12:00:00.123 info [http] message", colours
    kJournal,   // "<6>[http] message": journald reads the <N> priority
                // prefix (sd-daemon(3)) and adds its own timestamp
  };
  Style style = Style::kAuto;
};

// The module's logger, created on first use with the configured level. May be
// called before ConfigureLogging (the logger then follows the later
// configuration) and from any thread; the pointer stays valid for the
// process's lifetime. Messages go to stderr.
std::shared_ptr<spdlog::logger> Logger(const std::string& name);

// `text` with every control byte (0x00-0x1f, 0x7f) escaped as \n, \r, \t or
// \xNN and every backslash doubled, so that it is one line and an escape
// always stands for one input byte; other bytes (UTF-8 included) are kept.
// Every message through Logger() is escaped this way by the sink itself;
// callers need not (and should not) escape what they log.
void AppendEscaped(std::string_view text, spdlog::memory_buf_t* dest);
std::string EscapeForLog(std::string_view text);

// Sets the level and format of every logger, existing and future. An unknown
// level is kInvalidArgument ("log_level_invalid") and changes nothing. Safe
// to call again (e.g. on SIGHUP).
Status ConfigureLogging(const LogOptions& options);

}  // namespace rackgate

#endif  // RACKGATE_BASE_LOG_H_
