// The agent bundle's public names (docs/nodes.md, "The bundle over HTTP"),
// shared by rackgated, which serves it, and rackgatectl, which tells an
// operator where to fetch it.
#ifndef RACKGATE_WIRE_AGENT_BUNDLE_PATHS_H_
#define RACKGATE_WIRE_AGENT_BUNDLE_PATHS_H_

#include <cstddef>

namespace rackgate::wire {

// Where the Debian package installs the fragment (agent/meson.build).
inline constexpr char kDefaultAgentBundlePath[] = "/usr/lib/rackgate/agent-initramfs.cpio.zst";
// No bundle the build makes comes near this (7.7 MB); a file beyond it is
// not a bundle and is never read into memory.
inline constexpr size_t kMaxAgentBundleBytes = 64u << 20;
// The fragment, and its digest as `sha256sum` prints it.
inline constexpr char kAgentInitramfsPath[] = "/v1/agent/initramfs";
inline constexpr char kAgentInitramfsDigestPath[] = "/v1/agent/initramfs.sha256";

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_AGENT_BUNDLE_PATHS_H_
