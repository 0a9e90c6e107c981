// rackgated's own series, counted at start-up and at scrape time, and the
// bounded log and audit of refused admin requests.
#include "daemon/observability.h"

#include <dirent.h>
#include <pwd.h>
#include <openssl/asn1.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/log.h"
#include "daemon/status_http.h"
#include "wire/reasons.h"

namespace rackgate::daemon {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("admin");
  return log;
}

constexpr char kDbUpHelp[] = "1 when the database answered the last check, 0 when it did not.";
constexpr char kStatementsHelp[] =
    "Statements run on the database, reads and writes, BEGIN and COMMIT included (round trips).";
constexpr char kTransactionsHelp[] = "Transactions run on the database, reads and writes.";
constexpr char kMachinesHelp[] = "Machines by state (docs/lifecycle.md), counted at scrape time.";
constexpr char kExpiryHelp[] =
    "notAfter of the serving certificate, the appliance CA and the cluster CA (unix seconds).";
constexpr char kRefusedHelp[] = "Refused admin requests by reason.";
constexpr char kUnauditedHelp[] =
    "Refused admin requests over metrics.audited_refusals_per_minute: logged and counted, not audited.";

// Client text for a log line: at most 64 bytes, control bytes escaped.
std::string Clip(const std::string& s) { return EscapeForLog(s.size() > 64 ? s.substr(0, 64) + "..." : s); }

double ClockTicks() {
  const long t = ::sysconf(_SC_CLK_TCK);
  return t > 0 ? static_cast<double>(t) : 100.0;
}

void CollectProcess(Metrics* m) {
  // /proc/self/stat: the fields after the command's closing parenthesis.
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream in(text.substr(close + 2));
    std::vector<std::string> f;
    for (std::string w; in >> w && f.size() < 22;) f.push_back(w);
    // f[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
    if (f.size() >= 20) {
      const double ticks = ClockTicks();
      const double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
      // The counter follows the kernel's value, which only ever grows.
      static std::mutex mu;
      static double reported = 0;
      std::lock_guard lock(mu);
      if (cpu > reported) {
        m->CounterInc("process_cpu_seconds_total", "User and system CPU time of the process in seconds.", {},
                      cpu - reported);
        reported = cpu;
      }
      std::ifstream boot("/proc/stat");
      for (std::string line; std::getline(boot, line);) {
        if (line.rfind("btime ", 0) == 0) {
          m->GaugeSet("process_start_time_seconds", "Start time of the process since the epoch in seconds.", {},
                      std::stod(line.substr(6)) + std::stod(f[19]) / ticks);
          break;
        }
      }
    }
  }
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  if (statm >> pages >> resident) {
    m->GaugeSet("process_resident_memory_bytes", "Resident memory size in bytes.", {},
                static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)));
  }
  if (DIR* d = ::opendir("/proc/self/fd")) {
    int n = 0;
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
    m->GaugeSet("process_open_fds", "Number of open file descriptors.", {}, n - 1);  // minus the one reading
  }
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    m->GaugeSet("process_max_fds", "Maximum number of open file descriptors.", {},
                lim.rlim_cur == RLIM_INFINITY ? -1 : static_cast<double>(lim.rlim_cur));
  }
}

}  // namespace

void DeclareApplianceMetrics(Metrics* m, const std::string& version) {
  m->GaugeSet("rackgate_build_info", "Always 1; the version rackgated was built from.", {{"version", version}}, 1);
  for (const std::string& state : core::MachineStateNames()) {
    m->Touch("rackgate_machines", kMachinesHelp, MetricType::kGauge, {{"state", state}});
  }
  m->Touch("rackgate_machines_untrusted",
           "Machines whose latest attestation failed or whose last good one is too old.", MetricType::kGauge, {});
  m->Touch("rackgate_sessions_in_flight", "Sessions issued and neither used nor expired.", MetricType::kGauge, {});
  m->Touch("rackgate_db_errors_total", "Database errors.", MetricType::kCounter, {});
  m->Touch("rackgate_db_commits_total", "Write transactions committed, each with a group of writes.",
           MetricType::kCounter, {});
  m->Touch("rackgate_db_writes_total", "Writes run in those transactions (committed or refused).",
           MetricType::kCounter, {});
  m->Touch("rackgate_db_statements_total", kStatementsHelp, MetricType::kCounter, {});
  m->Touch("rackgate_db_transactions_total", kTransactionsHelp, MetricType::kCounter, {});
  m->Declare("rackgate_certificate_expiry_timestamp_seconds", kExpiryHelp, MetricType::kGauge, {"certificate"});
  // Attestation decisions: every reason a machine can receive
  // (wire/reasons.def), so that an alert on any of them sees a 0 from the
  // start; the operators' and the transport's reasons never label it.
  const char* kAttestHelp = "Attestation decisions by verdict and reason.";
  m->Touch("rackgate_attestations_total", kAttestHelp, MetricType::kCounter, {{"verdict", "ok"}, {"reason", ""}});
  for (const wire::ReasonInfo& r : wire::Reasons()) {
    if (r.audience != wire::ReasonAudience::kMachine && r.audience != wire::ReasonAudience::kBoth) continue;
    m->Touch("rackgate_attestations_total", kAttestHelp, MetricType::kCounter,
             {{"verdict", r.machine_status == 503 ? "wait" : "refused"}, {"reason", std::string(r.name)}});
  }
  m->Touch("rackgate_attestation_duration_seconds", "Evidence verification time.", MetricType::kHistogram, {});
  const char* kConfigHelp = "Ignition config requests by verdict and reason.";
  for (const char* v : {"public", "attested"}) {
    m->Touch("rackgate_config_requests_total", kConfigHelp, MetricType::kCounter, {{"verdict", v}, {"reason", ""}});
  }
  const char* kCsrHelp = "CSR decisions by verdict, kind and reason.";
  for (const char* v : {"signed", "renewed"}) {
    for (const char* k : {"client", "serving"}) {
      m->Touch("rackgate_csr_total", kCsrHelp, MetricType::kCounter, {{"verdict", v}, {"kind", k}, {"reason", ""}});
    }
  }
  for (const char* r : {"delivered", "failed"}) {
    m->Touch("rackgate_webhook_deliveries_total", "Webhook delivery attempts by result.", MetricType::kCounter,
             {{"result", r}});
  }
  m->Touch("rackgate_admin_refusals_total", kRefusedHelp, MetricType::kCounter, {{"reason", "admin_forbidden"}});
  m->Touch("rackgate_admin_refusals_unaudited_total", kUnauditedHelp, MetricType::kCounter, {});
  m->Touch("rackgate_anonymous_refusals_total",
           "Evidence refused before its sender proved possession of the machine's TPM, by reason.",
           MetricType::kCounter, {{"reason", "activation_failed"}});
  m->Touch("rackgate_unknown_eks", "Unknown EKs whose challenge was refused in the last hour (at most 256 kept).",
           MetricType::kGauge, {});
  m->Touch("process_cpu_seconds_total", "User and system CPU time of the process in seconds.", MetricType::kCounter,
           {});
  CollectProcess(m);
}

std::optional<int64_t> CertificateNotAfter(const std::string& pem_path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> f(std::fopen(pem_path.c_str(), "re"), &std::fclose);
  if (!f) return std::nullopt;
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!cert) return std::nullopt;
  tm t{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &t) != 1) return std::nullopt;
  return static_cast<int64_t>(timegm(&t));
}

void CollectScrapeMetrics(Metrics* m, core::FleetCounter* fleet, const ExpiryFiles& files, int64_t now) {
  const core::FleetCounts c = fleet->Count(now);
  if (c.failed_reads > 0) m->CounterInc("rackgate_db_errors_total", "Database errors.", {}, c.failed_reads);
  if (c.machines_by_state) {
    for (const auto& [state, n] : *c.machines_by_state) {
      m->GaugeSet("rackgate_machines", kMachinesHelp, {{"state", state}}, static_cast<double>(n));
    }
  }
  // docs/policy.md, "Observe": 1 for a pool whose boot policy is observed,
  // not enforced; an alert on it catches a pool left observing.
  if (c.pools_observing) {
    for (const auto& [pool, observing] : *c.pools_observing) {
      m->GaugeSet("rackgate_pool_boot_policy_observing",
                  "1 when the pool observes its boot policy (evaluated and recorded, NOT enforced), else 0.",
                  {{"pool", pool}}, observing ? 1 : 0);
    }
  }
  // Counted at scrape time: a running sum would drift with every session
  // that expires unused. fleet: whether the database answers, for an alert
  // on each appliance (docs/ha.md).
  m->GaugeSet("rackgate_db_up", kDbUpHelp, {}, c.sessions_in_flight ? 1 : 0);
  if (c.sessions_in_flight) {
    m->GaugeSet("rackgate_sessions_in_flight", "Sessions issued and neither used nor expired.", {},
                static_cast<double>(*c.sessions_in_flight));
  }
  // Trust (docs/trust.md).
  if (c.machines_untrusted) {
    m->GaugeSet("rackgate_machines_untrusted",
                "Machines whose latest attestation failed or whose last good one is too old.", {},
                static_cast<double>(*c.machines_untrusted));
  }
  // The store counts since Open; the counters move by what is new.
  const core::WriteDelta w = fleet->TakeWriteDelta();
  m->CounterInc("rackgate_db_commits_total", "Write transactions committed, each with a group of writes.", {},
                static_cast<double>(w.commits));
  m->CounterInc("rackgate_db_writes_total", "Writes run in those transactions (committed or refused).", {},
                static_cast<double>(w.writes));
  m->CounterInc("rackgate_db_statements_total", kStatementsHelp, {}, static_cast<double>(w.statements));
  m->CounterInc("rackgate_db_transactions_total", kTransactionsHelp, {}, static_cast<double>(w.transactions));
  const std::pair<const char*, const std::string*> certs[] = {
      {"serving", &files.serving_certificate}, {"appliance_ca", &files.appliance_ca}, {"cluster_ca", &files.cluster_ca}};
  for (const auto& [name, path] : certs) {
    if (auto not_after = CertificateNotAfter(*path)) {
      m->GaugeSet("rackgate_certificate_expiry_timestamp_seconds", kExpiryHelp, {{"certificate", name}},
                  static_cast<double>(*not_after));
    }
  }
  CollectProcess(m);
}

AdminRefusalLog::AdminRefusalLog(core::AuditService* audit, Metrics* metrics, int per_minute)
    : audit_(audit), metrics_(metrics), per_minute_(per_minute) {}

void AdminRefusalLog::Record(const AdminRefusal& r, int64_t now) {
  const std::string uid = r.peer ? std::to_string(r.peer->uid) : "";
  std::string user = r.peer ? "uid " + uid : "unknown";
  if (r.peer) {
    if (struct passwd* pw = ::getpwuid(r.peer->uid)) user = pw->pw_name;
  }
  const std::string reason = r.reason.empty() ? "http_" + std::to_string(r.status) : r.reason;
  auto host = r.params.find("hostname");
  const std::string hostname = host != r.params.end() ? host->second : "";
  Log()->warn("admin {} {} refused {} {}: user={} uid={}{}", r.method, r.route, r.status, reason, user, uid,
              hostname.empty() ? "" : " hostname=" + Clip(hostname));
  // The reason is the server's own code (bounded), never the client's text.
  metrics_->CounterInc("rackgate_admin_refusals_total", kRefusedHelp, {{"reason", reason}});
  // Only a refused change is audited; a refused read is logged and
  // counted above, and takes no share of the per-minute budget.
  if (!core::RefusalIsAudited(r.method)) return;

  bool audit = false;
  int64_t summary = 0;
  {
    std::lock_guard lock(mu_);
    const int64_t minute = now / 60;
    if (minute != minute_) {
      summary = unaudited_;
      minute_ = minute;
      audited_ = 0;
      unaudited_ = 0;
    }
    if (audited_ < per_minute_) {
      ++audited_;
      audit = true;
    } else {
      ++unaudited_;
    }
  }
  if (summary > 0) {
    Log()->warn("{} more refused admin requests last minute were logged but not audited "
                "(metrics.audited_refusals_per_minute is {})",
                summary, per_minute_);
  }
  if (!audit) {
    metrics_->CounterInc("rackgate_admin_refusals_unaudited_total", kUnauditedHelp, {});
    return;
  }
  core::AdminRefusalRecord record{r.method, r.route, reason, user, std::nullopt, hostname};
  if (r.peer) record.uid = r.peer->uid;
  if (Status s = audit_->RecordAdminRefusal(record, now); !s.ok()) {
    metrics_->CounterInc("rackgate_db_errors_total", "Database errors.", {});
    Log()->warn("admin refusal not audited: {}", s.ToString());
  }
}

}  // namespace rackgate::daemon
