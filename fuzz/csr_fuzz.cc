// libFuzzer target: PEM certificate requests (the kubelet CSRs a machine
// submits), parsed and self-signature-checked with core/csr.h's ParseCsr,
// then judged by every CSR rule for both kinds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/csr.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::core::csr;  // NOLINT
  const std::string_view pem(reinterpret_cast<const char*>(data), size);
  rackgate::Result<Csr> csr = ParseCsr(pem);
  if (!csr.ok()) return 0;
  MachineFacts facts;
  facts.hostname = "node-1";
  facts.dns_names = {"node-1.lab"};
  facts.ip_addresses = {"10.0.0.1", "fd00::1"};
  facts.state = "attested";
  facts.last_attested_at = 1000;
  const RuleOptions options;
  const std::vector<std::string> client = {std::string(kUsageDigitalSignature),
                                           std::string(kUsageClientAuth)};
  const std::vector<std::string> serving = {std::string(kUsageDigitalSignature),
                                            std::string(kUsageServerAuth)};
  (void)Check(*csr, Kind::kClient, client, facts, options, false, 1100);
  (void)Check(*csr, Kind::kServing, serving, facts, options, true, 1100);
  return 0;
}
