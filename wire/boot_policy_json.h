// The JSON form of a boot policy and of PCR values (docs/policy.md): strict,
// bounded readers into attest's typed BootPolicy and PcrValues, and the one
// writer of PCR values. attest/boot_policy.h judges what these read.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_WIRE_BOOT_POLICY_JSON_H_
#define RACKGATE_WIRE_BOOT_POLICY_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "attest/boot_policy.h"
#include "attest/tpm.h"
#include "base/status.h"

namespace rackgate::wire {

// Limits on a policy document; each is far above any sensible policy.
inline constexpr size_t kMaxPolicySize = 1u << 20;      // bytes of JSON
inline constexpr size_t kMaxPolicyDepth = 8;            // nesting of [ and {
inline constexpr size_t kMaxPolicyDigests = 4096;       // per allowed/forbidden list
inline constexpr size_t kMaxPolicyStrings = 256;        // per command-line list
inline constexpr size_t kMaxPolicyStringSize = 4096;    // bytes, one string
inline constexpr size_t kMaxPolicyUkiSections = 64;     // names in "uki.sections"
inline constexpr size_t kMaxPolicyUkiKeys = 16;         // "uki_signed.public_keys"

inline constexpr int kBootPolicyVersion = 1;

// Parses a policy document. Refuses, with kInvalidArgument and reason
// "policy_malformed" (the message naming the offending field): text that is
// not JSON, larger than kMaxPolicySize or nested deeper than kMaxPolicyDepth;
// a duplicate key; a missing or other "version" than 1; any field this format
// does not define, at any level (a typo must never silently drop a rule); a
// value of the wrong type; a bank other than sha1/sha256/sha384/sha512; a PCR
// index above 23; a digest whose length is not its bank's; a list above its
// limit; a "uki" rule naming no section, or a name that is not a PE section
// name (2..8 printable characters starting with '.'); a "db"/"dbx" list that
// holds other than SHA-256 values, a "db" with neither list, a "dbx" without
// "required"; a
// "uki_signed" key that is not one PEM RSA or EC public key, an empty key
// list or more than kMaxPolicyUkiKeys keys.
Result<attest::BootPolicy> ParseBootPolicy(std::string_view json);

// PCR values as JSON: {"sha256": {"0": "<hex>", ...}, ...}, banks strongest
// first, PCRs in ascending order, lower-case hex, no whitespace but one space
// after each ':' and ','. This is the "pcrs" object of `rackgatectl eventlog
// replay --json` and of TOFU records.
std::string FormatPcrValuesJson(const attest::PcrValues& pcrs);

// Reads a document whose top-level "pcrs" member is such an object (other
// top-level members are ignored: the document may be `eventlog replay
// --json` output). kInvalidArgument "pcr_values_malformed" for anything else,
// a bank or PCR index we do not know or a value that is not its bank's size.
Result<attest::PcrValues> ParsePcrValuesJson(std::string_view json);

// The policy document of `policy` (docs/policy.md; wire/boot_policy_format.cc),
// pretty-printed with a 2-space indent and a final newline, "version": 1
// first, then the rules in the format's order: pcrs, require_secure_boot,
// require_separators, boot_applications, authorities, boot_files, kernel_cmdline, uki,
// db, dbx, uki_signed, tofu. Digests are written "bank:<lower-case hex>";
// every list is sorted and without duplicates (digests and PEM keys by their
// text, command-line strings byte-wise, TOFU PCRs numerically); banks
// strongest first, PCRs ascending. A rule that checks nothing is left out (a
// false boolean, no allow-list and an empty forbid-list, an unset optional);
// an `allowed` list that is set but empty is written ([] allows nothing).
// ParseBootPolicy reads the result back to an equal policy, up to that
// order. Pure.
std::string FormatBootPolicyJson(const attest::BootPolicy& policy);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_BOOT_POLICY_JSON_H_
