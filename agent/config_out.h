// --config-out, repeatable: the attested config written to each of up to
// kMaxConfigOuts files, skipping a place that cannot exist on this boot
// when several are given. Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_CONFIG_OUT_H_
#define RACKGATE_AGENT_CONFIG_OUT_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/config_out.h is internal to rackgate-agent"
#endif

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::agent {

inline constexpr size_t kMaxConfigOuts = 4;

// Whether a config output that failed with `error_number` (the errno of the
// write, or of its directory's check) is skipped rather than failing the
// step: only with several outputs (`outputs_given` > 1), and only for a
// directory that is missing (ENOENT) or on a read-only filesystem (EROFS):
// an initramfs whose Ignition reads another of the paths (Debian's Ignition
// 2.14 reads /usr/lib/ignition only, newer ones also /run/ignition, and
// systemd 256 mounts the initrd's /usr read-only). Anything else (EACCES,
// ENOSPC, EIO) is a failure: the config could not be handed over.
bool SkipConfigOut(size_t outputs_given, int error_number);

// Writes `data` to each of `paths` (WriteFileAtomic: 0600, atomic), in
// order. A failed one that SkipConfigOut allows is skipped, and `note` gets
// a line naming it and why. Returns the paths written. kIoError
// "file_unwritable" for the first failure not skipped, or when none was
// written (naming every path). REQUIRES: !paths.empty().
Result<std::vector<std::string>> WriteConfigOuts(const std::vector<std::string>& paths,
                                                 std::span<const uint8_t> data,
                                                 const std::function<void(const std::string&)>& note);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_CONFIG_OUT_H_
