// libFuzzer target: the JSON bodies machines POST (wire/protocol.h): the
// challenge request and the evidence request, each parsed strictly, and the
// TPM public areas a parsed challenge carries.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "attest/tpm.h"
#include "wire/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::wire;  // NOLINT
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  rackgate::Result<ChallengeRequest> challenge = ParseChallengeRequest(body);
  if (challenge.ok()) {
    (void)rackgate::attest::ParseTpm2bPublic(challenge->ek_public);
    (void)rackgate::attest::ParseTpm2bPublic(challenge->ak_public);
  }
  rackgate::Result<EvidenceRequest> evidence = ParseEvidenceRequest(body);
  (void)evidence;
  return 0;
}
