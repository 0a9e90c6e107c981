// rackgated's configuration: a JSON file (`rackgated --config FILE`), its
// defaults, and validation. Every key is documented in docs/operations.md;
// an unknown key is refused so that a typo cannot silently weaken a setting.
#ifndef RACKGATE_DAEMON_CONFIG_H_
#define RACKGATE_DAEMON_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/agent_bundle.h"
#include "storage/store.h"

namespace rackgate::daemon {

struct Config {
  // Where the database, the appliance CA and the serving certificate live.
  std::string state_dir = "/var/lib/rackgate";

  // The public HTTPS listener. Addresses are explicit: rackgated never binds
  // every interface by accident.
  std::vector<std::string> listen_addresses = {"127.0.0.1"};
  uint16_t port = 22623;
  // Defaults: <state_dir>/tls/server.crt and server.key.
  std::string tls_certificate;
  std::string tls_key;

  // The admin API's Unix socket, mode 0660, group admin_group.
  std::string admin_socket = "/run/rackgate/admin.sock";
  std::string admin_group = "rackgate-admin";

  // EK certificate trust: files or directories of PEM/DER certificates.
  std::vector<std::string> ek_roots;
  std::vector<std::string> ek_intermediates;
  // Per-anchor relaxations (docs/ek-vendors.md): the SHA-256 (hex) of an
  // anchor's DER -> the kEkRelax* names granted to it. Checked against the
  // loaded anchors at start and on SIGHUP (daemon/ek_anchors.h).
  std::map<std::string, std::vector<std::string>> ek_anchor_relaxations;
  // Refuse machines that have no EK certificate on record or presented.
  bool require_ek_certificate = true;
  // Discovery mode: an unknown EK whose certificate chains to a trusted root
  // is recorded as pending (503) until an operator approves it.
  bool discovery = false;
  std::string discovery_pool = "default";

  // Protocol timing.
  int session_ttl_seconds = 120;
  int token_ttl_seconds = 900;
  int retry_after_seconds = 30;  // for 503s: not enrolled, pending
  // Admission control (docs/performance.md): sessions open at once, overall
  // and per client address, and the Retry-After (plus jitter) of a refusal.
  int max_open_sessions = 4096;
  int max_open_sessions_per_client = 256;
  int busy_retry_after_seconds = 2;
  int busy_queue_delay_ms = 50;
  // PCRs every quote must cover unless the machine's policy needs more.
  std::string default_pcr_selection = "sha256:0,1,2,3,4,5,6,7";

  // Limits.
  size_t max_body_bytes = 1 << 20;  // event logs are the largest bodies
  size_t admin_max_body_bytes = 128 << 20;  // the admin socket's: imports
  int connection_timeout_seconds = 30;
  int per_client_connections = 32;
  int max_connections = 2048;
  int threads = 2;
  int handler_threads = 64;
  int drain_timeout_seconds = 20;

  // Ignition serving (docs/ignition.md). public_url is how machines reach
  // the appliance ({{appliance.url}} in templates); empty: https://<first
  // listen address>:<port>. ignition_validate: the validator run on every
  // uploaded template when the file exists; "" turns it off.
  std::string public_url;
  // --- Several appliances (docs/agent.md, "Several appliances") ---
  // public_urls: every appliance of the fleet, https://HOST[:PORT] each, at
  // most 16: {{appliance.urls}} in templates, comma-separated, for the
  // agent's RACKGATE_URL. Empty: {{appliance.urls}} is {{appliance.url}}.
  std::vector<std::string> public_urls;
  // --- end several appliances ---
  std::string ignition_validate = "/usr/bin/ignition-validate";
  // The agent bundle served on the public port (docs/nodes.md): the
  // initramfs fragment's file, where the package installs it; "" serves
  // none (404 agent_bundle_not_configured).
  std::string agent_bundle = core::kDefaultAgentBundlePath;

  // --- Approver mode (docs/kubernetes.md) ---
  // "kubernetes": the API server whose kubelet CSRs rackgated decides for
  // the machines of pools with kubelet_certificates "approver". Off unless
  // kubeconfig is set or in_cluster is true.
  struct Kubernetes {
    std::string kubeconfig;  // a kubeconfig file (YAML) naming the server, its CA and credentials
    std::string context;     // its context to use; "": current-context
    bool in_cluster = false; // the pod's service account instead
    // Who may file a new node's client CSR (the kubelet's bootstrap token).
    std::vector<std::string> bootstrapper_groups = {"system:bootstrappers"};
    // A rotation or serving CSR needs a good attestation at most this old
    // when the machine's pool sets no max_attestation_age_seconds.
    int64_t max_attestation_age_seconds = 86400;
    bool enabled() const { return in_cluster || !kubeconfig.empty(); }
  };
  Kubernetes kubernetes;

  // CSR vouching (docs/csr.md). The cluster CA's files; empty: <state_dir>/
  // cluster-ca/ca.crt and ca.key. Without them, CSRs are refused with
  // 503 signer_unavailable.
  std::string cluster_ca_certificate;
  std::string cluster_ca_key;
  int client_csr_window_seconds = 7200;  // after the attestation
  int client_certificate_validity_seconds = 365 * 86400;
  int serving_certificate_validity_seconds = 365 * 86400;
  int max_csrs_in_flight = 64;             // over all machines
  int max_csrs_in_flight_per_machine = 2;

  // Webhooks (docs/events.md): events POSTed, HMAC-signed, to these URLs.
  // url: https://, or http:// to a loopback host only; secret_file: the
  // HMAC key (at least 32 bytes; read at start, never logged); events: the
  // types sent (empty: every type); ca_file: PEM roots for the URL's TLS
  // certificate (empty: the system's).
  struct Webhook {
    std::string url;
    std::string secret_file;
    std::vector<std::string> events;
    std::string ca_file;
  };
  std::vector<Webhook> webhooks;

  std::string log_level = "info";

  // Observability (docs/observability.md): "metrics": {"listen":
  // "127.0.0.1:9622", "public": false, "audited_refusals_per_minute": 30}.
  // listen: a plain-HTTP listener serving /metrics only ("" none; IPv6 as
  // "[::1]:9622"). public: /metrics also on the machines' HTTPS port (the
  // default, true, keeps existing scrapers working). At most
  // audited_refusals_per_minute refused admin requests get an audit row a
  // minute; the rest are counted and summarised in one log line.
  struct MetricsSettings {
    std::string listen_address;
    uint16_t listen_port = 0;
    bool public_port = true;
    int audited_refusals_per_minute = 30;
  };
  MetricsSettings metrics;

  // --- The store (docs/operations.md "database"; docs/ha.md) ---
  // database: "" (STATE_DIR/rackgate.db), an absolute path or "sqlite:PATH"
  // (SQLite), or "postgresql://..." / "postgres://..." (PostgreSQL, several
  // appliances). The URL may carry a password; it is never logged (see
  // RedactDatabase). database_password_file: the PostgreSQL password, read
  // at start (mode 0600 or 0640, not owned by another user than rackgated's).
  // database_wait_seconds: how long a start waits for PostgreSQL to answer
  // before it exits 1 (0: no wait).
  std::string database;
  std::string database_password_file;
  int database_wait_seconds = 300;
  // A database server several appliances may share (storage::IsServerDatabase).
  bool database_is_server() const;
  // The database file of a file-backed store (empty for a server).
  std::string database_path() const;
  // --- end the store ---

  std::string ca_certificate_path() const { return state_dir + "/ca/ca.crt"; }
  std::string ca_key_path() const { return state_dir + "/ca/ca.key"; }
  std::string tls_certificate_path() const {
    return tls_certificate.empty() ? state_dir + "/tls/server.crt" : tls_certificate;
  }
  std::string tls_key_path() const {
    return tls_key.empty() ? state_dir + "/tls/server.key" : tls_key;
  }
  std::string cluster_ca_certificate_path() const {
    return cluster_ca_certificate.empty() ? state_dir + "/cluster-ca/ca.crt" : cluster_ca_certificate;
  }
  std::string cluster_ca_key_path() const {
    return cluster_ca_key.empty() ? state_dir + "/cluster-ca/ca.key" : cluster_ca_key;
  }
};

// Parses a config document. kInvalidArgument ("config_invalid") naming the
// key for malformed JSON, an unknown key, a value of the wrong type or out of
// range.
Result<Config> ParseConfig(std::string_view json_text);
// Reads and parses a config file (at most 1 MiB).
Result<Config> LoadConfig(const std::string& path);

// --- The store (docs/ha.md) ---
// What logs and errors say of a database (storage/store.h).
using storage::RedactDatabase;
// What storage::OpenStore gets: the SQLite path, or the PostgreSQL URL with
// the password of database_password_file added (password=, percent-encoded).
// config_invalid naming the file (never its content): unreadable, empty,
// over 1 KiB, readable by others (mode beyond 0640), owned by another user.
// SECURITY: the returned string may hold a secret: pass it to OpenStore only.
Result<std::string> DatabaseForStore(const Config& config);
// --- end the store ---

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_CONFIG_H_
