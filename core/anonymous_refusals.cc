// Anonymous refusals: a bounded LRU tally per machine, and its summaries.
#include "core/anonymous_refusals.h"

#include <algorithm>
#include <utility>

namespace rackgate::core {

AnonymousRefusalTable::AnonymousRefusalTable(int64_t interval_seconds, size_t capacity)
    : interval_(std::max<int64_t>(1, interval_seconds)), capacity_(std::max<size_t>(1, capacity)) {}

AnonymousSummary AnonymousRefusalTable::TakeLocked(Entry* e, int64_t now) {
  AnonymousSummary out = std::move(e->unreported);
  e->unreported = AnonymousSummary{};
  e->last_summary_at = now;
  return out;
}

std::optional<AnonymousSummary> AnonymousRefusalTable::Record(int64_t machine_id, const std::string& hostname,
                                                              const std::string& reason, const std::string& address,
                                                              int64_t now) {
  std::lock_guard lock(mu_);
  ++total_;
  auto it = index_.find(machine_id);
  if (it == index_.end()) {
    if (entries_.size() >= capacity_) {
      index_.erase(entries_.back().seen.machine_id);
      entries_.pop_back();
    }
    Entry fresh;
    fresh.seen.machine_id = machine_id;
    fresh.seen.first_seen = now;
    entries_.push_front(std::move(fresh));
    it = index_.emplace(machine_id, entries_.begin()).first;
  } else {
    entries_.splice(entries_.begin(), entries_, it->second);
  }
  Entry& e = *it->second;
  e.seen.hostname = hostname;
  e.seen.last_seen = now;
  ++e.seen.count;
  e.seen.address = address;
  e.seen.reason = reason;

  AnonymousSummary& u = e.unreported;
  if (u.count == 0) {
    u.machine_id = machine_id;
    u.first_at = now;
  }
  u.hostname = hostname;
  ++u.count;
  ++u.reasons[reason];
  u.last_at = now;
  if (u.addresses.size() < kMaxAddresses && std::ranges::find(u.addresses, address) == u.addresses.end()) {
    u.addresses.push_back(address);
  }
  // SECURITY: one summary per machine per interval, so a flood of refusals
  // costs the store (and the webhooks) one row per machine per interval.
  if (e.last_summary_at == 0 || now - e.last_summary_at >= interval_) return TakeLocked(&e, now);
  return std::nullopt;
}

std::vector<AnonymousSummary> AnonymousRefusalTable::TakeDue(int64_t now) {
  std::lock_guard lock(mu_);
  std::vector<AnonymousSummary> out;
  for (Entry& e : entries_) {
    if (e.unreported.count > 0 && now - e.last_summary_at >= interval_) out.push_back(TakeLocked(&e, now));
  }
  return out;
}

std::vector<AnonymousRefusals> AnonymousRefusalTable::SeenSince(int64_t since) const {
  std::lock_guard lock(mu_);
  std::vector<AnonymousRefusals> out;
  for (const Entry& e : entries_) {
    if (e.seen.last_seen >= since) out.push_back(e.seen);
  }
  return out;
}

uint64_t AnonymousRefusalTable::total() const {
  std::lock_guard lock(mu_);
  return total_;
}

}  // namespace rackgate::core
