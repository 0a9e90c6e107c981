// libFuzzer target: what a Kubernetes API server sends approver mode
// (kube/, docs/kubernetes-client.md): one CertificateSigningRequest object,
// a list page, and a watch stream fed in two chunks split by the first
// byte. Invariants: a CSR that parses has a name that may go into a URL
// path and a request within its bound; the approval body of a parsed CSR
// is built without fault; a stream never holds more than its event bound.
#define RACKGATE_KUBE_INTERNAL
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kube/csr.h"
#include "kube/csr_json.h"
#include "kube/watch_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::kube;  // NOLINT
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rackgate::Result<Csr> csr = ParseCsrJson(text);
  if (csr.ok()) {
    if (!IsValidCsrName(csr->name) || csr->request_pem.size() > kMaxCsrRequestBytes) std::abort();
    (void)ApprovalBody(*csr, true, "RackgateAttestedJoin", "fuzz", 0);
  }
  (void)ParseCsrListJson(text);
  (void)ParseWatchEvent(text);
  constexpr size_t kMaxEvent = 64 * 1024;
  WatchStream stream(kMaxEvent, [](const WatchEvent&) { return true; });
  const size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  if (stream.Feed(text.substr(0, cut))) stream.Feed(text.substr(cut));
  if (stream.pending() > kMaxEvent) std::abort();
  return 0;
}
