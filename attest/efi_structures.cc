// Parsers of the UEFI structures that measured-boot events carry.
#include "attest/efi_structures.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "base/byte_reader.h"
#include "base/hex.h"

namespace rackgate::attest {

namespace {

// EFI_SIGNATURE_LIST's fixed header: SignatureType, three u32.
constexpr size_t kSignatureListHeaderSize = kEfiGuidSize + 3 * 4;
// UEFI_VARIABLE_DATA's fixed header: VariableName, two u64.
constexpr size_t kUefiVariableHeaderSize = kEfiGuidSize + 2 * 8;

bool ReadGuid(ByteReader* r, EfiGuid* out) {
  std::span<const uint8_t> s;
  if (!r->ReadSpan(kEfiGuidSize, &s)) return false;
  std::copy(s.begin(), s.end(), out->bytes.begin());
  return true;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// The size in bytes of one EFI_SIGNATURE_DATA for list types of fixed size;
// 0 for variable-size types (X.509 certificates) and unknown ones.
size_t FixedSignatureSize(const EfiGuid& type) {
  struct Known {
    EfiGuid guid;
    size_t data_size;
  };
  static const Known kKnown[] = {
      {kEfiCertSha256Guid, 32},
      // EFI_CERT_SHA1_GUID
      {{{0x12, 0xa5, 0x6c, 0x82, 0x10, 0xcf, 0xc9, 0x4a, 0xb1, 0x87, 0xbe, 0x01, 0x49, 0x66,
         0x31, 0xbd}},
       20},
      // EFI_CERT_SHA384_GUID
      {{{0x07, 0x53, 0x3e, 0xff, 0xd0, 0x9f, 0xc9, 0x48, 0x85, 0xf1, 0x8a, 0xd5, 0x6c, 0x70,
         0x1e, 0x01}},
       48},
      // EFI_CERT_SHA512_GUID
      {{{0xae, 0x0f, 0x3e, 0x09, 0xc4, 0xa6, 0x50, 0x4f, 0x9f, 0x1b, 0xd4, 0x1e, 0x2b, 0x89,
         0xc1, 0x9a}},
       64},
      // EFI_CERT_RSA2048_GUID
      {{{0xe8, 0x66, 0x57, 0x3c, 0x9c, 0x26, 0x34, 0x4e, 0xaa, 0x14, 0xed, 0x77, 0x6e, 0x85,
         0xb3, 0xb6}},
       256},
      // EFI_CERT_X509_SHA256_GUID: hash + EFI_TIME
      {{{0x92, 0xa4, 0xd2, 0x3b, 0xc0, 0x96, 0x79, 0x40, 0xb4, 0x20, 0xfc, 0xf9, 0x8e, 0xf1,
         0x03, 0xed}},
       32 + 16},
      // EFI_CERT_X509_SHA384_GUID
      {{{0x6e, 0x87, 0x76, 0x70, 0xc2, 0x80, 0xe6, 0x4e, 0xaa, 0xd2, 0x28, 0xb3, 0x49, 0xa6,
         0x86, 0x5b}},
       48 + 16},
      // EFI_CERT_X509_SHA512_GUID
      {{{0x63, 0xbf, 0x6d, 0x44, 0x02, 0x25, 0xda, 0x4c, 0xbc, 0xfa, 0x24, 0x65, 0xd2, 0xb0,
         0xfe, 0x9d}},
       64 + 16},
  };
  for (const Known& k : kKnown) {
    if (k.guid == type) return kEfiGuidSize + k.data_size;
  }
  return 0;
}

}  // namespace

// UTF-16LE code units to UTF-8; an unpaired surrogate becomes U+FFFD. An odd
// trailing byte is dropped.
std::string Utf16ToUtf8(std::span<const uint8_t> data) {
  std::string out;
  ByteReader r(data);
  uint16_t u;
  while (r.ReadU16LE(&u)) {
    if (u >= 0xd800 && u <= 0xdbff) {
      ByteReader peek = r;
      uint16_t lo;
      if (peek.ReadU16LE(&lo) && lo >= 0xdc00 && lo <= 0xdfff) {
        r = peek;
        AppendUtf8(0x10000 + ((static_cast<uint32_t>(u) - 0xd800) << 10) + (lo - 0xdc00), &out);
        continue;
      }
      AppendUtf8(0xfffd, &out);
    } else if (u >= 0xdc00 && u <= 0xdfff) {
      AppendUtf8(0xfffd, &out);
    } else {
      AppendUtf8(u, &out);
    }
  }
  return out;
}

std::string EfiGuid::ToString() const {
  // The first three fields are little-endian; the text shows them big-endian.
  const auto& b = bytes;
  const std::array<uint8_t, 16> shown = {b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6],
                                         b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]};
  std::string out = hex::Encode(shown);
  for (size_t at : {8, 13, 18, 23}) out.insert(at, 1, '-');
  return out;
}

Result<UefiVariableData> ParseUefiVariableData(std::span<const uint8_t> data) {
  auto bad = [](const std::string& what) {
    return Status::InvalidArgument("uefi_variable_malformed", "UEFI_VARIABLE_DATA: " + what);
  };
  ByteReader r(data);
  UefiVariableData out;
  uint64_t name_chars, data_len;
  if (!ReadGuid(&r, &out.vendor) || !r.ReadU64LE(&name_chars) || !r.ReadU64LE(&data_len)) {
    return bad("shorter than its " + std::to_string(kUefiVariableHeaderSize) + "-byte header");
  }
  // SECURITY: both lengths are untrusted u64s; each is compared with what
  // remains (by division and subtraction, never by a sum that could wrap)
  // before a byte is read.
  if (name_chars > kMaxUefiVariableNameChars || name_chars > r.remaining() / 2) {
    return bad("UnicodeNameLength " + std::to_string(name_chars) + " is too long");
  }
  std::span<const uint8_t> name;
  if (!r.ReadSpan(static_cast<size_t>(name_chars) * 2, &name)) return bad("short name");
  if (data_len != r.remaining()) {
    return bad("VariableDataLength " + std::to_string(data_len) + " but " +
               std::to_string(r.remaining()) + " bytes follow the name");
  }
  out.name = Utf16ToUtf8(name);
  out.data.assign(r.rest().begin(), r.rest().end());
  return out;
}

Result<std::vector<EfiSignatureList>> ParseEfiSignatureLists(std::span<const uint8_t> data) {
  std::vector<EfiSignatureList> out;
  size_t total = 0;
  ByteReader r(data);
  while (!r.empty()) {
    const size_t offset = data.size() - r.remaining();
    auto bad = [offset](const std::string& what) {
      return Status::InvalidArgument("efi_signature_list_malformed",
                                     "EFI_SIGNATURE_LIST at offset " + std::to_string(offset) +
                                         ": " + what);
    };
    EfiSignatureList list;
    ByteReader head = r;
    uint32_t list_size, header_size, sig_size;
    if (!ReadGuid(&head, &list.type) || !head.ReadU32LE(&list_size) ||
        !head.ReadU32LE(&header_size) || !head.ReadU32LE(&sig_size)) {
      return bad("shorter than its header");
    }
    // The list is read only through a sub-reader of exactly
    // SignatureListSize bytes, which must hold its own fixed header.
    ByteReader body;
    if (list_size < kSignatureListHeaderSize || !r.ReadBytes(list_size, &body)) {
      return bad("SignatureListSize " + std::to_string(list_size) + " does not fit");
    }
    if (!body.Skip(kSignatureListHeaderSize)) return bad("short header");
    // SECURITY: SignatureHeaderSize bytes come first and are the header,
    // never signatures. Skipping them by subtraction against what the list
    // holds is what keeps an attacker's header bytes out of a trusted db.
    std::span<const uint8_t> header;
    if (!body.ReadSpan(header_size, &header)) {
      return bad("SignatureHeaderSize " + std::to_string(header_size) + " exceeds the list");
    }
    list.header.assign(header.begin(), header.end());
    if (sig_size <= kEfiGuidSize) {
      return bad("SignatureSize " + std::to_string(sig_size) + " leaves no signature data");
    }
    if (const size_t fixed = FixedSignatureSize(list.type); fixed != 0 && sig_size != fixed) {
      return bad("SignatureSize " + std::to_string(sig_size) + " for type " +
                 list.type.ToString() + ", which has " + std::to_string(fixed));
    }
    if (body.remaining() % sig_size != 0) {
      return bad(std::to_string(body.remaining()) + " bytes of signatures is not a multiple of " +
                 std::to_string(sig_size));
    }
    const size_t count = body.remaining() / sig_size;
    if (count > kMaxEfiSignatures - total) {
      return bad("more than " + std::to_string(kMaxEfiSignatures) + " signatures");
    }
    total += count;
    list.signatures.reserve(count);
    while (!body.empty()) {
      EfiSignatureData sd;
      std::span<const uint8_t> sig;
      if (!ReadGuid(&body, &sd.owner) || !body.ReadSpan(sig_size - kEfiGuidSize, &sig)) {
        return bad("short signature");  // unreachable: sizes checked above
      }
      sd.data.assign(sig.begin(), sig.end());
      list.signatures.push_back(std::move(sd));
    }
    out.push_back(std::move(list));
  }
  return out;
}

Result<UefiImageLoadEvent> ParseUefiImageLoadEvent(std::span<const uint8_t> data) {
  ByteReader r(data);
  UefiImageLoadEvent out;
  uint64_t path_len;
  if (!r.ReadU64LE(&out.image_location) || !r.ReadU64LE(&out.image_length) ||
      !r.ReadU64LE(&out.link_time_address) || !r.ReadU64LE(&path_len) ||
      path_len != r.remaining()) {
    return Status::InvalidArgument("uefi_image_load_malformed",
                                   "UEFI_IMAGE_LOAD_EVENT: LengthOfDevicePath does not match the "
                                   "bytes that follow");
  }
  out.device_path.assign(r.rest().begin(), r.rest().end());
  return out;
}

Result<std::string> DevicePathFilePath(std::span<const uint8_t> device_path) {
  constexpr uint8_t kMediaDevice = 0x04;
  constexpr uint8_t kMediaFilePath = 0x04;
  constexpr uint8_t kEndOfPath = 0x7f;
  constexpr size_t kNodeHeaderSize = 4;
  ByteReader r(device_path);
  std::string path;
  for (size_t nodes = 0; !r.empty(); ++nodes) {
    uint8_t type, subtype;
    uint16_t length;
    ByteReader node;
    if (nodes >= kMaxDevicePathNodes || !r.ReadU8(&type) || !r.ReadU8(&subtype) ||
        !r.ReadU16LE(&length) || length < kNodeHeaderSize ||
        !r.ReadBytes(length - kNodeHeaderSize, &node)) {
      return Status::InvalidArgument("device_path_malformed",
                                     "EFI_DEVICE_PATH node " + std::to_string(nodes) +
                                         " is malformed");
    }
    if (type == kEndOfPath) break;
    if (type == kMediaDevice && subtype == kMediaFilePath) {
      std::string part = Utf16ToUtf8(node.rest());
      part.resize(std::min(part.size(), part.find('\0')));
      if (!path.empty() && path.back() != '\\' && !part.empty() && part.front() != '\\') {
        path.push_back('\\');
      }
      path += part;
    }
  }
  return path;
}

}  // namespace rackgate::attest
