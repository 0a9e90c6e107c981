// Admission control: a bound on attestation sessions open at once.
#include "core/admission.h"

namespace rackgate::core {

SessionGate::Verdict SessionGate::Admit(const std::string& client, int64_t now, int64_t expires_at,
                                        uint64_t* ticket) {
  std::lock_guard<std::mutex> l(mu_);
  if (static_cast<int>(places_.size()) >= max_total_) ReclaimExpired(now);
  if (static_cast<int>(places_.size()) >= max_total_) return Verdict::kFull;
  auto it = per_client_.find(client);
  if (it != per_client_.end() && it->second >= max_per_client_) {
    ReclaimExpired(now);
    it = per_client_.find(client);
    if (it != per_client_.end() && it->second >= max_per_client_) return Verdict::kClientFull;
  }
  *ticket = next_ticket_++;
  places_.emplace(*ticket, Place{client, expires_at});
  ++per_client_[client];
  return Verdict::kAdmitted;
}

void SessionGate::Bind(uint64_t ticket, const std::string& session_id, std::shared_ptr<const SessionAk> ak) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = places_.find(ticket);
  if (it == places_.end()) return;
  it->second.ak = std::move(ak);
  by_session_[session_id] = ticket;
}

void SessionGate::Release(uint64_t ticket) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = places_.find(ticket);
  if (it != places_.end()) Drop(it);
}

std::shared_ptr<const SessionAk> SessionGate::Finish(const std::string& session_id) {
  std::shared_ptr<const SessionAk> ak;
  std::lock_guard<std::mutex> l(mu_);
  auto s = by_session_.find(session_id);
  if (s == by_session_.end()) return ak;
  auto it = places_.find(s->second);
  by_session_.erase(s);
  if (it != places_.end()) {
    ak = std::move(it->second.ak);
    Drop(it);
  }
  return ak;
}

int SessionGate::open() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int>(places_.size());
}

void SessionGate::Drop(std::unordered_map<uint64_t, Place>::iterator it) {
  auto c = per_client_.find(it->second.client);
  if (c != per_client_.end() && --c->second <= 0) per_client_.erase(c);
  places_.erase(it);
}

// Linear, but only when a bound is reached, and the bound keeps it short.
void SessionGate::ReclaimExpired(int64_t now) {
  for (auto it = places_.begin(); it != places_.end();) {
    if (it->second.expires_at > now) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    Drop(it);
    it = next;
  }
  for (auto s = by_session_.begin(); s != by_session_.end();) {
    s = places_.count(s->second) == 0 ? by_session_.erase(s) : std::next(s);
  }
}

std::string ClientAddress(const std::string& peer) {
  if (!peer.empty() && peer.front() == '[') {
    const size_t end = peer.find(']');
    return end == std::string::npos ? peer : peer.substr(1, end - 1);
  }
  const size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

}  // namespace rackgate::core
