// The appliance CA as an initramfs part (docs/nodes.md, "The appliance CA in
// the initramfs"): a newc cpio archive, gzip-compressed, that a boot loader
// appends to the vendor initramfs beside the agent bundle.
#ifndef RACKGATE_DAEMON_CTL_INITRAMFS_CPIO_H_
#define RACKGATE_DAEMON_CTL_INITRAMFS_CPIO_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::ctl {

// Where the initramfs agent finds the appliance CA: the path the part
// writes, and what the node's /init (or unit) passes to `--ca`.
inline constexpr char kInitramfsCaPath[] = "/etc/rackgate/ca.pem";

// A newc ("070701") cpio archive holding `ca_pem` at kInitramfsCaPath, mode
// 0644, with its parent directories (0755) before it, every entry owned by
// 0:0 with mtime 0, and the TRAILER!!! entry: the same bytes for the same
// CA. The parents must be named because the kernel creates no missing
// directory for a file entry; naming an existing /etc changes nothing
// (it stays a directory, 0755, root's).
std::vector<uint8_t> CaInitramfsCpio(std::string_view ca_pem);

// `data` as one gzip member (RFC 1952; mtime 0, so the same input gives
// the same bytes). A compressed archive may follow another archive of any
// length in an initramfs; an uncompressed one only at a 4-byte offset.
// Throws std::runtime_error only when zlib fails (memory), not on input.
std::vector<uint8_t> Gzip(std::span<const uint8_t> data);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_INITRAMFS_CPIO_H_
