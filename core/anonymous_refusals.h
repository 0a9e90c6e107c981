// Anonymous refusals (docs/trust.md, "Only proof moves trust"): evidence
// refused before its sender proved it holds the machine's TPM (credential
// activation). Anyone who knows an enrolled EK (its certificate is public)
// can make one, so such a refusal never touches the machine's trust, state,
// history or events. This bounded, in-memory tally is what the operator sees
// of them (`rackgatectl status`, a metric), and it decides when a summary is
// due: at most one audit row (and so one webhook event) per machine per
// interval, however fast the refusals come.
#ifndef RACKGATE_CORE_ANONYMOUS_REFUSALS_H_
#define RACKGATE_CORE_ANONYMOUS_REFUSALS_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace rackgate::core {

// One machine's anonymous refusals as this appliance saw them.
struct AnonymousRefusals {
  int64_t machine_id = 0;
  std::string hostname;
  uint64_t count = 0;  // since this entry was made (appliance start, or eviction)
  int64_t first_seen = 0;
  int64_t last_seen = 0;
  std::string address;  // the latest sender's address, no port
  std::string reason;   // the latest refusal's reason code
};

// What a summary row reports: the refusals since the previous summary.
struct AnonymousSummary {
  int64_t machine_id = 0;
  std::string hostname;
  uint64_t count = 0;
  std::map<std::string, uint64_t> reasons;  // reason code -> count
  int64_t first_at = 0;
  int64_t last_at = 0;
  std::vector<std::string> addresses;  // distinct, at most kMaxAddresses, first seen first
};

// Thread-safe. Least recently seen machines go first when full (their
// unreported refusals with them; the metric has counted them).
class AnonymousRefusalTable {
 public:
  static constexpr int64_t kDefaultIntervalSeconds = 300;
  static constexpr size_t kDefaultCapacity = 16384;
  static constexpr size_t kMaxAddresses = 8;

  explicit AnonymousRefusalTable(int64_t interval_seconds = kDefaultIntervalSeconds,
                                 size_t capacity = kDefaultCapacity);
  AnonymousRefusalTable(const AnonymousRefusalTable&) = delete;
  AnonymousRefusalTable& operator=(const AnonymousRefusalTable&) = delete;

  // One refusal. Returns the summary to write now (this refusal and any
  // unreported before it) when no summary was due for this machine within
  // the last interval; nullopt otherwise (the refusal waits for TakeDue).
  std::optional<AnonymousSummary> Record(int64_t machine_id, const std::string& hostname, const std::string& reason,
                                         const std::string& address, int64_t now);
  // The summaries of machines with unreported refusals whose last summary
  // is an interval old or more, each marked as reported at `now`.
  std::vector<AnonymousSummary> TakeDue(int64_t now);
  // Entries last seen at or after `since`, the most recent first.
  std::vector<AnonymousRefusals> SeenSince(int64_t since) const;
  // Every anonymous refusal this table counted.
  uint64_t total() const;

 private:
  struct Entry {
    AnonymousRefusals seen;
    int64_t last_summary_at = 0;  // 0: never
    AnonymousSummary unreported;  // count 0: nothing unreported
  };
  AnonymousSummary TakeLocked(Entry* e, int64_t now);

  int64_t interval_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> entries_;  // most recently seen first; guarded by mu_
  std::unordered_map<int64_t, std::list<Entry>::iterator> index_;  // guarded by mu_
  uint64_t total_ = 0;  // guarded by mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_ANONYMOUS_REFUSALS_H_
