// EK certificates as TPMs store them in NV.
#include "attest/ek_nv.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "base/byte_reader.h"

namespace rackgate::attest {
namespace {

Status Malformed(std::string message) { return Status::InvalidArgument("ek_cert_malformed", std::move(message)); }

// The length of the DER SEQUENCE (tag, length and contents) at the start of
// `in`; nullopt when it is not one, uses an indefinite or over-long length
// form, or runs past `in`.
std::optional<size_t> DerSequenceLength(std::span<const uint8_t> in) {
  ByteReader r(in);
  uint8_t tag = 0;
  uint8_t first = 0;
  if (!r.ReadU8(&tag) || tag != 0x30 || !r.ReadU8(&first)) return std::nullopt;
  size_t header = 2;
  size_t length = first;
  if (first & 0x80) {
    const size_t octets = first & 0x7f;
    // A certificate is far below 16 MiB: at most three length octets, and
    // no indefinite form (0x80), which DER forbids.
    if (octets == 0 || octets > 3) return std::nullopt;
    length = 0;
    for (size_t i = 0; i < octets; ++i) {
      uint8_t b = 0;
      if (!r.ReadU8(&b)) return std::nullopt;
      length = (length << 8) | b;
    }
    header += octets;
  }
  if (length > r.remaining()) return std::nullopt;
  return header + length;
}

bool IsPadding(std::span<const uint8_t> rest) {
  if (rest.empty()) return true;
  const uint8_t pad = rest.front();
  if (pad != 0xFF && pad != 0x00) return false;
  return std::all_of(rest.begin(), rest.end(), [pad](uint8_t b) { return b == pad; });
}

bool StartsWith(std::span<const uint8_t> in, std::span<const uint8_t> prefix) {
  return in.size() >= prefix.size() && std::memcmp(in.data(), prefix.data(), prefix.size()) == 0;
}

}  // namespace

Result<Bytes> EkCertificateDerFromNv(std::span<const uint8_t> nv) {
  if (nv.empty()) return Malformed("empty certificate");
  std::span<const uint8_t> body = nv;
  std::span<const uint8_t> after_header;  // what follows the header's size
  if (StartsWith(nv, kNvStoredCertHeader)) {
    ByteReader r(nv.subspan(sizeof(kNvStoredCertHeader)));
    uint16_t size = 0;
    if (!r.ReadU16BE(&size) || !r.ReadSpan(size, &body)) {
      return Malformed("NV stored-certificate header names more bytes than follow it");
    }
    after_header = r.rest();
    if (StartsWith(body, kNvFullCertTag)) body = body.subspan(sizeof(kNvFullCertTag));
  }
  const std::optional<size_t> length = DerSequenceLength(body);
  if (!length) return Malformed("not a DER certificate (no complete DER SEQUENCE at its start)");
  if (!IsPadding(body.subspan(*length)) || !IsPadding(after_header)) {
    return Malformed("trailing bytes after the DER certificate (only 0xFF or 0x00 NV padding may follow)");
  }
  return Bytes(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(*length));
}

std::vector<Bytes> SplitDerCertificates(std::span<const uint8_t> data, size_t max) {
  std::vector<Bytes> out;
  while (!data.empty() && out.size() < max) {
    const std::optional<size_t> length = DerSequenceLength(data);
    if (!length) break;
    out.emplace_back(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(*length));
    data = data.subspan(*length);
  }
  return out;
}

}  // namespace rackgate::attest
