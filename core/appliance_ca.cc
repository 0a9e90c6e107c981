// The appliance CA bundle: the rotation record, read through a bounded cache.
#include "core/appliance_ca.h"

#include <utility>

#include "base/log.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("ca");
  return log;
}

std::string WithNewline(const std::string& pem) {
  return pem.empty() || pem.back() == '\n' ? pem : pem + "\n";
}

}  // namespace

std::string RotationBundle(const storage::CaRotation& rotation) {
  return WithNewline(rotation.current_pem) + WithNewline(rotation.next_pem);
}

int64_t BundlePublishedAt(const storage::CaRotation& rotation) {
  return rotation.prepared_at + kCaBundleCacheSeconds;
}

std::vector<storage::Machine> MachinesWithoutBundle(const std::vector<storage::Machine>& machines,
                                                    int64_t published_at) {
  using storage::MachineState;
  std::vector<storage::Machine> out;
  for (const storage::Machine& m : machines) {
    const bool installed = m.state == MachineState::kAttested || m.state == MachineState::kProvisioned ||
                           m.state == MachineState::kJoined;
    // Strictly after: an answer in the second the bundle was published may
    // have come from an appliance whose cache was older.
    if (installed && (!m.last_attested_at || *m.last_attested_at <= published_at)) out.push_back(m);
  }
  return out;
}

ApplianceCaBundle::ApplianceCaBundle(storage::CaRotationStore* store, std::string local_current,
                                     std::string local_next, std::chrono::steady_clock::duration ttl)
    : store_(store), ttl_(ttl), local_current_(std::move(local_current)), local_next_(std::move(local_next)) {}

std::shared_ptr<const ApplianceCaBundle::Snapshot> ApplianceCaBundle::Current() {
  std::lock_guard<std::mutex> l(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (snapshot_ && !stale_.load() && now - loaded_ < ttl_) return snapshot_;
  stale_ = false;  // before the read: an Invalidate during it reads again
  auto next = std::make_shared<Snapshot>();
  if (snapshot_) next->rotation = snapshot_->rotation;
  if (store_ != nullptr) {
    // One read per ttl_ per appliance, under the lock: a storm's
    // attestations wait for it rather than each making its own.
    auto read = store_->GetCaRotation(std::string(storage::kCaKindAppliance));
    if (read.ok()) {
      next->rotation = *read;
    } else {
      Log()->warn("CA rotation record unreadable ({}); serving the last bundle known", read.status().reason());
    }
  }
  // SECURITY: only certificates are in the record and the files read here;
  // the bundle is public (it is in every pointer config).
  if (next->rotation) {
    next->pem = RotationBundle(*next->rotation);
  } else {
    next->pem = WithNewline(local_current_) + WithNewline(local_next_);
  }
  snapshot_ = std::move(next);
  loaded_ = now;
  return snapshot_;
}

std::string ApplianceCaBundle::Pem() { return Current()->pem; }

std::optional<storage::CaRotation> ApplianceCaBundle::Rotation() { return Current()->rotation; }

void ApplianceCaBundle::Invalidate() { stale_ = true; }

void ApplianceCaBundle::SetLocal(std::string local_current, std::string local_next) {
  std::lock_guard<std::mutex> l(mu_);
  local_current_ = std::move(local_current);
  local_next_ = std::move(local_next);
  stale_ = true;
}

}  // namespace rackgate::core
