#include "ctl/initramfs_cpio.h"

#include <zlib.h>

#include <cstdio>
#include <stdexcept>

namespace rackgate::ctl {

namespace {

// One newc entry: the 110-byte header, the name with its NUL padded to a
// multiple of 4 (counting the header), the data padded likewise.
void AppendEntry(std::vector<uint8_t>* out, uint32_t ino, uint32_t mode, uint32_t nlink, std::string_view name,
                 std::string_view data) {
  char header[111];
  std::snprintf(header, sizeof header, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino, mode,
                0u, 0u, nlink, 0u, static_cast<unsigned>(data.size()), 0u, 0u, 0u, 0u,
                static_cast<unsigned>(name.size() + 1), 0u);
  out->insert(out->end(), header, header + 110);
  out->insert(out->end(), name.begin(), name.end());
  out->push_back(0);
  while (out->size() % 4 != 0) out->push_back(0);
  out->insert(out->end(), data.begin(), data.end());
  while (out->size() % 4 != 0) out->push_back(0);
}

}  // namespace

std::vector<uint8_t> CaInitramfsCpio(std::string_view ca_pem) {
  std::vector<uint8_t> out;
  const std::string file = std::string(kInitramfsCaPath).substr(1);  // "etc/rackgate/ca.pem"
  uint32_t ino = 1;
  for (size_t slash = file.find('/'); slash != std::string::npos; slash = file.find('/', slash + 1)) {
    AppendEntry(&out, ino++, 040755, 2, std::string_view(file).substr(0, slash), "");
  }
  AppendEntry(&out, ino, 0100644, 1, file, ca_pem);
  AppendEntry(&out, 0, 0, 1, "TRAILER!!!", "");
  return out;
}

std::vector<uint8_t> Gzip(std::span<const uint8_t> data) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer; its header's mtime is 0.
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("zlib: deflateInit2 failed");
  }
  std::vector<uint8_t> out(deflateBound(&z, data.size()) + 32);
  z.next_in = const_cast<Bytef*>(data.data());  // zlib's API is not const; it only reads
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  return out;
}

}  // namespace rackgate::ctl
