// rackgated's logging: named spdlog loggers over one reconfigurable sink.
#include "base/log.h"

#include <unistd.h>

#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "base/hex.h"

namespace rackgate {

namespace {

// %* in a pattern: the sd-daemon(3) priority prefix journald understands.
class JournalPriority final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char* p = "<6>";
    switch (msg.level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        p = "<7>";
        break;
      case spdlog::level::info:
        p = "<6>";
        break;
      case spdlog::level::warn:
        p = "<4>";
        break;
      case spdlog::level::err:
        p = "<3>";
        break;
      case spdlog::level::critical:
        p = "<2>";
        break;
      default:
        break;
    }
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JournalPriority>();
  }
};

// %& in a pattern: the message with every control byte escaped, so that one
// log call is always exactly one line. SECURITY (CWE-117): request paths,
// pool names, session ids and CSR fields reach log messages, and a client
// that could put "\n<3>" in one would forge a whole journal line at a
// priority of its choosing. Escaping here, in the one formatter every logger
// goes through, means no caller can forget it. A backslash is doubled so that
// an escape in the output always stands for exactly one input byte.
class EscapedPayload final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    AppendEscaped(std::string_view(msg.payload.data(), msg.payload.size()), &dest);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<EscapedPayload>();
  }
};

// A pattern formatter that knows %* (journal priority) and %& (the escaped
// message).
std::unique_ptr<spdlog::formatter> MakeFormatter(const std::string& pattern) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<JournalPriority>('*');
  formatter->add_flag<EscapedPayload>('&');
  formatter->set_pattern(pattern);
  return formatter;
}

struct State {
  std::mutex mu;
  std::shared_ptr<spdlog::sinks::dist_sink_mt> sink;
  spdlog::level::level_enum level = spdlog::level::info;
  std::map<std::string, std::shared_ptr<spdlog::logger>> loggers;
};

std::shared_ptr<spdlog::sinks::sink> MakeSink(LogOptions::Style style) {
  if (style == LogOptions::Style::kAuto) {
    style = isatty(STDERR_FILENO) == 1 ? LogOptions::Style::kTerminal : LogOptions::Style::kJournal;
  }
  if (style == LogOptions::Style::kTerminal) {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    sink->set_formatter(MakeFormatter("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%n] %&"));
    return sink;
  }
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  sink->set_formatter(MakeFormatter("%*[%n] %&"));
  return sink;
}

// Created on first use and never destroyed: loggers may be used from static
// destructors and threads that outlive main().
State& GetState() {
  static State* state = [] {
    auto* s = new State;
    s->sink = std::make_shared<spdlog::sinks::dist_sink_mt>();
    s->sink->set_sinks({MakeSink(LogOptions::Style::kAuto)});
    return s;
  }();
  return *state;
}

std::optional<spdlog::level::level_enum> ParseLevel(const std::string& name) {
  static const std::map<std::string, spdlog::level::level_enum> kLevels = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn}, {"error", spdlog::level::err},
      {"critical", spdlog::level::critical}, {"off", spdlog::level::off},
  };
  auto it = kLevels.find(name);
  if (it == kLevels.end()) return std::nullopt;
  return it->second;
}

}  // namespace

void AppendEscaped(std::string_view text, spdlog::memory_buf_t* dest) {
  size_t plain = 0;  // start of the run of bytes copied as they are
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != 0x7f && c != '\\') continue;
    dest->append(text.data() + plain, text.data() + i);
    plain = i + 1;
    char esc[4] = {'\\', 0, 0, 0};
    size_t n = 2;
    switch (c) {
      case '\n': esc[1] = 'n'; break;
      case '\r': esc[1] = 'r'; break;
      case '\t': esc[1] = 't'; break;
      case '\\': esc[1] = '\\'; break;
      default:
        esc[1] = 'x';
        esc[2] = hex::Digit(c >> 4);
        esc[3] = hex::Digit(c);
        n = 4;
        break;
    }
    dest->append(esc, esc + n);
  }
  dest->append(text.data() + plain, text.data() + text.size());
}

std::string EscapeForLog(std::string_view text) {
  spdlog::memory_buf_t buf;
  AppendEscaped(text, &buf);
  return std::string(buf.data(), buf.size());
}

std::shared_ptr<spdlog::logger> Logger(const std::string& name) {
  State& s = GetState();
  std::lock_guard lock(s.mu);
  auto it = s.loggers.find(name);
  if (it != s.loggers.end()) return it->second;
  auto logger = std::make_shared<spdlog::logger>(name, s.sink);
  logger->set_level(s.level);
  // Warnings and errors reach the sink at once, whatever stdio buffers.
  logger->flush_on(spdlog::level::warn);
  s.loggers.emplace(name, logger);
  return logger;
}

Status ConfigureLogging(const LogOptions& options) {
  const auto level = ParseLevel(options.level);
  if (!level.has_value()) {
    return Status::InvalidArgument("log_level_invalid",
                                   "log level must be trace, debug, info, warn, error, "
                                   "critical or off");
  }
  State& s = GetState();
  std::lock_guard lock(s.mu);
  s.sink->set_sinks({MakeSink(options.style)});
  s.level = *level;
  for (auto& [unused, logger] : s.loggers) logger->set_level(*level);
  return Status::Ok();
}

}  // namespace rackgate
