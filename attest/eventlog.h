// TCG PC Client measured-boot event logs: parsing the binary log a firmware
// leaves in /sys/kernel/security/tpm0/binary_bios_measurements, replaying it
// into PCR values, and comparing those with the PCRs a quote vouched for.
//
// Formats (TCG PC Client Platform Firmware Profile, section 10), all
// little-endian:
//  - SHA-1 log: a sequence of TCG_PCR_EVENT
//      { u32 pcrIndex; u32 eventType; u8 digest[20]; u32 eventSize; u8 event[] }
//  - crypto-agile log: one TCG_PCR_EVENT of type EV_NO_ACTION whose data is a
//    TCG_EfiSpecIDEvent ("Spec ID Event03"), which declares the banks and their
//    digest sizes, then a sequence of TCG_PCR_EVENT2
//      { u32 pcrIndex; u32 eventType; u32 count;
//        { u16 algId; u8 digest[size declared for algId] }[count];
//        u32 eventSize; u8 event[] }
//
// The log is untrusted: it proves nothing by itself. It is worth exactly as
// much as a successful ComparePcrs against PCR values from a verified quote.
//
// PCR indices: the parser accepts 0..kMaxPcrIndex (31, as tpm2_eventlog does)
// on events that extend, so a log from an unusual platform can still be
// shown, and any index on EV_NO_ACTION events, which extend nothing (Windows
// logs some on PCR 0xffffffff). Replay refuses an extending event on a PCR
// above kMaxReplayPcrIndex (23): a PC Client TPM has exactly 24 PCRs, and a
// log that extends one it does not have cannot describe that TPM.
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_ATTEST_EVENTLOG_H_
#define RACKGATE_ATTEST_EVENTLOG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// Limits on untrusted logs. Real logs are tens of KiB with a few hundred
// events; each limit is far above that and keeps a hostile log's cost bounded.
inline constexpr size_t kMaxEventLogSize = 16u << 20;   // whole log, bytes
inline constexpr size_t kMaxEvents = 16384;             // events, Spec ID included
inline constexpr size_t kMaxEventDataSize = 1u << 20;   // one event's data, bytes
inline constexpr size_t kMaxBanks = 16;                 // algorithms in the Spec ID event
inline constexpr size_t kMaxDigestSize = 64;            // bytes, one digest (SHA-512)
inline constexpr uint32_t kMaxPcrIndex = 31;            // parse
inline constexpr uint32_t kMaxReplayPcrIndex = 23;      // replay

// Event types (PC Client PFP, section 10.4.1).
inline constexpr uint32_t kEvPrebootCert = 0x00000000;
inline constexpr uint32_t kEvPostCode = 0x00000001;
inline constexpr uint32_t kEvUnused = 0x00000002;
inline constexpr uint32_t kEvNoAction = 0x00000003;
inline constexpr uint32_t kEvSeparator = 0x00000004;
inline constexpr uint32_t kEvAction = 0x00000005;
inline constexpr uint32_t kEvEventTag = 0x00000006;
inline constexpr uint32_t kEvSCrtmContents = 0x00000007;
inline constexpr uint32_t kEvSCrtmVersion = 0x00000008;
inline constexpr uint32_t kEvCpuMicrocode = 0x00000009;
inline constexpr uint32_t kEvPlatformConfigFlags = 0x0000000A;
inline constexpr uint32_t kEvTableOfDevices = 0x0000000B;
inline constexpr uint32_t kEvCompactHash = 0x0000000C;
inline constexpr uint32_t kEvIpl = 0x0000000D;
inline constexpr uint32_t kEvIplPartitionData = 0x0000000E;
inline constexpr uint32_t kEvNonhostCode = 0x0000000F;
inline constexpr uint32_t kEvNonhostConfig = 0x00000010;
inline constexpr uint32_t kEvNonhostInfo = 0x00000011;
inline constexpr uint32_t kEvOmitBootDeviceEvents = 0x00000012;
inline constexpr uint32_t kEvEfiEventBase = 0x80000000;
inline constexpr uint32_t kEvEfiVariableDriverConfig = 0x80000001;
inline constexpr uint32_t kEvEfiVariableBoot = 0x80000002;
inline constexpr uint32_t kEvEfiBootServicesApplication = 0x80000003;
inline constexpr uint32_t kEvEfiBootServicesDriver = 0x80000004;
inline constexpr uint32_t kEvEfiRuntimeServicesDriver = 0x80000005;
inline constexpr uint32_t kEvEfiGptEvent = 0x80000006;
inline constexpr uint32_t kEvEfiAction = 0x80000007;
inline constexpr uint32_t kEvEfiPlatformFirmwareBlob = 0x80000008;
inline constexpr uint32_t kEvEfiHandoffTables = 0x80000009;
inline constexpr uint32_t kEvEfiPlatformFirmwareBlob2 = 0x8000000A;
inline constexpr uint32_t kEvEfiHandoffTables2 = 0x8000000B;
inline constexpr uint32_t kEvEfiVariableBoot2 = 0x8000000C;
inline constexpr uint32_t kEvEfiHcrtmEvent = 0x80000010;
inline constexpr uint32_t kEvEfiVariableAuthority = 0x800000E0;
inline constexpr uint32_t kEvEfiSpdmFirmwareBlob = 0x800000E1;
inline constexpr uint32_t kEvEfiSpdmFirmwareConfig = 0x800000E2;

// "EV_SEPARATOR", ...; "0x%08x" for a type this table does not know.
std::string EventTypeName(uint32_t type);

// One event as logged. Every event type passes through, EV_NO_ACTION included.
struct Event {
  uint32_t index = 0;   // position in the log; the Spec ID event is 0
  uint32_t pcr = 0;     // pcrIndex, <= kMaxPcrIndex unless EV_NO_ACTION
  uint32_t type = 0;    // eventType
  // Hash algorithm -> digest. A SHA-1 log (and the Spec ID event) carries
  // exactly {kAlgSha1: 20 bytes}; a TCG_PCR_EVENT2 carries at most one digest
  // per declared bank, each of the size the Spec ID event declared.
  std::map<uint16_t, Bytes> digests;
  Bytes data;           // the event field, eventSize bytes
  size_t offset = 0;    // byte offset of the event's first byte in the log
};

// One entry of TCG_EfiSpecIDEvent.digestSizes.
struct SpecIdAlgorithm {
  uint16_t alg = kAlgNull;
  uint16_t digest_size = 0;
};

// TCG_EfiSpecIDEvent, the data of a crypto-agile log's first event. Only the
// signature, the algorithm list and the exact length are checked; version
// fields are reported, not judged.
struct TcgEfiSpecIdEvent {
  uint32_t platform_class = 0;
  uint8_t spec_version_minor = 0;
  uint8_t spec_version_major = 0;
  uint8_t spec_errata = 0;
  uint8_t uintn_size = 0;
  std::vector<SpecIdAlgorithm> algorithms;  // in log order, no duplicates
  Bytes vendor_info;
};

struct EventLog {
  bool crypto_agile = false;
  // Banks the log describes, in log order: the Spec ID event's algorithms for
  // a crypto-agile log, {kAlgSha1} for a SHA-1 log.
  std::vector<uint16_t> banks;
  TcgEfiSpecIdEvent spec_id;  // crypto-agile logs only; empty otherwise
  std::vector<Event> events;  // every event, in log order, Spec ID event first
};

// Parses a whole binary event log. A log is crypto-agile when its first event
// is an EV_NO_ACTION event on PCR 0 whose data begins "Spec ID Event03";
// otherwise it is read as a SHA-1 log (whose first event may be any event,
// e.g. a StartupLocality EV_NO_ACTION event). The log must end exactly at an
// event boundary. No allocation is sized from the input before its size is
// checked against the limits above and against the bytes that remain.
// On failure, kInvalidArgument with one of these reasons, and a message that
// names the event's index and byte offset:
//   eventlog_empty              no bytes at all
//   eventlog_too_large          more than kMaxEventLogSize bytes
//   eventlog_too_many_events    more than kMaxEvents events
//   eventlog_truncated          the log ends inside an event
//   eventlog_event_too_large    an eventSize above kMaxEventDataSize
//   eventlog_bad_spec_id        a malformed "Spec ID Event03" event: wrong PCR,
//                               non-zero digest, no/too many/duplicate
//                               algorithms, a digest size that is zero, above
//                               kMaxDigestSize or not the algorithm's size, or
//                               a length that disagrees with its contents
//   eventlog_bad_digest_count   a TPML_DIGEST_VALUES count above the number of
//                               declared banks
//   eventlog_unknown_digest_alg a digest of an algorithm the Spec ID event did
//                               not declare
//   eventlog_duplicate_digest_alg  two digests of one algorithm in one event
//   eventlog_bad_pcr_index      a pcrIndex above kMaxPcrIndex on an event
//                               other than EV_NO_ACTION
// The result owns copies of everything; `log` may be freed afterwards.
Result<EventLog> ParseEventLog(std::span<const uint8_t> log);

// Replays the log: per bank, every PCR an event extends starts at its initial
// value and is extended with that event's digest, PCR := H(PCR || digest), in
// log order. EV_NO_ACTION events extend nothing.
//
// Initial values: zero, except PCR 0 when the log sets a startup locality
// (TPM 2.0 Part 1, "Startup locality"; PC Client PFP 10.4.5.3): an
// EV_NO_ACTION event on PCR 0 whose data is "StartupLocality\0" followed by
// one locality byte makes PCR 0 start as zeros with that byte last; an
// EV_EFI_HCRTM_EVENT on PCR 0 means the H-CRTM sequence ran at locality 4.
// Either must come before anything extends PCR 0 and at most one locality may
// be set; otherwise kInvalidArgument "eventlog_bad_startup_locality", because
// the value PCR 0 started from would be ambiguous.
//
// The result has one entry per declared bank that can be replayed, holding
// exactly the PCRs some event extended, plus PCR 0 whenever the log set a
// locality. A bank is left out when it is not sha1/sha256/sha384/sha512 (we
// cannot compute its hash) or when some extending event carries no digest
// for it: such a bank's PCR values are unknown, and ComparePcrs then refuses
// any quote over it.
// Fails with kInvalidArgument "eventlog_bad_pcr_index" for an extending event
// on a PCR above kMaxReplayPcrIndex. Throws only on OpenSSL resource failure.
Result<PcrValues> Replay(const EventLog& log);

// The value a PCR holds after TPM2_Startup(CLEAR) on a PC Client platform,
// before anything extends it: all ones for PCRs 17-22 (the dynamic-root PCRs),
// zeros otherwise, with `locality` as the last byte of PCR 0. `size` bytes.
Bytes InitialPcrValue(uint32_t pcr, size_t size, uint8_t locality = 0);

// Checks quoted PCR values against replayed ones. Only PCRs present in
// `quoted` are compared, banks in ascending algorithm order and PCRs in
// ascending index order. A quoted PCR absent from its replayed bank was never
// extended by the log, so it must still hold InitialPcrValue(pcr,
// DigestSize(bank)) — anything else was extended by something the log does not
// record. A quoted bank absent from `replayed` cannot be vouched for at all.
// On failure, kVerificationFailed with reason "eventlog_bank_missing" or
// "eventlog_pcr_mismatch", the message naming the first bank (and PCR) that
// differs but neither value.
Status ComparePcrs(const PcrValues& replayed, const PcrValues& quoted);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_EVENTLOG_H_
