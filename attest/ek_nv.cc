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

// One DER TLV with a single-byte tag and a definite length of at most three
// octets, read from `r`: its tag and contents (a view into the input).
bool ReadTlv(ByteReader* r, uint8_t* tag, std::span<const uint8_t>* contents) {
  uint8_t first = 0;
  if (!r->ReadU8(tag) || (*tag & 0x1f) == 0x1f || !r->ReadU8(&first)) return false;
  size_t length = first;
  if (first & 0x80) {
    const size_t octets = first & 0x7f;
    if (octets == 0 || octets > 3) return false;
    length = 0;
    for (size_t i = 0; i < octets; ++i) {
      uint8_t b = 0;
      if (!r->ReadU8(&b)) return false;
      length = (length << 8) | b;
    }
  }
  return r->ReadSpan(length, contents);
}

void AppendTlv(uint8_t tag, std::span<const uint8_t> contents, Bytes* out) {
  out->push_back(tag);
  const size_t n = contents.size();
  if (n < 0x80) {
    out->push_back(static_cast<uint8_t>(n));
  } else if (n < 0x100) {
    out->insert(out->end(), {0x81, static_cast<uint8_t>(n)});
  } else if (n < 0x10000) {
    out->insert(out->end(), {0x82, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)});
  } else {
    out->insert(out->end(), {0x83, static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 8),
                             static_cast<uint8_t>(n)});
  }
  out->insert(out->end(), contents.begin(), contents.end());
}

// The Certificate's contents and, inside it, the TBSCertificate's.
struct CertificateParts {
  std::span<const uint8_t> cert_contents;
  std::span<const uint8_t> tbs_tlv;       // the TBSCertificate, tag to end
  std::span<const uint8_t> tbs_contents;
};

std::optional<CertificateParts> SplitCertificate(std::span<const uint8_t> der) {
  ByteReader outer(der);
  uint8_t tag = 0;
  CertificateParts parts;
  if (!ReadTlv(&outer, &tag, &parts.cert_contents) || tag != 0x30 || !outer.empty()) {
    return std::nullopt;
  }
  ByteReader cert(parts.cert_contents);
  if (!ReadTlv(&cert, &tag, &parts.tbs_contents) || tag != 0x30) return std::nullopt;
  parts.tbs_tlv = parts.cert_contents.first(parts.cert_contents.size() - cert.remaining());
  return parts;
}

bool IsPadding(std::span<const uint8_t> rest) {
  if (rest.empty()) return true;
  // One byte value repeated to the end: 0xFF (an unwritten NV index), 0x00,
  // or whatever a vendor filled its index with (a HIRS sample uses 0x11).
  const uint8_t pad = rest.front();
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
    return Malformed("trailing bytes after the DER certificate (only NV padding, one byte value repeated to the end, may follow)");
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

std::optional<Bytes> TbsCertificateOf(std::span<const uint8_t> der) {
  const std::optional<CertificateParts> parts = SplitCertificate(der);
  if (!parts) return std::nullopt;
  return Bytes(parts->tbs_tlv.begin(), parts->tbs_tlv.end());
}

std::optional<Bytes> CertificateWithMinimalSerial(std::span<const uint8_t> der) {
  const std::optional<CertificateParts> parts = SplitCertificate(der);
  if (!parts) return std::nullopt;
  ByteReader tbs(parts->tbs_contents);
  uint8_t tag = 0;
  std::span<const uint8_t> field;
  size_t before_serial = 0;
  if (!ReadTlv(&tbs, &tag, &field)) return std::nullopt;
  if (tag == 0xa0) {  // [0] version, then the serial
    before_serial = parts->tbs_contents.size() - tbs.remaining();
    if (!ReadTlv(&tbs, &tag, &field)) return std::nullopt;
  }
  if (tag != 0x02) return std::nullopt;  // serialNumber
  // Only zeros the value does not need: a zero followed by a byte below 0x80
  // (a needed zero keeps a positive number's top bit clear).
  size_t skip = 0;
  while (field.size() - skip >= 2 && field[skip] == 0x00 && field[skip + 1] < 0x80) ++skip;
  if (skip == 0) return std::nullopt;
  Bytes tbs_contents(parts->tbs_contents.begin(),
                     parts->tbs_contents.begin() + static_cast<std::ptrdiff_t>(before_serial));
  AppendTlv(0x02, field.subspan(skip), &tbs_contents);
  tbs_contents.insert(tbs_contents.end(), tbs.rest().begin(), tbs.rest().end());
  Bytes cert_contents;
  AppendTlv(0x30, tbs_contents, &cert_contents);
  const std::span<const uint8_t> after_tbs = parts->cert_contents.subspan(parts->tbs_tlv.size());
  cert_contents.insert(cert_contents.end(), after_tbs.begin(), after_tbs.end());
  Bytes out;
  AppendTlv(0x30, cert_contents, &out);
  return out;
}

}  // namespace rackgate::attest
