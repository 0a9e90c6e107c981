// Command-line flag parsing for rackgatectl.
#include "ctl/args.h"

#include <algorithm>
#include <cctype>

namespace rackgate::ctl {

namespace {

// Flags every command accepts (docs/cli.md, "Global flags").
const std::set<std::string> kGlobalBooleans = {"json"};
const std::set<std::string> kGlobalWithValue = {"socket"};

// Edit distance counting a swap of neighbours as one edit (`lsit` -> `list`).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

Status UnknownOption(const std::string& arg, const FlagSpec& spec) {
  std::vector<std::string> flags;
  for (const auto* set : {&spec.with_value, &spec.boolean, &kGlobalBooleans, &kGlobalWithValue}) {
    for (const auto& f : *set) flags.push_back("--" + f);
  }
  flags.push_back("--help");
  std::string hint;
  if (arg == "-o" && std::count(flags.begin(), flags.end(), "--json")) {
    hint = "; did you mean --json?";  // kubectl's `-o json`
  } else if (arg.rfind("--", 0) != 0 && arg.size() > 2 &&
             std::count(flags.begin(), flags.end(), "-" + arg)) {
    hint = "; did you mean -" + arg + "?";  // -hostname
  } else {
    hint = DidYouMean(arg.rfind("--", 0) == 0 ? arg : "-" + arg, flags, "");
  }
  return Status::InvalidArgument("usage", "unknown option " + arg + hint);
}

}  // namespace

Result<Args> Args::Parse(int argc, char** argv, int first, const FlagSpec& spec) {
  Args a;
  bool options_done = false;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    const bool dash = !options_done && arg.size() > 1 && arg[0] == '-';
    if (!dash) {
      if (!options_done && arg == "--") {
        options_done = true;
        continue;
      }
      if (a.positional_.size() >= spec.max_positional) {
        return Status::InvalidArgument(
            "usage", "unexpected argument '" + arg + "'" +
                         (spec.max_positional == 0 ? " (this command takes none)"
                                                   : " (at most " + std::to_string(spec.max_positional) + ")"));
      }
      a.positional_.push_back(arg);
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      a.bools_.insert("help");
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    // A single dash is only -h: `-o json` and `-x` are typos, not positionals.
    if (arg.rfind("--", 0) != 0) return UnknownOption(arg, spec);
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (spec.boolean.count(name) || kGlobalBooleans.count(name)) {
      if (inline_value) return Status::InvalidArgument("usage", "--" + name + " takes no value");
      a.bools_.insert(name);
    } else if (spec.with_value.count(name) || kGlobalWithValue.count(name)) {
      if (inline_value) {
        a.values_[name].push_back(*inline_value);
      } else if (i + 1 < argc) {
        a.values_[name].push_back(argv[++i]);
      } else {
        return Status::InvalidArgument("usage", "--" + name + " needs a value");
      }
    } else {
      return UnknownOption("--" + name, spec);
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

Result<int64_t> Args::GetInt(const std::string& flag, int64_t fallback, int64_t min, int64_t max) const {
  auto v = Get(flag);
  if (!v) return fallback;
  const std::string& t = *v;
  const size_t digits_at = !t.empty() && t[0] == '-' ? 1 : 0;
  const bool whole = t.size() > digits_at && t.size() - digits_at <= 18 &&
                     std::all_of(t.begin() + digits_at, t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!whole) return Status::InvalidArgument("usage", "--" + flag + " takes a whole number, got '" + t + "'");
  const int64_t n = std::stoll(t);
  if (n < min || n > max) {
    return Status::InvalidArgument("usage", "--" + flag + " is " + std::to_string(min) + " to " +
                                                std::to_string(max) + ", got " + t);
  }
  return n;
}

Result<int64_t> Args::GetDuration(const std::string& flag, int64_t fallback) const {
  auto v = Get(flag);
  if (!v) return fallback;
  auto seconds = ParseDuration(*v);
  if (!seconds) {
    return Status::InvalidArgument("usage", "--" + flag + " takes a duration such as 0, 90s, 30m, 2h, 1d or 1h30m, got '" +
                                                *v + "'");
  }
  return *seconds;
}

Status Args::Require(const std::vector<std::string>& flags) const {
  for (const auto& f : flags) {
    if (!Get(f)) return Status::InvalidArgument("usage", "missing --" + f);
  }
  return Status::Ok();
}

std::optional<int64_t> ParseDuration(const std::string& text) {
  if (text == "0") return 0;
  if (text.empty()) return std::nullopt;
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j == i || j == text.size() || j - i > 7) return std::nullopt;
    const int64_t n = std::stoll(text.substr(i, j - i));
    switch (text[j]) {
      case 's': total += n; break;
      case 'm': total += n * 60; break;
      case 'h': total += n * 3600; break;
      case 'd': total += n * 86400; break;
      default: return std::nullopt;
    }
    i = j + 1;
  }
  return total;
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates, const char* quote) {
  const std::string* best = nullptr;
  size_t best_d = 0;
  for (const auto& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (!best || d < best_d) best = &c, best_d = d;
  }
  if (!best || best_d == 0 || best_d > 2 || best_d * 2 >= word.size()) return "";
  return std::string("; did you mean ") + quote + *best + quote + "?";
}

}  // namespace rackgate::ctl
