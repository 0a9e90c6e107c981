// --kernel-cmdline: the appliance URLs from the kernel command line's
// rackgate.url= words, split as the kernel splits its parameters
// (lib/cmdline.c next_arg). Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_CMDLINE_H_
#define RACKGATE_AGENT_CMDLINE_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/cmdline.h is internal to rackgate-agent"
#endif

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::agent {

// The largest command-line file read (the kernel's own limit is 2–64 KiB by
// architecture; anything larger is not a kernel command line).
inline constexpr size_t kMaxKernelCmdlineBytes = 64 * 1024;
inline constexpr char kKernelUrlParam[] = "rackgate.url";

// One word of a kernel command line: `name` and, after the first '=', its
// value (nullopt when the word has no '='), quotes removed as the kernel
// removes them.
struct KernelParam {
  std::string name;
  std::optional<std::string> value;
  bool operator==(const KernelParam&) const = default;
};

// The words of `cmdline` as the kernel splits them: whitespace separates
// words except inside double quotes; a leading quote of the word or of its
// value and the word's last quote are removed, other quotes kept; an
// unterminated quote runs to the end. A word `--` ends the kernel's
// parameters (the rest is init's): it and what follows are not returned.
std::vector<KernelParam> SplitKernelCmdline(std::string_view cmdline);

// The values of every `rackgate.url=` word of `cmdline`, in order (each
// still a comma list for ParseApplianceUrls). A `rackgate.url` word without
// '=' carries nothing and is skipped. Empty when there is none.
std::vector<std::string> KernelCmdlineUrls(std::string_view cmdline);

// Reads `path` (at most kMaxKernelCmdlineBytes) and returns
// KernelCmdlineUrls of it. kInvalidArgument "cmdline_no_url" when it holds
// no rackgate.url= word, "file_too_large" when larger than the limit;
// kIoError "file_unreadable". Every message names the file.
Result<std::vector<std::string>> ReadKernelCmdlineUrls(const std::string& path);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_CMDLINE_H_
