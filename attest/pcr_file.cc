// tpm2-tools PCR value files.
#include "attest/pcr_file.h"

#include <tss2/tss2_tpm2_types.h>

#include <cstddef>

#include "base/byte_reader.h"

namespace rackgate::attest {

namespace {

// The serialized form is a dump of tss2's C structures as laid out on x86-64;
// these asserts pin the layout the reader below walks field by field.
static_assert(sizeof(TPMS_PCR_SELECTION) == 8);
static_assert(sizeof(TPML_PCR_SELECTION) == 4 + TPM2_NUM_PCR_BANKS * 8);
static_assert(sizeof(TPM2B_DIGEST) == 2 + 64);
static_assert(sizeof(TPML_DIGEST) == 4 + 8 * sizeof(TPM2B_DIGEST));
constexpr size_t kSelectionDump = sizeof(TPML_PCR_SELECTION);
constexpr size_t kDigestListDump = sizeof(TPML_DIGEST);
// tpm2-tools reads at most 8 digests per TPML_DIGEST; 16 banks x 24 PCRs fit in 48.
constexpr uint32_t kMaxDigestLists = 48;

Status Bad(const std::string& why) {
  return Status::InvalidArgument("pcr_file_malformed", "PCR file: " + why);
}

size_t TotalDigestBytes(const std::vector<PcrSelection>& selection) {
  size_t n = 0;
  for (const auto& s : selection) n += DigestSize(s.hash_alg) * s.pcrs.size();
  return n;
}

bool LooksSerialized(std::span<const uint8_t> data) {
  if (data.size() < kSelectionDump + 4) return false;
  ByteReader r(data.subspan(kSelectionDump));
  uint32_t count = 0;
  if (!r.ReadU32LE(&count) || count > kMaxDigestLists) return false;
  return r.remaining() == static_cast<size_t>(count) * kDigestListDump;
}

Result<PcrValues> AssignInOrder(const std::vector<PcrSelection>& selection,
                                const std::vector<std::span<const uint8_t>>& digests) {
  PcrValues out;
  size_t next = 0;
  for (const PcrSelection& s : selection) {
    for (uint32_t pcr : s.pcrs) {
      if (next >= digests.size()) return Bad("fewer values than selected PCRs");
      const auto& d = digests[next++];
      if (d.size() != DigestSize(s.hash_alg)) {
        return Bad("value for " + HashAlgName(s.hash_alg) + ":" + std::to_string(pcr) +
                   " has " + std::to_string(d.size()) + " bytes");
      }
      out[s.hash_alg][pcr] = Bytes(d.begin(), d.end());
    }
  }
  if (next != digests.size()) return Bad("more values than selected PCRs");
  return out;
}

Result<PcrValues> ParseSerialized(std::span<const uint8_t> data) {
  ByteReader r(data);
  ByteReader sel_dump;
  if (!r.ReadBytes(kSelectionDump, &sel_dump)) return Bad("short selection");
  uint32_t banks = 0;
  if (!sel_dump.ReadU32LE(&banks) || banks > TPM2_NUM_PCR_BANKS) return Bad("bad bank count");
  std::vector<PcrSelection> selection;
  for (uint32_t i = 0; i < TPM2_NUM_PCR_BANKS; ++i) {
    uint16_t hash = 0;
    uint8_t size_of_select = 0, pad = 0;
    std::span<const uint8_t> bits;
    if (!sel_dump.ReadU16LE(&hash) || !sel_dump.ReadU8(&size_of_select) ||
        !sel_dump.ReadSpan(TPM2_PCR_SELECT_MAX, &bits) || !sel_dump.ReadU8(&pad)) {
      return Bad("short selection entry");
    }
    if (i >= banks) continue;
    if (DigestSize(hash) == 0) return Bad("unknown bank " + HashAlgName(hash));
    if (size_of_select > TPM2_PCR_SELECT_MAX) return Bad("bad sizeofSelect");
    PcrSelection s;
    s.hash_alg = hash;
    for (uint32_t byte = 0; byte < size_of_select; ++byte) {
      for (uint32_t bit = 0; bit < 8; ++bit) {
        if (bits[byte] & (1u << bit)) s.pcrs.push_back(byte * 8 + bit);
      }
    }
    selection.push_back(std::move(s));
  }
  uint32_t lists = 0;
  if (!r.ReadU32LE(&lists) || lists > kMaxDigestLists) return Bad("bad digest list count");
  std::vector<std::span<const uint8_t>> digests;
  for (uint32_t l = 0; l < lists; ++l) {
    ByteReader list;
    uint32_t count = 0;
    if (!r.ReadBytes(kDigestListDump, &list) || !list.ReadU32LE(&count) || count > 8) {
      return Bad("bad digest list");
    }
    for (uint32_t d = 0; d < 8; ++d) {
      uint16_t size = 0;
      std::span<const uint8_t> buf;
      if (!list.ReadU16LE(&size) || !list.ReadSpan(64, &buf)) return Bad("short digest");
      if (d >= count) continue;
      if (size > 64) return Bad("digest size above 64");
      digests.push_back(buf.first(size));
    }
  }
  if (!r.empty()) return Bad("trailing bytes");
  return AssignInOrder(selection, digests);
}

}  // namespace

Result<PcrValues> ParseTpm2ToolsPcrFile(std::span<const uint8_t> data,
                                        const std::vector<PcrSelection>& selection) {
  if (data.size() > kMaxPcrFileSize) return Bad("larger than " + std::to_string(kMaxPcrFileSize));
  const size_t values_size = TotalDigestBytes(selection);
  if (data.size() == values_size && values_size > 0) {
    std::vector<std::span<const uint8_t>> digests;
    ByteReader r(data);
    for (const PcrSelection& s : selection) {
      for (size_t i = 0; i < s.pcrs.size(); ++i) {
        std::span<const uint8_t> d;
        if (!r.ReadSpan(DigestSize(s.hash_alg), &d)) return Bad("short values");
        digests.push_back(d);
      }
    }
    return AssignInOrder(selection, digests);
  }
  if (LooksSerialized(data)) return ParseSerialized(data);
  return Bad(std::to_string(data.size()) + " bytes is neither the serialized form nor " +
             std::to_string(values_size) + " bytes of values for the quote's selection");
}

}  // namespace rackgate::attest
