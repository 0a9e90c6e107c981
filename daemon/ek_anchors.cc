// Loading the EK trust anchors with their relaxations, and reporting them.
#include "daemon/ek_anchors.h"

#include "base/log.h"
#include "base/utc_time.h"

namespace rackgate::daemon {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("rackgated");
  return log;
}

std::string Name(const attest::EkAnchor& a) { return a.subject + " (sha256 " + a.sha256 + ")"; }

// What the start-up warning and the gauge both count: within a year, or past.
bool ExpiresSoon(const attest::EkAnchor& a, int64_t now) { return a.not_after - now < kEkAnchorExpiryWarningSeconds; }

}  // namespace

Result<attest::EkTrustStore> LoadEkAnchors(const Config& c) {
  attest::EkTrustStore store;
  if (!c.ek_roots.empty()) {
    auto loaded = attest::EkTrustStore::Load(c.ek_roots, c.ek_intermediates);
    if (!loaded.ok()) return loaded.status();
    store = std::move(loaded).value();
  }
  for (const auto& [anchor, names] : c.ek_anchor_relaxations) {
    for (const auto& name : names) {
      // SECURITY: a relaxation that names nothing loaded is an error, never
      // ignored: a typo must not leave an operator believing a vendor's
      // certificates are accepted, nor a stale hash grant a later anchor.
      if (Status s = store.AllowForAnchor(anchor, name); !s.ok()) {
        return Status::InvalidArgument(attest::kEkTrustStoreInvalid,
                                       "ek_anchor_relaxations: " + s.message() +
                                           " (`rackgatectl ek roots --config FILE` lists the anchors; the "
                                           "relaxations are sha1, expired-ca, no-ek-marks)");
      }
    }
  }
  return store;
}

EkAnchorReport ReportEkAnchors(const attest::EkTrustStore& store, int64_t now) {
  EkAnchorReport r;
  const auto anchors = store.Anchors();
  size_t self_signed = 0;
  for (const auto& a : anchors) {
    if (a.self_signed) ++self_signed;
    for (const auto& name : a.relaxations) r.relaxed.push_back("anchor " + Name(a) + " accepts " + name);
    if (ExpiresSoon(a, now)) {
      r.expiring.push_back("anchor " + Name(a) + (a.not_after <= now ? " EXPIRED at " : " expires at ") +
                           UtcTime(a.not_after));
    }
  }
  r.summary = std::to_string(anchors.size()) + " EK trust anchors loaded (" + std::to_string(self_signed) +
              " self-signed, " + std::to_string(anchors.size() - self_signed) + " partial-chain CAs), " +
              std::to_string(store.intermediate_count()) + " intermediates";
  r.notes = store.LoadNotes();
  return r;
}

void LogEkAnchors(const attest::EkTrustStore& store, int64_t now) {
  const EkAnchorReport r = ReportEkAnchors(store, now);
  Log()->info("{}", r.summary);
  for (const auto& n : r.notes) Log()->warn("EK trust anchors: skipped {}", n);
  for (const auto& n : r.relaxed) Log()->warn("EK trust anchors: {} (ek_anchor_relaxations)", n);
  for (const auto& n : r.expiring) Log()->warn("EK trust anchors: {}", n);
}

void CollectEkAnchorMetrics(Metrics* m, const attest::EkTrustStore& store, int64_t now) {
  const auto anchors = store.Anchors();
  size_t expiring = 0;
  for (const auto& a : anchors) expiring += ExpiresSoon(a, now) ? 1 : 0;
  m->GaugeSet("rackgate_ek_anchors", "EK trust anchors loaded (every CA certificate of ek_roots).", {},
              static_cast<double>(anchors.size()));
  m->GaugeSet("rackgate_ek_anchors_expiring_within_year",
              "EK trust anchors whose notAfter is less than 365 days away (or past).", {},
              static_cast<double>(expiring));
}

}  // namespace rackgate::daemon
