// libFuzzer target: the credential file format (docs/formats.md; what
// `tpm2_makecredential -o` writes and the agent reads from a challenge).
// Round trip: a file that decodes encodes back to exactly the same bytes.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <span>

#include "attest/credential.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::attest;  // NOLINT
  const std::span<const uint8_t> in(data, size);
  rackgate::Result<Credential> cred = DecodeCredentialFile(in);
  if (!cred.ok()) return 0;
  const Bytes encoded = EncodeCredentialFile(*cred);
  if (encoded.size() != size || !std::equal(encoded.begin(), encoded.end(), data)) std::abort();
  rackgate::Result<Credential> again = DecodeCredentialFile(encoded);
  if (!again.ok() || again->id_object != cred->id_object ||
      again->encrypted_secret != cred->encrypted_secret) {
    std::abort();
  }
  return 0;
}
