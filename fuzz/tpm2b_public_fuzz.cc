// libFuzzer target: TPM2B_PUBLIC parsing (the EK and AK public areas of a
// challenge), then what the appliance does with a parsed one: its name, the AK
// policy, a verification key and MakeCredential. Round trip: the size prefix
// and the kept TPMT_PUBLIC bytes must give back the input exactly.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "attest/credential.h"
#include "attest/quote.h"
#include "attest/tpm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::attest;  // NOLINT
  const std::span<const uint8_t> in(data, size);
  rackgate::Result<TpmPublic> pub = ParseTpm2bPublic(in);
  if (!pub.ok()) return 0;

  // The parser refuses trailing bytes and a disagreeing size prefix, so the
  // input is exactly u16be(size) || marshalled.
  const Bytes& m = pub->marshalled;
  if (size != m.size() + 2 || data[0] != (m.size() >> 8) || data[1] != (m.size() & 0xff) ||
      std::memcmp(data + 2, m.data(), m.size()) != 0) {
    std::abort();
  }
  // Parsing the same bytes again gives the same object name.
  rackgate::Result<TpmPublic> again = ParseTpm2bPublic(in);
  if (!again.ok() || ObjectName(*again) != ObjectName(*pub)) std::abort();

  const Bytes name = ObjectName(*pub);
  (void)CheckAkPolicy(*pub);
  rackgate::Result<VerifyKey> key = VerifyKey::FromTpmPublic(*pub);
  (void)key;
  // The challenge wraps a secret for this EK and an AK's name (here its own).
  const uint8_t secret[32] = {1, 2, 3};
  (void)MakeCredential(*pub, name, secret);
  return 0;
}
