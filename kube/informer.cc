// The list+watch loop.
#include "kube/informer.h"

#include <algorithm>
#include <exception>
#include <random>

#include "base/log.h"

namespace rackgate::kube {

namespace {

// A server whose continue tokens never end is not followed forever.
constexpr int kMaxListPages = 10000;

std::shared_ptr<spdlog::logger> Log() {
  static const std::shared_ptr<spdlog::logger> log = Logger("kube");
  return log;
}

double UnitRandom() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

std::chrono::milliseconds InformerBackoff(int attempt, double unit_random, std::chrono::milliseconds base,
                                          std::chrono::milliseconds cap) {
  std::chrono::milliseconds d = base;
  for (int i = 0; i < attempt && d < cap; ++i) d *= 2;
  d = std::min(d, cap);
  const double r = std::clamp(unit_random, 0.0, 1.0);
  return std::chrono::milliseconds(d.count() / 2 + static_cast<int64_t>(r * static_cast<double>(d.count() / 2)));
}

CsrInformer::CsrInformer(CsrSource* source, Handler handler, InformerOptions options)
    : source_(source), handler_(std::move(handler)), options_(std::move(options)) {}

void CsrInformer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stopped_.notify_all();
}

bool CsrInformer::Wait(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock(mu_);
  return !stopped_.wait_for(lock, delay, [this] { return stop_.load(); });
}

void CsrInformer::SetResourceVersion(std::string rv) {
  std::lock_guard<std::mutex> lock(mu_);
  resource_version_ = std::move(rv);
}

std::string CsrInformer::ResourceVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

InformerCounters CsrInformer::Counters() const {
  InformerCounters c;
  c.lists = counters_.lists;
  c.list_pages = counters_.list_pages;
  c.watches = counters_.watches;
  c.reconnects = counters_.reconnects;
  c.events = counters_.events;
  c.gone = counters_.gone;
  c.errors = counters_.errors;
  c.skipped = counters_.skipped;
  c.handled = counters_.handled;
  return c;
}

void CsrInformer::Deliver(const Csr& csr) {
  ++counters_.handled;
  try {
    handler_(csr);
  } catch (const std::exception& e) {
    ++counters_.errors;
    Log()->error("the CSR handler failed on {}: {}", csr.name, e.what());
  } catch (...) {
    ++counters_.errors;
    Log()->error("the CSR handler failed on {}", csr.name);
  }
}

Status CsrInformer::Relist() {
  std::string token;
  std::string list_rv;
  for (int page = 0; page < kMaxListPages; ++page) {
    Result<CsrList> list = source_->ListCsrs(token, options_.page_limit);
    if (!list.ok()) return list.status();
    ++counters_.list_pages;
    // Every page of one list is of the first page's snapshot.
    if (page == 0) list_rv = list->resource_version;
    for (const std::string& why : list->skipped) {
      ++counters_.skipped;
      Log()->warn("skipped a CSR that fails the checks: {}", why);
    }
    for (const Csr& csr : list->items) {
      if (stop_) return Status::Ok();
      Deliver(csr);
    }
    token = std::move(list->continue_token);
    if (token.empty()) {
      ++counters_.lists;
      SetResourceVersion(list_rv);
      Log()->info("listed CSRs at resourceVersion {} ({} pages)", list_rv, page + 1);
      return Status::Ok();
    }
    if (stop_) return Status::Ok();
  }
  return Status::Corruption("kube_response_invalid",
                            "the CSR list went on for more than " + std::to_string(kMaxListPages) + " pages");
}

bool CsrInformer::OnEvent(const WatchEvent& event) {
  ++counters_.events;
  if (!event.resource_version.empty()) SetResourceVersion(event.resource_version);
  switch (event.type) {
    case WatchEvent::Type::kAdded:
    case WatchEvent::Type::kModified:
      if (event.object_status.ok()) {
        Deliver(event.object);
      } else {
        ++counters_.skipped;
        Log()->warn("skipped a CSR event that fails the checks: {}", event.object_status.ToString());
      }
      break;
    case WatchEvent::Type::kDeleted:
    case WatchEvent::Type::kBookmark:
    case WatchEvent::Type::kError:  // WatchStream ends the watch on it; never delivered
      break;
  }
  return !stop_;
}

Status CsrInformer::WatchOnce(bool* quick_and_empty) {
  ++counters_.watches;
  const uint64_t events_before = counters_.events;
  const auto start = std::chrono::steady_clock::now();
  int timeout = options_.watch_timeout_seconds;
  if (options_.resync.count() > 0) {
    timeout = std::clamp<int>(static_cast<int>(options_.resync.count() / 1000), 1, timeout);
  }
  Status s = source_->Watch(ResourceVersion(), timeout,
                            [this](const WatchEvent& ev) { return OnEvent(ev); }, &stop_);
  *quick_and_empty = counters_.events == events_before &&
                     std::chrono::steady_clock::now() - start < options_.min_watch;
  return s;
}

void CsrInformer::Run() {
  bool need_list = true;
  int failures = 0;
  auto listed_at = std::chrono::steady_clock::now();
  Log()->info("watching CertificateSigningRequests");
  while (!stop_) {
    bool quick_and_empty = false;
    const bool resync_due =
        options_.resync.count() > 0 && std::chrono::steady_clock::now() - listed_at >= options_.resync;
    const bool list_now = need_list || resync_due;
    Status s = list_now ? Relist() : WatchOnce(&quick_and_empty);
    // The interval counts from the end of a list (a long one is not
    // followed at once by the next).
    if (list_now) listed_at = std::chrono::steady_clock::now();
    if (stop_) break;
    if (s.ok()) {
      need_list = false;
      if (!quick_and_empty) {
        failures = 0;
        continue;
      }
      Log()->warn("the API server ended a watch at once without events; waiting before the next");
    } else if (s.reason() == "kube_gone") {
      ++counters_.gone;
      Log()->info("resourceVersion {} expired; listing again", ResourceVersion());
      need_list = true;
      // Expired again at once: a server that does that gets no busy loop.
      if (!quick_and_empty) continue;
    } else {
      ++counters_.errors;
      Log()->warn("{} failed: {}", need_list ? "listing CSRs" : "watching CSRs", s.ToString());
    }
    ++counters_.reconnects;
    const std::chrono::milliseconds delay =
        InformerBackoff(failures++, UnitRandom(), options_.backoff_base, options_.backoff_cap);
    if (!Wait(delay)) break;
  }
  Log()->info("stopped watching CertificateSigningRequests");
}

}  // namespace rackgate::kube
