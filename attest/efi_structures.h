// UEFI structures that measured-boot events carry (EFI_GUID,
// UEFI_VARIABLE_DATA, EFI_SIGNATURE_LIST, UEFI_IMAGE_LOAD_EVENT, EFI device
// paths): strict, bounded parsers of untrusted event data. Extracting facts
// from them is attest/boot_facts.h's job. See docs/eventlog.md.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_ATTEST_EFI_STRUCTURES_H_
#define RACKGATE_ATTEST_EFI_STRUCTURES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "attest/tpm.h"
#include "base/status.h"

namespace rackgate::attest {

// Limits on structures inside event data. The data itself is already bounded
// by kMaxEventDataSize; these bound the work and the copies made from it.
inline constexpr uint64_t kMaxUefiVariableNameChars = 1024;  // UnicodeNameLength
inline constexpr size_t kMaxEfiSignatures = 16384;           // per variable, all lists
inline constexpr size_t kMaxDevicePathNodes = 256;           // per EFI_DEVICE_PATH

// Bytes of an EFI_GUID.
inline constexpr size_t kEfiGuidSize = 16;

// An EFI_GUID as it appears on the wire: 16 bytes, the first three fields
// little-endian.
struct EfiGuid {
  std::array<uint8_t, kEfiGuidSize> bytes{};

  // "8be4df61-93ca-11d2-aa0d-00e098032b8c".
  std::string ToString() const;
  bool operator==(const EfiGuid&) const = default;
};

// EFI_GLOBAL_VARIABLE: SecureBoot, PK, KEK, Boot####, BootOrder.
inline constexpr EfiGuid kEfiGlobalVariableGuid{
    {0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}};
// EFI_IMAGE_SECURITY_DATABASE_GUID: db, dbx, dbt, dbr.
inline constexpr EfiGuid kEfiImageSecurityDatabaseGuid{
    {0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45, 0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f}};
// EFI_CERT_SHA256_GUID and EFI_CERT_X509_GUID (EFI_SIGNATURE_LIST types).
inline constexpr EfiGuid kEfiCertSha256Guid{
    {0x26, 0x16, 0xc4, 0xc1, 0x4c, 0x50, 0x92, 0x40, 0xac, 0xa9, 0x41, 0xf9, 0x36, 0x93, 0x43, 0x28}};
inline constexpr EfiGuid kEfiCertX509Guid{
    {0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a, 0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72}};

// UEFI_VARIABLE_DATA { EFI_GUID VariableName; u64 UnicodeNameLength;
// u64 VariableDataLength; CHAR16 UnicodeName[]; INT8 VariableData[] }.
struct UefiVariableData {
  EfiGuid vendor;
  std::string name;  // UnicodeName as UTF-8 (invalid UTF-16 becomes U+FFFD)
  Bytes data;        // VariableData
};

// Parses UEFI_VARIABLE_DATA. The lengths must describe the data exactly: no
// bytes short, none left over. kInvalidArgument "uefi_variable_malformed"
// otherwise, or for a name longer than kMaxUefiVariableNameChars.
Result<UefiVariableData> ParseUefiVariableData(std::span<const uint8_t> data);

// EFI_SIGNATURE_DATA { EFI_GUID SignatureOwner; u8 SignatureData[] }.
struct EfiSignatureData {
  EfiGuid owner;
  Bytes data;  // SignatureSize - 16 bytes: a hash, a DER certificate, ...
};

// EFI_SIGNATURE_LIST { EFI_GUID SignatureType; u32 SignatureListSize;
// u32 SignatureHeaderSize; u32 SignatureSize;
// u8 SignatureHeader[SignatureHeaderSize]; EFI_SIGNATURE_DATA Signatures[] }.
struct EfiSignatureList {
  EfiGuid type;
  Bytes header;  // SignatureHeader, kept apart: it is never a signature
  std::vector<EfiSignatureData> signatures;
};

// Parses the contents of PK, KEK, db, dbx, ...: zero or more EFI_SIGNATURE_LISTs
// back to back, filling `data` exactly. Each list is read through its own
// sub-reader of SignatureListSize bytes; its SignatureHeaderSize bytes are
// skipped as the header (never read as signatures — the bug class where an
// ignored header let attacker bytes into a trusted list); the rest must be a
// whole number of SignatureSize-byte entries, SignatureSize > 16 and, for
// the fixed-size types (EFI_CERT_SHA1/SHA256/SHA384/SHA512, X509_SHA*,
// RSA2048), exactly that type's size (48 for EFI_CERT_SHA256).
// kInvalidArgument "efi_signature_list_malformed" otherwise, or for more
// than kMaxEfiSignatures signatures in all.
Result<std::vector<EfiSignatureList>> ParseEfiSignatureLists(std::span<const uint8_t> data);

// UEFI_IMAGE_LOAD_EVENT { EFI_PHYSICAL_ADDRESS ImageLocationInMemory;
// UINTN ImageLengthInMemory; UINTN ImageLinkTimeAddress;
// UINTN LengthOfDevicePath; EFI_DEVICE_PATH DevicePath[] } (UINTN = 8 bytes).
struct UefiImageLoadEvent {
  uint64_t image_location = 0;
  uint64_t image_length = 0;
  uint64_t link_time_address = 0;
  Bytes device_path;
};

// kInvalidArgument "uefi_image_load_malformed" unless LengthOfDevicePath
// covers the rest of the data exactly.
Result<UefiImageLoadEvent> ParseUefiImageLoadEvent(std::span<const uint8_t> data);

// The file path an EFI_DEVICE_PATH names: its media file-path nodes (type 4,
// subtype 4) joined, as UTF-8, e.g. "\EFI\BOOT\BOOTX64.EFI". Empty when the
// path has none. kInvalidArgument "device_path_malformed" for a node shorter
// than its header or running past the data, or above kMaxDevicePathNodes.
Result<std::string> DevicePathFilePath(std::span<const uint8_t> device_path);

// UTF-16LE code units (a CHAR16 string as UEFI stores it) to UTF-8; an
// unpaired surrogate becomes U+FFFD and an odd trailing byte is dropped.
std::string Utf16ToUtf8(std::span<const uint8_t> data);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_EFI_STRUCTURES_H_
