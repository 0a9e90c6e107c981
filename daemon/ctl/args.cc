// Command-line flag parsing for rackgatectl.
#include "daemon/ctl/args.h"

namespace rackgate::ctl {

Result<Args> Args::Parse(int argc, char** argv, int first, const FlagSpec& spec) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      a.bools_.insert("help");
      continue;
    }
    if (arg == "--") {
      for (++i; i < argc; ++i) a.positional_.push_back(argv[i]);
      break;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      a.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (spec.boolean.count(name)) {
      if (inline_value) return Status::InvalidArgument("usage", "--" + name + " takes no value");
      a.bools_.insert(name);
    } else if (spec.with_value.count(name)) {
      if (inline_value) {
        a.values_[name].push_back(*inline_value);
      } else if (i + 1 < argc) {
        a.values_[name].push_back(argv[++i]);
      } else {
        return Status::InvalidArgument("usage", "--" + name + " needs a value");
      }
    } else {
      return Status::InvalidArgument("usage", "unknown option --" + name);
    }
  }
  return a;
}

std::optional<std::string> Args::Get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::GetAll(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

Status Args::Require(const std::vector<std::string>& flags) const {
  for (const auto& f : flags) {
    if (!Get(f)) return Status::InvalidArgument("usage", "missing --" + f);
  }
  return Status::Ok();
}

}  // namespace rackgate::ctl
