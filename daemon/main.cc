// rackgated: the appliance daemon. Loads its config, opens the enrollment
// store, serves the attestation protocol, Ignition configs and CSR vouching
// over HTTPS and the admin API on a Unix socket, talks to systemd (READY, WATCHDOG, STOPPING), reloads
// certificates and trust anchors on SIGHUP, and drains on SIGTERM.
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "attest/ek_cert.h"
#include "core/appliance_ca.h"
#include "core/attestation.h"
#include "core/csr_service.h"
#include "core/ignition_service.h"
#include "core/report_service.h"
#include "core/trust.h"
#include "daemon/config.h"
#include "daemon/ek_anchors.h"
#include "daemon/handlers_admin.h"
#include "daemon/handlers_public.h"
#include "daemon/http_server.h"
#include "base/log.h"
#include "base/metrics.h"
#include "daemon/notify.h"
#include "daemon/observability.h"
#include "daemon/webhooks.h"
#include "daemon/kube_watch.h"
#include "core/fleet_counts.h"
#include "core/webhook_outbox.h"
#include "core/kube_approver.h"
#include "storage/store.h"

namespace rackgate::daemon {
namespace {

using core::AttestationOptions;
using core::AttestationService;
using core::CsrOptions;
using core::CsrService;
using core::IgnitionOptions;
using core::IgnitionService;
using core::AgentBundle;
using core::ReportService;
using core::TrustAnchors;

constexpr char kHelp[] =
    "Usage: rackgated --config FILE [--check-config]\n"
    "\n"
    "The rackgate appliance: machines prove their identity with their TPM\n"
    "(docs/protocol.md) before they get anything that matters. Serves HTTPS on\n"
    "the configured addresses (port 22623 by default) and the admin API on a\n"
    "Unix socket for rackgatectl. The config file is JSON; every key is in\n"
    "docs/operations.md. `rackgatectl init --state-dir DIR` prepares the state\n"
    "directory first.\n"
    "\n"
    "  --check-config   load and validate the config and trust anchors, then exit\n"
    "\n"
    "Signals: SIGHUP reloads the TLS certificate, the EK trust anchors and the\n"
    "log level; SIGTERM or SIGINT stops accepting, lets requests in flight\n"
    "finish (drain_timeout_seconds), and exits 0.\n";

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("rackgated");
  return log;
}

// ledger: the audit chain's head, logged at start and once a day so that an
// operator can keep it outside the appliance (docs/audit.md, "Anchoring the
// head"). A full walk: a broken chain is logged as an error the day it shows.
void LogAuditHead(storage::Store* db) {
  auto r = db->VerifyAuditChain();
  if (!r.ok()) {
    Log()->warn("audit chain: cannot walk it: {}", r.status().ToString());
  } else if (!r->intact) {
    Log()->error("audit chain broken at row {}: {}; see `rackgatectl audit verify`", r->bad_row_id, r->message);
  } else {
    Log()->info("audit chain intact: {} rows, head row {} hash {}; keep `--anchor {}:{}` outside the appliance",
                r->rows, r->head_id, r->head_hash, r->head_id, r->head_hash);
  }
}

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The EK trust anchors the config names, with their relaxations
// (daemon/ek_anchors.h), logged: how many, what was skipped, what is
// relaxed and what expires within a year. No roots at all is allowed (a
// lab that enrolls by EK public area only) but every certificate then fails.
Result<attest::EkTrustStore> LoadAnchors(const Config& c) {
  if (c.ek_roots.empty()) Log()->warn("no ek_roots configured: every EK certificate will be refused");
  auto store = LoadEkAnchors(c);
  if (store.ok()) LogEkAnchors(*store, Now());
  return store;
}

// A CA file's text (certificates only: never ca.key).
Result<std::string> ReadApplianceCa(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::IoError("config_unreadable", "cannot read the appliance CA " + path);
  std::ostringstream pem;
  pem << f.rdbuf();
  return pem.str();
}

// What templates may say about the appliance: its URL and its CA, which
// `rackgatectl init` wrote.
Result<IgnitionOptions> IgnitionFromConfig(const Config& c) {
  IgnitionOptions o;
  o.appliance_url = c.public_url;
  if (o.appliance_url.empty() && !c.public_urls.empty()) o.appliance_url = c.public_urls.front();
  if (o.appliance_url.empty()) {
    const std::string& host = c.listen_addresses.front();
    const bool v6 = host.find(':') != std::string::npos;
    o.appliance_url = "https://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(c.port);
  }
  // Several appliances (docs/agent.md): {{appliance.urls}}, comma-separated.
  for (const std::string& u : c.public_urls) o.appliance_urls += (o.appliance_urls.empty() ? "" : ",") + u;
  auto pem = ReadApplianceCa(c.ca_certificate_path());
  if (!pem.ok()) return pem.status();
  o.appliance_ca_pem = *pem;
  o.validator = c.ignition_validate;
  return o;
}

// The appliance CA's next certificate (STATE/ca/next.crt) while this
// appliance has one: prepared here, or copied for a rotation and not
// retired yet (docs/operations.md, "Rotating the appliance CA"). "" when
// there is none.
std::string ReadNextApplianceCa(const Config& c) {
  const std::string path = c.state_dir + "/ca/next.crt";
  if (::access(path.c_str(), F_OK) != 0) return "";
  auto pem = ReadApplianceCa(path);
  if (!pem.ok()) {
    Log()->warn("{}: not served in the CA bundle", pem.status().ToString());
    return "";
  }
  return *pem;
}

// fleet: the store the config names (docs/ha.md). SQLite opens at once. A
// PostgreSQL that does not answer yet (an appliance booting before the
// database, a primary failing over) is waited for: a progress line and the
// unit's STATUS= each try, backoff 1 s doubling to 30 s, for at most
// database_wait_seconds; then exit 1 with the cause, and systemd's
// Restart= tries again. Only db_unavailable is waited for: a wrong
// password, a newer schema or an unmigrated database is final.
Result<std::unique_ptr<storage::Store>> OpenStoreWaiting(const Config& c, const std::string& database,
                                                         Notifier* notifier) {
  const std::string shown = RedactDatabase(database);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(c.database_wait_seconds);
  std::chrono::seconds delay{1};
  for (int attempt = 1;; ++attempt) {
    auto store = storage::OpenStore(database);
    if (store.ok() || !c.database_is_server() || store.status().reason() != "db_unavailable") return store;
    if (std::chrono::steady_clock::now() + delay > give_up) return store;
    Log()->warn("database {} does not answer (try {}): {}; retrying in {} s, for at most {} s in all", shown,
                attempt, store.status().ToString(), delay.count(), c.database_wait_seconds);
    notifier->Status("waiting for the database " + shown);
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::seconds(30));
  }
}

// fleet: drops the store's change listener before the services it calls
// are destroyed (declared after them, so destroyed first).
class ChangeListenerScope {
 public:
  ChangeListenerScope(storage::Store* store, storage::Store::ChangeListener listener) : store_(store) {
    store_->SetChangeListener(std::move(listener));
  }
  ~ChangeListenerScope() { store_->SetChangeListener(nullptr); }
  ChangeListenerScope(const ChangeListenerScope&) = delete;
  ChangeListenerScope& operator=(const ChangeListenerScope&) = delete;

 private:
  storage::Store* store_;
};

std::optional<gid_t> GroupId(const std::string& name) {
  if (struct group* g = ::getgrnam(name.c_str())) return g->gr_gid;
  return std::nullopt;
}

// What rackgated starts from, read and checked before anything is opened.
struct Startup {
  Config config;
  std::string database;  // SECURITY: may hold a password; show RedactDatabase's form
  std::optional<attest::EkTrustStore> anchors;
  std::vector<WebhookEndpoint> webhooks;
};

// Loads the config and everything it names that is checked before the store
// opens (--check-config stops after it). Returns the exit code when
// rackgated is to stop: 2 for a refused config, 0 for --check-config.
std::optional<int> LoadStartup(const std::string& config_path, bool check_only, Startup* out) {
  auto config = LoadConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "rackgated: %s\n", config.status().ToString().c_str());
    return 2;
  }
  out->config = *std::move(config);
  if (Status s = ConfigureLogging({out->config.log_level}); !s.ok()) {
    std::fprintf(stderr, "rackgated: %s\n", s.ToString().c_str());
    return 2;
  }
  // A state directory nobody initialised (a fresh package install): say what
  // to run, first of all (init comes before the EK roots in
  // docs/operations.md), instead of creating an empty database that has no
  // appliance CA. Exit 2: the unit does not restart for it
  // (RestartPreventExitStatus=2). --check-config checks the file alone; any
  // other stat error (a permission) is left to the store's own message.
  // (SQLite only: a PostgreSQL database is created by `init --database`.)
  if (struct stat st; !check_only && !out->config.database_is_server() &&
                      ::stat(out->config.database_path().c_str(), &st) != 0 && errno == ENOENT) {
    Log()->critical("state directory {} has no database: run `sudo -u rackgate rackgatectl init --state-dir {}`",
                    out->config.state_dir, out->config.state_dir);
    return 2;
  }
  // fleet: the database string with the password file's secret, checked
  // by --check-config too. SECURITY: `database` may hold a password; logs
  // and errors say RedactDatabase's form only.
  auto database = DatabaseForStore(out->config);
  if (!database.ok()) {
    Log()->critical("database: {}", database.status().ToString());
    return 2;
  }
  out->database = *std::move(database);
  auto anchors_loaded = LoadAnchors(out->config);
  if (!anchors_loaded.ok()) {
    Log()->critical("EK trust anchors: {}", anchors_loaded.status().ToString());
    return 2;
  }
  out->anchors.emplace(std::move(anchors_loaded).value());
  // Webhooks (docs/events.md): a missing or short secret file stops the
  // start, as --check-config says.
  auto webhook_endpoints = LoadWebhookEndpoints(out->config.webhooks);
  if (!webhook_endpoints.ok()) {
    Log()->critical("webhooks: {}", webhook_endpoints.status().ToString());
    return 2;
  }
  out->webhooks = std::move(webhook_endpoints).value();
  if (check_only) {
    std::printf("config ok: %s\n", config_path.c_str());
    return 0;
  }
  return std::nullopt;
}

AttestationOptions AttestationOptionsFrom(const Config& c) {
  AttestationOptions ao;
  ao.session_ttl_seconds = c.session_ttl_seconds;
  ao.token_ttl_seconds = c.token_ttl_seconds;
  ao.default_pcr_selection = *attest::ParsePcrSelectionList(c.default_pcr_selection);
  ao.require_ek_certificate = c.require_ek_certificate;
  ao.discovery = c.discovery;
  ao.discovery_pool = c.discovery_pool;
  ao.max_open_sessions = c.max_open_sessions;
  ao.max_open_sessions_per_client = c.max_open_sessions_per_client;
  ao.busy_queue_delay_ms = c.busy_queue_delay_ms;
  return ao;
}

CsrOptions CsrOptionsFrom(const Config& c) {
  CsrOptions co;
  co.cluster_ca_certificate = c.cluster_ca_certificate_path();
  co.cluster_ca_key = c.cluster_ca_key_path();
  co.client_window_seconds = c.client_csr_window_seconds;
  co.client_validity_seconds = c.client_certificate_validity_seconds;
  co.serving_validity_seconds = c.serving_certificate_validity_seconds;
  co.max_in_flight = c.max_csrs_in_flight;
  co.max_in_flight_per_machine = c.max_csrs_in_flight_per_machine;
  return co;
}

// The HTTP server's listeners and limits; its routes are added by Run.
HttpServerOptions ServerOptionsFrom(const Config& c, Metrics* metrics) {
  HttpServerOptions o;
  o.listen_addresses = c.listen_addresses;
  o.port = c.port;
  o.tls_certificate_path = c.tls_certificate_path();
  o.tls_key_path = c.tls_key_path();
  o.max_body_bytes = c.max_body_bytes;
  o.admin_max_body_bytes = c.admin_max_body_bytes;
  o.per_client_connections = static_cast<unsigned>(c.per_client_connections);
  o.max_connections = static_cast<unsigned>(c.max_connections);
  o.connection_timeout_seconds = static_cast<unsigned>(c.connection_timeout_seconds);
  o.threads = static_cast<unsigned>(c.threads);
  o.handler_threads = static_cast<unsigned>(c.handler_threads);
  o.drain_timeout = std::chrono::seconds(c.drain_timeout_seconds);
  o.metrics = metrics;
  o.admin_socket_path = c.admin_socket;
  o.admin_group = c.admin_group;
  return o;
}

// GET /readyz: whether the database answers.
Handler ReadyzHandler(core::FleetCounter* fleet, Metrics* metrics) {
  return [fleet, metrics](const Request&) {
    const Status answers = fleet->DatabaseAnswers();
    // fleet: rackgate_db_up says the same to a scraper (docs/ha.md).
    metrics->GaugeSet("rackgate_db_up", "1 when the database answered the last check, 0 when it did not.", {},
                      answers.ok() ? 1 : 0);
    if (answers.ok()) return Response::Text(200, "ready\n");
    metrics->CounterInc("rackgate_db_errors_total", "Database errors.", {});
    Log()->warn("readyz: the database does not answer: {}", answers.ToString());
    return Response::Error(503, "db_unavailable", "the database does not answer", 5);
  };
}

// GET /metrics: the registry, with the gauges counted at scrape time.
Handler ScrapeHandler(core::FleetCounter* fleet, Metrics* metrics, AttestationService* attestation,
                      const TrustAnchors* anchors, const ExpiryFiles& expiry) {
  return [fleet, metrics, attestation, anchors, expiry](const Request&) {
    CollectScrapeMetrics(metrics, fleet, expiry, Now());
    CollectEkAnchorMetrics(metrics, *anchors->Get(), Now());
    metrics->GaugeSet("rackgate_unknown_eks",
                     "Unknown EKs whose challenge was refused in the last hour (at most 256 kept).", {},
                     static_cast<double>(attestation->unknown_eks().SeenSince(Now() - 3600).size()));
    return Response::Text(200, metrics->Render(), kMetricsContentType);
  };
}

// What the signal loop works on, all BORROWED from Run.
struct Running {
  const std::string& config_path;
  Notifier* notifier;
  HttpServer* server;
  WebhookDispatcher* webhooks;
  TrustAnchors* anchors;
  CsrService* csrs;
  storage::Store* db;
  Metrics* metrics;
  AttestationService* attestation;
  core::ApplianceCaBundle* ca_bundle;
};

// SIGHUP: the config's EK trust anchors, the cluster CA and the TLS
// certificate again; each refused one keeps the running one.
void Reload(const Running& r) {
  r.notifier->Reloading();
  auto fresh = LoadConfig(r.config_path);
  if (!fresh.ok()) {
    Log()->error("reload: config refused, keeping the running one: {}", fresh.status().ToString());
  } else {
    if (Status s = ConfigureLogging({fresh->log_level}); !s.ok()) Log()->error("reload: {}", s.ToString());
    auto next = LoadAnchors(*fresh);
    if (next.ok()) {
      r.anchors->Set(std::move(next).value());
      Log()->info("reload: EK trust anchors reloaded");
    } else {
      Log()->error("reload: EK trust anchors refused, keeping the running ones: {}", next.status().ToString());
    }
    if (Status s = r.csrs->Reload(); !s.ok()) {
      Log()->error("reload: cluster CA refused, keeping the running one: {}", s.ToString());
    } else {
      Log()->info("reload: cluster CA reloaded");
    }
    // After `ca rotate --appliance retire` moved next.crt to ca.crt.
    if (auto current = ReadApplianceCa(fresh->ca_certificate_path()); current.ok()) {
      r.ca_bundle->SetLocal(*current, ReadNextApplianceCa(*fresh));
      Log()->info("reload: appliance CA files reloaded");
    } else {
      Log()->error("reload: appliance CA refused, keeping the running one: {}", current.status().ToString());
    }
    if (Status s = r.server->ReloadCertificates(); !s.ok()) {
      Log()->error("reload: TLS certificate refused, keeping the running one: {}", s.ToString());
    } else {
      Log()->info("reload: TLS certificate reloaded");
    }
    Log()->info("reload: addresses, port, limits and protocol timings take effect at restart");
  }
  r.notifier->Ready("reloaded");
}

// Every minute: expired sessions and tokens, the trust sweep, the
// anonymous refusals' summaries.
void HousekeepMinute(const Running& r) {
  storage::Store* db = r.db;
  auto purged = db->PurgeExpired(Now());
  if (!purged.ok()) {
    r.metrics->CounterInc("rackgate_db_errors_total", "Database errors.", {});
    Log()->warn("purge of expired sessions failed: {}", purged.status().ToString());
  } else if (purged->sessions > 0 || purged->tokens > 0) {
    Log()->debug("purged {} expired sessions and {} tokens", purged->sessions, purged->tokens);
  }
  // Trust (docs/trust.md): machines past their pool's
  // max_attestation_age_seconds become untrusted (each change logged by
  // the sweep). The requests that need trust judge the age themselves,
  // so this minute's delay only affects what status and metrics show.
  if (auto swept = core::SweepTrust(db, Now()); !swept.ok()) {
    r.metrics->CounterInc("rackgate_db_errors_total", "Database errors.", {});
    Log()->warn("trust sweep failed: {}", swept.status().ToString());
  }
  // The anonymous refusals counted since each machine's last summary,
  // one audit row per machine per interval (docs/trust.md).
  r.attestation->FlushAnonymousRefusals();
}

// Waits for signals until SIGTERM or SIGINT, which drain and stop (0);
// SIGHUP reloads. Runs the minute's housekeeping and logs the audit chain's
// head daily.
int ServeUntilStopped(const Running& r, const sigset_t& signals) {
  int64_t next_purge = Now() + 60;
  // ledger: the audit chain's head (docs/audit.md).
  LogAuditHead(r.db);
  int64_t next_audit_head = Now() + 86400;
  for (;;) {
    timespec wait{5, 0};
    int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig < 0 && errno != EAGAIN && errno != EINTR) {
      Log()->error("sigtimedwait: {}", std::strerror(errno));
    }
    if (sig == SIGTERM || sig == SIGINT) {
      Log()->info("{}: draining requests in flight", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      r.notifier->Stopping();
      r.notifier->StopWatchdog();
      r.server->Stop();
      r.webhooks->Stop();  // undelivered events stay queued for the next start
      Log()->info("stopped");
      return 0;
    }
    if (sig == SIGHUP) Reload(r);
    if (Now() >= next_audit_head) {  // ledger
      next_audit_head = Now() + 86400;
      LogAuditHead(r.db);
    }
    if (Now() >= next_purge) {
      next_purge = Now() + 60;
      HousekeepMinute(r);
    }
  }
}

// Signals are taken synchronously by Run's thread; blocked before the
// server's threads start so that they inherit the mask.
sigset_t BlockSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

core::KubeApproverOptions KubeApproverOptionsFrom(const Config& config) {
  core::KubeApproverOptions o;
  o.bootstrapper_groups = config.kubernetes.bootstrapper_groups;
  o.max_attestation_age_seconds = config.kubernetes.max_attestation_age_seconds;
  o.client_window_seconds = config.client_csr_window_seconds;
  return o;
}

// The approver mode's watcher when the config has a "kubernetes" section;
// nullptr otherwise.
Result<std::unique_ptr<KubeWatch>> StartKubeWatch(const Config& config, core::KubeApprover* approver,
                                                  Metrics* metrics) {
  if (!config.kubernetes.enabled()) return std::unique_ptr<KubeWatch>();
  return KubeWatch::Start({config.kubernetes.kubeconfig, config.kubernetes.context, config.kubernetes.in_cluster},
                          approver, metrics);
}

// The store did not open: the cause, and what to check; exit 1.
int StoreUnavailable(const std::string& database, const Status& s) {
  // The store's message never holds the password (storage::OpenStore).
  Log()->critical("cannot open the store {}: {}{}", RedactDatabase(database), s.ToString(),
                  s.reason() == "db_unavailable"
                      ? "; check that PostgreSQL runs and that `psql` connects with the same URL, and run "
                        "`rackgatectl init --state-dir DIR --database URL` once for a new fleet database"
                      : "");
  return 1;
}

int Run(const std::string& config_path, bool check_only) {
  Startup start;
  if (auto rc = LoadStartup(config_path, check_only, &start)) return *rc;
  const Config* config = &start.config;
  Notifier notifier;
  auto store = OpenStoreWaiting(*config, start.database, &notifier);
  if (!store.ok()) return StoreUnavailable(start.database, store.status());
  Log()->info("store: {}", RedactDatabase(start.database));
  TrustAnchors anchors(*std::move(start.anchors));
  Metrics metrics;
  // Observability (docs/observability.md): every documented series from
  // start-up.
  DeclareApplianceMetrics(&metrics, RACKGATE_VERSION);
  AttestationService attestation(store->get(), &anchors, AttestationOptionsFrom(*config), &metrics);
  auto ignition_options = IgnitionFromConfig(*config);
  if (!ignition_options.ok()) {
    Log()->critical("{}", ignition_options.status().ToString());
    return 2;
  }
  // The appliance CA bundle (docs/operations.md, "Rotating the appliance
  // CA"): the fleet's rotation record, read at most every 2 s.
  core::ApplianceCaBundle ca_bundle(store->get(), ignition_options->appliance_ca_pem, ReadNextApplianceCa(*config));
  ignition_options->ca_bundle = &ca_bundle;
  attestation.SetCaBundle(&ca_bundle);
  IgnitionService ignition(store->get(), &attestation, std::move(ignition_options).value(), &metrics);
  // fleet (docs/ha.md): another appliance's change to a pool drops this
  // one's cached pools at once (LISTEN/NOTIFY on PostgreSQL); the cache's
  // 2 s TTL bounds a lost notification. Nothing else is cached by pool or
  // by machine: boot policies and EK certificate verdicts are cached by
  // their content, so no notification can make them stale.
  ChangeListenerScope change_listener(store->get(), [&ignition, &ca_bundle](std::string_view topic) {
    if (topic == "pools" || topic == "*") ignition.InvalidateAllPools();
    if (topic == "ca" || topic == "*") ca_bundle.Invalidate();
  });
  CsrService csrs(store->get(), &attestation, CsrOptionsFrom(*config), &metrics);
  if (Status s = csrs.Reload(); !s.ok()) {
    Log()->warn("no cluster CA yet ({}): CSRs wait with 503 until `rackgatectl ca import` provides one",
                s.ToString());
  }
  // Approver mode (docs/kubernetes.md): machines register the kubelet's key.
  csrs.SetKubeletKeys(store->get());
  core::AdminCore admin_core(store->get(), &attestation, &ignition);
  admin_core.status.set_cluster_ca_certificate(config->cluster_ca_certificate_path());
  AdminApi admin(&admin_core, GroupId(config->admin_group));
  RetryPolicy retry;
  retry.retry_after_seconds = config->retry_after_seconds;
  retry.busy_retry_after_seconds = config->busy_retry_after_seconds;
  PublicHandlers handlers(&attestation, &ignition, &csrs, retry);
  // Provisioning reports (docs/trust.md).
  ReportService reports(store->get(), &attestation);
  handlers.SetReports(&reports);
  // The agent bundle for nodes without the Debian package (docs/nodes.md).
  AgentBundle agent_bundle(config->agent_bundle);
  handlers.SetAgentBundle(&agent_bundle);

  HttpServerOptions o = ServerOptionsFrom(*config, &metrics);
  storage::Store* db = store->get();
  core::FleetCounter fleet(db, db);
  handlers.Register(&o.router);
  o.router.Add("GET", "/healthz", [](const Request&) { return Response::Text(200, "ok\n"); });
  o.router.Add("GET", "/readyz", ReadyzHandler(&fleet, &metrics));
  // Observability (docs/observability.md): /metrics on the machines' port
  // (metrics.public, the default) and/or on its own plain-HTTP listener.
  const ExpiryFiles expiry{config->tls_certificate_path(), config->ca_certificate_path(),
                           config->cluster_ca_certificate_path()};
  Handler scrape = ScrapeHandler(&fleet, &metrics, &attestation, &anchors, expiry);
  if (config->metrics.public_port) o.router.Add("GET", "/metrics", scrape);
  if (!config->metrics.listen_address.empty()) {
    o.metrics_address = config->metrics.listen_address;
    o.metrics_port = config->metrics.listen_port;
    o.metrics_router.Add("GET", "/metrics", scrape);
  } else if (!config->metrics.public_port) {
    Log()->warn("metrics.public is false and metrics.listen is empty: /metrics is served nowhere");
  }
  core::AuditService refusal_audit(db);
  AdminRefusalLog refusals(&refusal_audit, &metrics, config->metrics.audited_refusals_per_minute);
  o.on_admin_refusal = [&refusals](const AdminRefusal& r) { refusals.Record(r, Now()); };
  admin.Register(&o.admin_router);

  const sigset_t signals = BlockSignals();

  // Webhooks: the dispatcher's thread sends what the store's triggers queue.
  core::WebhookOutbox outbox(store->get(), core::RetrySchedule{});
  auto webhooks = WebhookDispatcher::Start(&outbox, std::move(start.webhooks), {}, &metrics);
  if (!webhooks.ok()) {
    Log()->critical("webhooks: {}", webhooks.status().ToString());
    return 1;
  }

  // Approver mode (docs/kubernetes.md): the API server's kubelet CSRs,
  // decided for the machines of approver-mode pools. A bad kubeconfig stops
  // the start; an API server that does not answer is retried by the loop.
  core::KubeApprover kube_approver(db, KubeApproverOptionsFrom(*config), &metrics, [] { return Now(); });
  auto kube_watch = StartKubeWatch(*config, &kube_approver, &metrics);
  if (!kube_watch.ok()) {
    Log()->critical("kubernetes: {}", kube_watch.status().ToString());
    return 1;
  }

  auto server = HttpServer::Start(std::move(o));
  if (!server.ok()) {
    Log()->critical("cannot serve: {}", server.status().ToString());
    return 1;
  }
  notifier.Ready("serving on port " + std::to_string((*server)->port()));
  notifier.StartWatchdog([&fleet] { return fleet.DatabaseAnswers().ok(); });
  Log()->info("rackgated {} serving on port {}, admin socket {}", RACKGATE_VERSION, (*server)->port(),
              config->admin_socket);
  if ((*server)->metrics_port() != 0) {
    Log()->info("metrics on http://{}:{}/metrics{}", config->metrics.listen_address, (*server)->metrics_port(),
                config->metrics.public_port ? " and on the HTTPS port" : " only");
  }

  return ServeUntilStopped(Running{config_path, &notifier, server->get(), webhooks->get(), &anchors, &csrs, db,
                                   &metrics, &attestation, &ca_bundle},
                           signals);
}

}  // namespace
}  // namespace rackgate::daemon

int main(int argc, char** argv) {
  std::string config;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(rackgate::daemon::kHelp, stdout);
      return 0;
    } else if (a == "--version") {
      std::puts("rackgated " RACKGATE_VERSION);
      return 0;
    } else if (a == "--config" && i + 1 < argc) {
      config = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      config = a.substr(9);
    } else if (a == "--check-config") {
      check = true;
    } else {
      std::fprintf(stderr, "rackgated: unknown argument '%s'\n\n%s", a.c_str(), rackgate::daemon::kHelp);
      return 2;
    }
  }
  if (config.empty()) {
    std::fprintf(stderr, "rackgated: --config FILE is required\n\n%s", rackgate::daemon::kHelp);
    return 2;
  }
  // No exception may end the process silently: log it and exit non-zero so
  // systemd restarts the appliance.
  try {
    return rackgate::daemon::Run(config, check);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rackgated: fatal: %s\n", e.what());
    return 1;
  }
}
