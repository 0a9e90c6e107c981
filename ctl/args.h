// Command-line flags for rackgatectl: `--name value`, `--name=value`, boolean
// `--name`, and positional arguments, checked strictly against what a command
// declares (docs/cli.md).
#ifndef RACKGATE_DAEMON_CTL_ARGS_H_
#define RACKGATE_DAEMON_CTL_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::ctl {

// max_positional: the command checks positional() itself.
inline constexpr size_t kAnyPositional = std::numeric_limits<size_t>::max();

struct FlagSpec {
  std::set<std::string> with_value;  // --flag VALUE (may repeat)
  std::set<std::string> boolean;     // --flag
  // At most this many positional arguments; more are refused by Parse.
  size_t max_positional = kAnyPositional;
};

class Args {
 public:
  // Parses argv[first..argc). Every command also accepts the global flags:
  // --help/-h (boolean "help"), --json (boolean "json") and --socket PATH.
  // kInvalidArgument ("usage") for an unknown option (with a did-you-mean
  // when one of the command's flags is close), a single-dash option other
  // than -h, a flag missing its value, a boolean given a value, or more
  // positional arguments than spec.max_positional.
  static Result<Args> Parse(int argc, char** argv, int first, const FlagSpec& spec);

  bool Has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
  // The last value given for `flag`.
  std::optional<std::string> Get(const std::string& flag) const;
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> GetAll(const std::string& flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // The last value of `flag` as a whole number in [min, max], or `fallback`
  // when it is absent. kInvalidArgument ("usage") naming the flag otherwise:
  // "--limit takes a whole number, got 'abc'".
  Result<int64_t> GetInt(const std::string& flag, int64_t fallback, int64_t min = 0,
                         int64_t max = std::numeric_limits<int32_t>::max()) const;
  // The last value of `flag` as a duration (ParseDuration) in seconds, or
  // `fallback` when it is absent; kInvalidArgument ("usage") naming the flag.
  Result<int64_t> GetDuration(const std::string& flag, int64_t fallback) const;

  // kInvalidArgument ("usage") naming the first of `flags` that is missing.
  Status Require(const std::vector<std::string>& flags) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
};

// "90s", "30m", "2h", "1d", "1h30m" or "0" as seconds; nullopt otherwise.
std::optional<int64_t> ParseDuration(const std::string& text);

// "; did you mean 'X'?" for the candidate closest to `word` (edit distance at
// at most 2, and under half its length), or "" when none is close.
// `quote` is put around the suggestion ("'" for commands, "" for flags).
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates,
                       const char* quote = "'");

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_ARGS_H_
