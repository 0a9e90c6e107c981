// PCR value files as tpm2-tools writes them (`tpm2_quote -o`, `tpm2_pcrread -o`),
// read into PcrValues. Both formats are documented in docs/formats.md.
#ifndef RACKGATE_ATTEST_PCR_FILE_H_
#define RACKGATE_ATTEST_PCR_FILE_H_

#include <span>
#include <vector>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// Largest PCR file we read: the serialized format's maximum is well below it.
inline constexpr size_t kMaxPcrFileSize = 64 * 1024;

// Reads a PCR values file in either format tpm2-tools writes:
//  - "serialized" (the default): a host-endian (x86: little-endian) dump of
//    TPML_PCR_SELECTION, a u32 count, then that many TPML_DIGEST, the digests
//    in selection order. The file's own selection names the PCRs.
//  - "values" (`-F values`): the raw digests concatenated in the order of
//    `selection` (the quote's), which names the PCRs.
// The serialized form is recognised by its exact size; anything else must be
// exactly as long as `selection`'s digests. kInvalidArgument
// ("pcr_file_malformed") otherwise.
Result<PcrValues> ParseTpm2ToolsPcrFile(std::span<const uint8_t> data,
                                        const std::vector<PcrSelection>& selection);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_PCR_FILE_H_
