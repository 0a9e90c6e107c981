// The agent's rotation over its appliances.
#include "agent/failover.h"

#include <algorithm>
#include <cmath>

#include "agent/backoff.h"
#include "agent/exchange.h"
#include "attest/boot_facts.h"
#include "base/text.h"

namespace rackgate::agent {

bool MovesOn(const Failure& f) {
  if (f.kind == Failure::Kind::kWait) return true;
  return f.kind == Failure::Kind::kRetry && f.http_status != 403;
}

Failover::Failover(std::vector<Endpoint> endpoints, const Transport* transport, std::function<std::time_t()> now,
                   double unit_random, std::function<void(const std::string&)> log)
    : endpoints_(std::move(endpoints)),
      transport_(transport),
      now_(std::move(now)),
      log_(std::move(log)),
      failed_(endpoints_.size(), false) {
  const double u = std::clamp(unit_random, 0.0, std::nextafter(1.0, 0.0));
  current_ = std::min(endpoints_.size() - 1, static_cast<size_t>(u * static_cast<double>(endpoints_.size())));
}

Outcome<HttpResponse> Failover::Try(const std::string& path, const std::string* json_body,
                                    const std::vector<std::string>& headers) {
  return Classify(transport_->Send(endpoints_[current_], path, json_body, headers), now_());
}

bool Failover::Fail(const Failure& f) {
  failed_[current_] = true;
  last_ = f;
  if (f.kind == Failure::Kind::kWait) {
    const long mine = f.retry_after_seconds.value_or(kDefaultRetryAfterSeconds);
    if (!wait_ || mine < wait_->retry_after_seconds.value_or(kDefaultRetryAfterSeconds)) wait_ = f;
  }
  const Endpoint& from = endpoints_[current_];
  std::string why = text::PrintableAscii(f.reason, 64);
  if (f.http_status != 0) why = std::to_string(f.http_status) + " " + why;
  if (!f.message.empty()) why += ": " + text::PrintableAscii(f.message, 200);
  for (size_t step = 1; step < endpoints_.size(); ++step) {
    const size_t next = (current_ + step) % endpoints_.size();
    if (failed_[next]) continue;
    log_("appliance " + from.Name() + " failed (" + why + "); trying " + endpoints_[next].Name());
    current_ = next;
    return true;
  }
  return false;
}

Outcome<HttpResponse> Failover::Call(const std::string& path, const std::string* json_body,
                                     const std::vector<std::string>& headers) {
  if (!CanMoveOn()) return RoundFailure();
  // The current endpoint may have failed in this round (a failed evidence
  // moved on already); Fail() never leaves current_ on a failed one while
  // another is left, so this only skips at the start.
  if (failed_[current_]) {
    for (size_t step = 1; step < endpoints_.size() && failed_[current_]; ++step) {
      current_ = (current_ + 1) % endpoints_.size();
    }
  }
  for (;;) {
    auto r = Try(path, json_body, headers);
    if (r.ok() || !MovesOn(r.failure())) return r;
    if (!Fail(r.failure())) return RoundFailure();
  }
}

Outcome<HttpResponse> Failover::CallOnce(const std::string& path, const std::string* json_body,
                                         const std::vector<std::string>& headers) {
  if (!CanMoveOn()) return RoundFailure();
  auto r = Try(path, json_body, headers);
  if (r.ok() || !MovesOn(r.failure())) return r;
  const Failure f = r.failure();
  if (!Fail(f)) return RoundFailure();
  return f;
}

Result<HttpResponse> Failover::CallAny(const std::string& path, const std::string* json_body,
                                       const std::vector<std::string>& headers) {
  Result<HttpResponse> r = Status::IoError("appliance_unreachable", "no appliance");
  for (size_t step = 0; step < endpoints_.size(); ++step) {
    const size_t i = (current_ + step) % endpoints_.size();
    r = transport_->Send(endpoints_[i], path, json_body, headers);
    if (r.ok() && r->status < 500) return r;
  }
  return r;
}

bool Failover::CanMoveOn() const { return std::find(failed_.begin(), failed_.end(), false) != failed_.end(); }

Failure Failover::RoundFailure() const {
  if (wait_) return *wait_;
  if (last_) return *last_;
  return Failure::Retry("appliance_unreachable", "no appliance was tried");
}

void Failover::NewRound() {
  std::fill(failed_.begin(), failed_.end(), false);
  last_.reset();
  wait_.reset();
}

}  // namespace rackgate::agent
