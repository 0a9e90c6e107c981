// A bounded client of the Kubernetes API for certificates.k8s.io/v1
// CertificateSigningRequests: list, get, watch and approve or deny, over
// libcurl (HTTPS, verified against the cluster's CA only). Every byte from
// the API server is untrusted: sizes are bounded, objects validated (csr.h),
// server text escaped and cut before it enters a message.
// Reason codes: docs/kubernetes-client.md.
#ifndef RACKGATE_KUBE_CLIENT_H_
#define RACKGATE_KUBE_CLIENT_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kube/approval.h"
#include "kube/csr.h"
#include "kube/kubeconfig.h"

namespace rackgate::kube {

inline constexpr std::string_view kCsrPath = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

struct ClientOptions {
  long connect_timeout_seconds = 10;
  // Every call but Watch; Watch ends by its own timeout_seconds (plus a
  // margin for a server that does not end it).
  long request_timeout_seconds = 30;
  // One answer (a list page, an object, an error); a page of 100 CSRs is
  // well under 2 MiB.
  size_t max_response_bytes = 16u << 20;
  // One watch event (one line of the stream).
  size_t max_event_bytes = 1u << 20;
  std::string user_agent = "rackgate";
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark, kError };
  Type type = Type::kBookmark;
  // kAdded, kModified, kDeleted: the object when object_status is ok.
  Csr object;
  Status object_status;
  // Every type but kError: the resourceVersion to resume a watch from (empty
  // when the object carried none that could be read).
  std::string resource_version;
  // kError: the Status object the server sent (code, reason, printable cut
  // of its message).
  int error_code = 0;
  std::string error_reason;
  std::string error_message;
};

using WatchHandler = std::function<bool(const WatchEvent&)>;

// The calls CsrInformer needs (informer.h); Client implements them, tests
// implement a fake.
class CsrSource {
 public:
  virtual ~CsrSource() = default;
  virtual Result<CsrList> ListCsrs(std::string_view continue_token, int limit) = 0;
  virtual Status Watch(std::string_view resource_version, int timeout_seconds, const WatchHandler& on_event,
                       std::atomic<bool>* stop) = 0;
};

class Client : public CsrSource, public CsrApprovalWriter {
 public:
  // Checks the credentials' form (an https server, a CA, a token or a
  // certificate with its key): kInvalidArgument "kube_credentials_invalid".
  // Nothing is written to disk: the CA, certificate and key go to libcurl
  // as in-memory blobs. Initializes libcurl once per process.
  static Result<Client> Create(Credentials credentials, ClientOptions options = {});

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client() override;

  // GET .../certificatesigningrequests?limit=N[&continue=TOKEN]; `limit` is
  // clamped to [1, 500]. Errors: see docs/kubernetes-client.md (kube_*).
  Result<CsrList> ListCsrs(std::string_view continue_token, int limit) override;

  // GET .../certificatesigningrequests/NAME. kube_not_found when it is gone;
  // kInvalidArgument "kube_name_invalid" for a name outside [A-Za-z0-9._-].
  Result<Csr> GetCsr(std::string_view name) override;

  // POST .../certificatesigningrequests: files `request` as the
  // credentials' user (a node's bootstrap token). The object as created
  // (its generated name). kube_forbidden when the user may not create CSRs,
  // kube_invalid (422) for a request the API server refuses.
  Result<Csr> CreateCsr(const CsrRequest& request);

  // PUT .../certificatesigningrequests/NAME/approval with ApprovalBody(csr,
  // approve, reason, message, now): the body carries csr's metadata.uid and
  // resourceVersion, so the API server applies it to that object only, as
  // it was read. kube_conflict (409): the object changed since `csr` was
  // read, or the name is another object's now (WriteDecision, approval.h,
  // reads it again and tells the two apart). kube_not_found (404).
  // "kube_already_decided" (sent nothing) when `csr` is already Approved or
  // Denied; "kube_csr_invalid" (sent nothing) when `csr` has no uid or
  // resourceVersion; "kube_response_invalid" when the answer is another
  // object than `csr`.
  Status UpdateApproval(const Csr& csr, bool approve, std::string_view reason, std::string_view message) override;

  // GET ...?watch=1&allowWatchBookmarks=true&timeoutSeconds=T
  // [&resourceVersion=RV], streamed: `on_event` is called for each event as
  // it arrives, on the calling thread; it returns false to end the watch.
  // Ok when the server ended the stream (timeoutSeconds), `on_event` ended
  // it, or *stop became true (checked at least once a second; `stop` may be
  // nullptr). "kube_gone" when the server says the resourceVersion is too old
  // (an ERROR event with code 410, or a 410 answer): list again.
  // "kube_event_too_large" for an event over max_event_bytes;
  // "kube_response_invalid" for a line that is not a watch event; other
  // ERROR events map like HTTP answers of their code.
  Status Watch(std::string_view resource_version, int timeout_seconds, const WatchHandler& on_event,
               std::atomic<bool>* stop) override;

  // Thread-safe: each call opens its own connection (so `on_event` may call
  // UpdateApproval on the same client).

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_CLIENT_H_
