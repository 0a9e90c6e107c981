// Kernel command-line words, split as lib/cmdline.c splits them.
#include "agent/cmdline.h"

#include "base/files.h"

namespace rackgate::agent {

namespace {

// The kernel's isspace() for the command line (lib/ctype.c: the C locale's
// space characters, plus 0xa0 which is Latin-1's no-break space).
bool KernelSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' ||
         static_cast<unsigned char>(c) == 0xa0;
}

}  // namespace

std::vector<KernelParam> SplitKernelCmdline(std::string_view args) {
  std::vector<KernelParam> out;
  size_t at = 0;
  while (at < args.size() && KernelSpace(args[at])) ++at;
  while (at < args.size()) {
    // next_arg(): a word runs to the first space outside quotes; every
    // quote toggles, a leading one included.
    bool quoted = false, in_quote = false;
    if (args[at] == '"') {
      ++at;
      in_quote = quoted = true;
    }
    size_t i = 0, equals = 0;
    for (; at + i < args.size(); ++i) {
      const char c = args[at + i];
      if (KernelSpace(c) && !in_quote) break;
      if (equals == 0 && c == '=') equals = i;
      if (c == '"') in_quote = !in_quote;
    }
    std::string_view word = args.substr(at, i);
    KernelParam p;
    // The word's last quote goes when the word or its value began with one.
    const bool last_is_quote = i > 0 && word.back() == '"';
    if (equals == 0) {
      if (quoted && last_is_quote) word.remove_suffix(1);
      p.name = std::string(word);
    } else {
      p.name = std::string(word.substr(0, equals));
      std::string_view value = word.substr(equals + 1);
      bool strip_last = quoted && last_is_quote;
      if (!value.empty() && value.front() == '"') {
        value.remove_prefix(1);
        strip_last = strip_last || last_is_quote;
      }
      // The quote that opened the value may be the last one itself (`a="`).
      if (strip_last && !value.empty() && value.back() == '"') value.remove_suffix(1);
      p.value = std::string(value);
    }
    at += i;
    while (at < args.size() && KernelSpace(args[at])) ++at;
    // parse_args(): "--" ends the kernel's parameters.
    if (p.name == "--" && !p.value) break;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> KernelCmdlineUrls(std::string_view cmdline) {
  std::vector<std::string> out;
  for (auto& p : SplitKernelCmdline(cmdline)) {
    if (p.name == kKernelUrlParam && p.value) out.push_back(std::move(*p.value));
  }
  return out;
}

Result<std::vector<std::string>> ReadKernelCmdlineUrls(const std::string& path) {
  auto text = ReadFile(path, kMaxKernelCmdlineBytes);
  if (!text.ok()) return text.status();
  auto urls = KernelCmdlineUrls(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()));
  if (urls.empty()) {
    return Status::InvalidArgument("cmdline_no_url", path + ": no " + kKernelUrlParam + "= word (the appliance URL, "
                                                                "as `rackgatectl pointer --kernel-args` prints it)");
  }
  return urls;
}

}  // namespace rackgate::agent
