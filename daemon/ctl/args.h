// Command-line flags for rackgatectl: `--name value`, `--name=value`, boolean
// `--name`, and positional arguments, checked against what a command declares.
#ifndef RACKGATE_DAEMON_CTL_ARGS_H_
#define RACKGATE_DAEMON_CTL_ARGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::ctl {

struct FlagSpec {
  std::set<std::string> with_value;  // --flag VALUE (may repeat)
  std::set<std::string> boolean;     // --flag
};

class Args {
 public:
  // Parses argv[first..argc). kInvalidArgument ("usage") for an unknown flag
  // or a flag missing its value. "--help"/"-h" always parse as boolean "help".
  static Result<Args> Parse(int argc, char** argv, int first, const FlagSpec& spec);

  bool Has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
  // The last value given for `flag`.
  std::optional<std::string> Get(const std::string& flag) const;
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> GetAll(const std::string& flag) const;
  const std::vector<std::string>& positional() const { return positional_; }

  // kInvalidArgument ("usage") naming the first of `flags` that is missing.
  Status Require(const std::vector<std::string>& flags) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positional_;
};

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_ARGS_H_
