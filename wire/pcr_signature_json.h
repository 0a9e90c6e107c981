// The JSON document `systemd-measure sign` writes (a UKI's .pcrsig section,
// /run/systemd/tpm2-pcr-signature.json on a booted machine): a strict,
// bounded reader into attest's PcrSignature entries. attest/pcr_signature.h
// says what each field is; docs/policy.md ("uki_signed") how it is judged.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_WIRE_PCR_SIGNATURE_JSON_H_
#define RACKGATE_WIRE_PCR_SIGNATURE_JSON_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "attest/boot_policy.h"
#include "base/status.h"

namespace rackgate::wire {

// Limits on a PCR signature document; systemd writes four entries (one per
// boot phase) per bank, each well under 1 KiB.
inline constexpr size_t kMaxPcrSignatureSize = 64 * 1024;  // bytes of JSON
inline constexpr size_t kMaxPcrSignatureEntries = 64;      // all banks together
inline constexpr size_t kMaxPcrSignatureBytes = 1024;      // "sig" decoded (RSA-8192)

// Parses {"sha256": [{"pcrs": [11], "pkfp": "<hex>", "pol": "<hex>",
// "sig": "<base64>"}, ...], ...}. Refuses, with kInvalidArgument and reason
// "pcr_signature_malformed" (the message naming the field): text that is not
// a JSON object, larger than kMaxPcrSignatureSize or nested deeper than 4; a
// bank other than sha1/sha256/sha384/sha512; an entry that is not an object,
// lacks a field, or has "pcrs" that is not a non-empty array of distinct
// integers 0..23, "pkfp" or "pol" that is not 64 hex digits, "sig" that is
// not base64 of 1..kMaxPcrSignatureBytes bytes; more than
// kMaxPcrSignatureEntries entries. Fields of an entry other than these four
// are ignored (a newer systemd may add some; nothing unread is trusted).
Result<std::vector<attest::PcrSignature>> ParsePcrSignatureJson(std::string_view json);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_PCR_SIGNATURE_JSON_H_
