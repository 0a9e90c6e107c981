// The list+watch loop over CertificateSigningRequests: list (paged), watch
// from the list's resourceVersion, list again when the server says it is too
// old, reconnect with backoff on errors. Every CSR seen is handed to one
// handler, which decides (the decision is core/'s, not this module's).
#ifndef RACKGATE_KUBE_INFORMER_H_
#define RACKGATE_KUBE_INFORMER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "base/status.h"
#include "kube/client.h"
#include "kube/csr.h"

namespace rackgate::kube {

struct InformerOptions {
  int page_limit = 100;            // CSRs per list page (each page handled, then dropped)
  int watch_timeout_seconds = 300;  // the server ends each watch after this; we watch again
  std::chrono::milliseconds backoff_base{1000};
  std::chrono::milliseconds backoff_cap{30000};
  // A watch that ends sooner than this without any event counts as a failed
  // one (backoff), so a server that ends every watch at once is no busy loop.
  std::chrono::milliseconds min_watch{1000};
  // List everything again this often (0: never), after the watch that is
  // open then ends (each watch lasts at most this long): a handler that
  // could not act on a CSR, or whose answer changes without an event (an
  // operator's decision elsewhere), sees every CSR again.
  std::chrono::milliseconds resync{0};
};

// A snapshot for metrics; every counter only grows.
struct InformerCounters {
  uint64_t lists = 0;        // complete relists
  uint64_t list_pages = 0;
  uint64_t watches = 0;      // watch calls started
  uint64_t reconnects = 0;   // waits before trying again (errors and empty watches)
  uint64_t events = 0;       // watch events received (all types)
  uint64_t gone = 0;         // kube_gone: relisted because the resourceVersion expired
  uint64_t errors = 0;       // failed lists and watches, handler exceptions
  uint64_t skipped = 0;      // objects refused by the CSR checks (csr.h)
  uint64_t handled = 0;      // handler calls
};

// The wait before retry `attempt` (0 first): d = min(cap, base * 2^attempt),
// then "equal jitter": d/2 + unit_random * d/2, in [d/2, d]. Pure.
std::chrono::milliseconds InformerBackoff(int attempt, double unit_random, std::chrono::milliseconds base,
                                          std::chrono::milliseconds cap);

class CsrInformer {
 public:
  // Called for each CSR listed and each ADDED or MODIFIED one, on Run()'s
  // thread, one at a time; the same CSR may come again (relists, updates):
  // the handler must be idempotent. An exception from it is logged and
  // counted; the loop goes on.
  using Handler = std::function<void(const Csr&)>;

  // `source` is BORROWED and must outlive the informer.
  CsrInformer(CsrSource* source, Handler handler, InformerOptions options = {});
  CsrInformer(const CsrInformer&) = delete;
  CsrInformer& operator=(const CsrInformer&) = delete;

  // Lists and watches until Stop(); returns within about a second of it.
  // Errors are not returned: they are logged (logger "kube"), counted and
  // retried with backoff. Call from one thread at a time.
  void Run();
  // From any thread, also before Run (which then returns at once).
  void Stop();

  InformerCounters Counters() const;
  // The resourceVersion the next watch starts from ("" before the first list).
  std::string ResourceVersion() const;

 private:
  Status Relist();
  Status WatchOnce(bool* quick_and_empty);
  bool OnEvent(const WatchEvent& event);
  void Deliver(const Csr& csr);
  // False when stopped while waiting.
  bool Wait(std::chrono::milliseconds delay);
  void SetResourceVersion(std::string rv);

  CsrSource* source_;
  Handler handler_;
  InformerOptions options_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;  // guards resource_version_ and the stop wait
  std::condition_variable stopped_;
  std::string resource_version_;
  struct AtomicCounters {
    std::atomic<uint64_t> lists{0}, list_pages{0}, watches{0}, reconnects{0}, events{0}, gone{0}, errors{0},
        skipped{0}, handled{0};
  } counters_;
};

}  // namespace rackgate::kube

#endif  // RACKGATE_KUBE_INFORMER_H_
