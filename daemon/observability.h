// What rackgated shows about itself (docs/observability.md): every
// documented series from start-up, the values counted at scrape time
// (machines by state, certificate expiry, the process), and refused admin
// requests logged, counted and audited within a bound.
#ifndef RACKGATE_DAEMON_OBSERVABILITY_H_
#define RACKGATE_DAEMON_OBSERVABILITY_H_

#include <cstdint>
#include <mutex>
#include <string>

#include "base/metrics.h"
#include "daemon/http_server.h"
#include "core/audit_service.h"
#include "core/fleet_counts.h"

namespace rackgate::daemon {

// Creates every documented family (docs/operations.md, "Metrics") with its
// known label values at zero: a fresh appliance's scrape names them all.
void DeclareApplianceMetrics(Metrics* metrics, const std::string& version);

// The files whose notAfter the scrape reports.
struct ExpiryFiles {
  std::string serving_certificate;
  std::string appliance_ca;
  std::string cluster_ca;
};

// Sets the gauges counted at scrape time: machines by state and untrusted,
// observing pools, sessions in flight, whether the database answers, the
// write counters, the certificates' expiry, the process's CPU, memory,
// descriptors and start. A store error counts rackgate_db_errors_total; a
// missing certificate (no cluster CA yet) leaves its gauge out.
void CollectScrapeMetrics(Metrics* metrics, core::FleetCounter* fleet, const ExpiryFiles& files, int64_t now);

// A certificate file's notAfter (unix seconds); nullopt when unreadable.
std::optional<int64_t> CertificateNotAfter(const std::string& pem_path);

// Refused admin requests: each one logged (method, route, user, uid,
// reason, the hostname it named, escaped); at most `per_minute` audited as
// admin_refused a minute, the rest counted in
// rackgate_admin_refusals_unaudited_total and summarised in one log line
// when the next minute starts. Thread-safe.
class AdminRefusalLog {
 public:
  // BORROWED: audit and metrics outlive it.
  AdminRefusalLog(core::AuditService* audit, Metrics* metrics, int per_minute);
  void Record(const AdminRefusal& refusal, int64_t now);

 private:
  core::AuditService* audit_;
  Metrics* metrics_;
  int per_minute_;
  std::mutex mu_;
  int64_t minute_ = 0;
  int audited_ = 0;
  int64_t unaudited_ = 0;
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_OBSERVABILITY_H_
