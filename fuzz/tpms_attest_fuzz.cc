// libFuzzer target: TPMS_ATTEST parsing (the `quote` of an evidence request
// and the certify info of a TPM-resident CSR key), then the PCR digest the
// verifier computes over the selection the structure names.
#include <cstddef>
#include <cstdint>
#include <span>

#include "attest/quote.h"
#include "attest/tpm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::attest;  // NOLINT
  rackgate::Result<TpmsAttest> a = ParseTpmsAttest(std::span<const uint8_t>(data, size));
  if (!a.ok()) return 0;
  // The verifier hashes the quoted PCRs in the order the quote selects them;
  // here every selected PCR holds zeros of its bank's size.
  PcrValues pcrs;
  for (const PcrSelection& sel : a->pcr_select) {
    for (uint32_t i : sel.pcrs) pcrs[sel.hash_alg][i] = Bytes(DigestSize(sel.hash_alg), 0);
  }
  (void)ComputePcrDigest(kAlgSha256, a->pcr_select, pcrs);
  (void)FormatPcrSelectionList(a->pcr_select);
  return 0;
}
