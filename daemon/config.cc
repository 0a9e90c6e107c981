// rackgated's JSON configuration.
#include "daemon/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attest/tpm.h"
#include "base/hex.h"
#include "core/events.h"

namespace rackgate::daemon {

namespace {

using nlohmann::json;

Status Invalid(const std::string& key, const std::string& why) {
  return Status::InvalidArgument("config_invalid", "config key '" + key + "': " + why);
}

// Readers for one key each. They check the JSON type, then the range.
Status ReadString(const json& v, const std::string& key, std::string* out) {
  if (!v.is_string()) return Invalid(key, "expected a string");
  *out = v.get<std::string>();
  return Status::Ok();
}

Status ReadBool(const json& v, const std::string& key, bool* out) {
  if (!v.is_boolean()) return Invalid(key, "expected true or false");
  *out = v.get<bool>();
  return Status::Ok();
}

template <typename T>
Status ReadInt(const json& v, const std::string& key, int64_t lo, int64_t hi, T* out) {
  if (!v.is_number_integer()) return Invalid(key, "expected an integer");
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    return Invalid(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  *out = static_cast<T>(x);
  return Status::Ok();
}

Status ReadStrings(const json& v, const std::string& key, std::vector<std::string>* out) {
  if (!v.is_array()) return Invalid(key, "expected a list of strings");
  out->clear();
  for (const json& e : v) {
    if (!e.is_string()) return Invalid(key, "expected a list of strings");
    out->push_back(e.get<std::string>());
  }
  return Status::Ok();
}

// {"<anchor sha256 hex>": ["sha1", ...]}: the shape only; the anchors and
// the names are checked when the anchors load (daemon/ek_anchors.h).
Status ReadAnchorRelaxations(const json& v, std::map<std::string, std::vector<std::string>>* out) {
  const char* key = "ek_anchor_relaxations";
  if (!v.is_object()) return Invalid(key, "expected an object: anchor SHA-256 -> list of relaxations");
  out->clear();
  for (const auto& [anchor, names] : v.items()) {
    if (anchor.size() != 64 || !hex::Decode(anchor, 32)) {
      return Invalid(key, "'" + anchor.substr(0, 80) +
                              "' is not an anchor's SHA-256 (64 hex digits; `rackgatectl ek roots` lists them)");
    }
    std::vector<std::string> list;
    if (Status s = ReadStrings(names, std::string(key) + "." + anchor, &list); !s.ok()) return s;
    if (list.empty()) return Invalid(std::string(key) + "." + anchor, "grants nothing: give a relaxation or remove it");
    (*out)[anchor] = std::move(list);
  }
  return Status::Ok();
}

// --- Webhooks (docs/events.md) ------------------------------------------------

// The authority of a scheme://authority/... URL ("" when there is none).
std::string_view UrlAuthority(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return "";
  std::string_view rest = url.substr(scheme + 3);
  return rest.substr(0, rest.find_first_of("/?#"));
}

// The host of a URL's authority, brackets kept for IPv6 ("" when none).
std::string UrlHost(std::string_view url) {
  std::string_view authority = UrlAuthority(url);
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    return close == std::string_view::npos ? "" : std::string(authority.substr(0, close + 1));
  }
  return std::string(authority.substr(0, authority.find(':')));
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "[::1]") return true;
  // 127.0.0.0/8, written as four decimal octets.
  if (host.rfind("127.", 0) != 0) return false;
  int dots = 0;
  for (char ch : host) {
    if (ch == '.') ++dots;
    else if (ch < '0' || ch > '9') return false;
  }
  return dots == 3;
}

// --- Observability (docs/observability.md) -------------------------------------

// "HOST:PORT" or "[V6]:PORT", port 1-65535; the address literal is checked at bind.
Status ReadListen(const json& v, const std::string& key, std::string* address, uint16_t* port) {
  std::string text;
  if (Status s = ReadString(v, key, &text); !s.ok()) return s;
  if (text.empty()) {
    address->clear();
    *port = 0;
    return Status::Ok();
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return Invalid(key, "expected HOST:PORT, e.g. 127.0.0.1:9622");
  std::string host = text.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return Invalid(key, "expected [IPV6]:PORT, e.g. [::1]:9622");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return Invalid(key, "write an IPv6 address in brackets, e.g. [::1]:9622");
  }
  const std::string digits = text.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(digits) < 1 || std::stoi(digits) > 65535) {
    return Invalid(key, "the port must be between 1 and 65535");
  }
  *address = host;
  *port = static_cast<uint16_t>(std::stoi(digits));
  return Status::Ok();
}

Status ReadMetrics(const json& v, Config* c) {
  if (!v.is_object()) return Invalid("metrics", "expected an object");
  Config::MetricsSettings& m = c->metrics;
  for (const auto& [k, value] : v.items()) {
    Status s = k == "listen"   ? ReadListen(value, "metrics.listen", &m.listen_address, &m.listen_port)
               : k == "public" ? ReadBool(value, "metrics.public", &m.public_port)
               : k == "audited_refusals_per_minute"
                   ? ReadInt(value, "metrics.audited_refusals_per_minute", 0, 100000, &m.audited_refusals_per_minute)
                   : Invalid("metrics." + k, "unknown key");
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status ReadKubernetes(const json& v, Config* c) {
  if (!v.is_object()) return Invalid("kubernetes", "expected an object");
  Config::Kubernetes k;
  for (const auto& [key, value] : v.items()) {
    const std::string name = "kubernetes." + key;
    Status s = key == "kubeconfig"   ? ReadString(value, name, &k.kubeconfig)
               : key == "context"    ? ReadString(value, name, &k.context)
               : key == "in_cluster" ? ReadBool(value, name, &k.in_cluster)
               : key == "bootstrapper_groups" ? ReadStrings(value, name, &k.bootstrapper_groups)
               : key == "max_attestation_age_seconds"
                   ? ReadInt(value, name, 60, 366 * 86400, &k.max_attestation_age_seconds)
                   : Invalid(name, "unknown key");
    if (!s.ok()) return s;
  }
  if (k.in_cluster && !k.kubeconfig.empty()) {
    return Invalid("kubernetes", "set kubeconfig or in_cluster, not both");
  }
  if (!k.in_cluster && k.kubeconfig.empty()) {
    return Invalid("kubernetes", "needs kubeconfig (a file) or in_cluster: true; leave the section out for none");
  }
  if (k.bootstrapper_groups.empty() || k.bootstrapper_groups.size() > 16) {
    return Invalid("kubernetes.bootstrapper_groups", "lists 1 to 16 groups");
  }
  c->kubernetes = std::move(k);
  return Status::Ok();
}

Status ReadWebhooks(const json& v, Config* c) {
  if (!v.is_array()) return Invalid("webhooks", "expected a list of objects");
  c->webhooks.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const json& w = v[i];
    const std::string key = "webhooks[" + std::to_string(i) + "]";
    if (!w.is_object()) return Invalid(key, "expected an object");
    Config::Webhook hook;
    for (const auto& [k, value] : w.items()) {
      Status s = k == "url"           ? ReadString(value, key + ".url", &hook.url)
                 : k == "secret_file" ? ReadString(value, key + ".secret_file", &hook.secret_file)
                 : k == "events"      ? ReadStrings(value, key + ".events", &hook.events)
                 : k == "ca_file"     ? ReadString(value, key + ".ca_file", &hook.ca_file)
                                      : Invalid(key + "." + k, "unknown key");
      if (!s.ok()) return s;
    }
    if (hook.url.size() > 2048) return Invalid(key + ".url", "longer than 2048 characters");
    const bool https = hook.url.rfind("https://", 0) == 0;
    const bool http = hook.url.rfind("http://", 0) == 0;
    const std::string host = UrlHost(hook.url);
    if ((!https && !http) || host.empty()) return Invalid(key + ".url", "expected an https:// URL");
    // Credentials in the URL would be logged with it; the HMAC secret is
    // the webhook's only credential.
    if (UrlAuthority(hook.url).find('@') != std::string_view::npos) {
      return Invalid(key + ".url", "must not carry user:password");
    }
    // The HMAC proves who sent an event but hides nothing: hostnames, pools
    // and why machines were revoked would cross the network in clear text.
    // Plain HTTP is only for a receiver on this host (a local relay, the lab).
    if (http && !IsLoopbackHost(host)) {
      return Invalid(key + ".url", "http:// is allowed only to a loopback host (127.0.0.0/8, [::1], localhost)");
    }
    if (hook.secret_file.empty()) return Invalid(key + ".secret_file", "required");
    for (const std::string& t : hook.events) {
      if (!core::IsEventType(t)) return Invalid(key + ".events", "unknown event type '" + t + "'");
    }
    for (const Config::Webhook& other : c->webhooks) {
      if (other.url == hook.url) return Invalid(key + ".url", "listed twice");
    }
    c->webhooks.push_back(std::move(hook));
  }
  return Status::Ok();
}

// --- The store (docs/ha.md) ------------------------------------------------------

// SECURITY: no message here repeats the value, which may hold a password.
Status CheckDatabase(const Config& c) {
  const std::string& d = c.database;
  constexpr char kForms[] =
      "expected an absolute path or sqlite:PATH (SQLite), or postgresql://USER@HOST[:PORT][,HOST2...]/DBNAME "
      "(PostgreSQL); leave it out for STATE_DIR/rackgate.db";
  if (d.empty()) {
    if (!c.database_password_file.empty()) {
      return Invalid("database_password_file", "is for a postgresql:// database only");
    }
    return Status::Ok();
  }
  if (d.size() > 4096 || d.find_first_of("\r\n") != std::string::npos || d.find('\0') != std::string::npos) {
    return Invalid("database", kForms);
  }
  if (storage::IsServerDatabase(d)) {
    const size_t rest = d.find("://") + 3;
    if (d.size() == rest) return Invalid("database", kForms);
    return Status::Ok();
  }
  if (!c.database_password_file.empty()) {
    return Invalid("database_password_file", "is for a postgresql:// database only");
  }
  const std::string path = storage::DatabaseFile(d).value_or("");
  if (path.empty() || path.front() != '/') return Invalid("database", kForms);
  return Status::Ok();
}

using KeyReader = std::function<Status(const json&, Config*)>;

const std::map<std::string, KeyReader>& Readers() {
  static const auto* readers = new std::map<std::string, KeyReader>{
      {"state_dir", [](const json& v, Config* c) { return ReadString(v, "state_dir", &c->state_dir); }},
      {"listen_addresses",
       [](const json& v, Config* c) { return ReadStrings(v, "listen_addresses", &c->listen_addresses); }},
      {"port", [](const json& v, Config* c) { return ReadInt(v, "port", 0, 65535, &c->port); }},
      {"tls_certificate",
       [](const json& v, Config* c) { return ReadString(v, "tls_certificate", &c->tls_certificate); }},
      {"tls_key", [](const json& v, Config* c) { return ReadString(v, "tls_key", &c->tls_key); }},
      {"admin_socket",
       [](const json& v, Config* c) { return ReadString(v, "admin_socket", &c->admin_socket); }},
      {"admin_group", [](const json& v, Config* c) { return ReadString(v, "admin_group", &c->admin_group); }},
      {"ek_roots", [](const json& v, Config* c) { return ReadStrings(v, "ek_roots", &c->ek_roots); }},
      {"ek_intermediates",
       [](const json& v, Config* c) { return ReadStrings(v, "ek_intermediates", &c->ek_intermediates); }},
      {"ek_anchor_relaxations",
       [](const json& v, Config* c) { return ReadAnchorRelaxations(v, &c->ek_anchor_relaxations); }},
      {"require_ek_certificate",
       [](const json& v, Config* c) {
         return ReadBool(v, "require_ek_certificate", &c->require_ek_certificate);
       }},
      {"discovery", [](const json& v, Config* c) { return ReadBool(v, "discovery", &c->discovery); }},
      {"discovery_pool",
       [](const json& v, Config* c) { return ReadString(v, "discovery_pool", &c->discovery_pool); }},
      {"session_ttl_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "session_ttl_seconds", 5, 3600, &c->session_ttl_seconds);
       }},
      {"token_ttl_seconds",
       [](const json& v, Config* c) { return ReadInt(v, "token_ttl_seconds", 30, 86400, &c->token_ttl_seconds); }},
      {"retry_after_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "retry_after_seconds", 1, 3600, &c->retry_after_seconds);
       }},
      {"default_pcr_selection",
       [](const json& v, Config* c) {
         return ReadString(v, "default_pcr_selection", &c->default_pcr_selection);
       }},
      {"max_body_bytes",
       [](const json& v, Config* c) {
         return ReadInt(v, "max_body_bytes", 1024, 64 << 20, &c->max_body_bytes);
       }},
      {"admin_max_body_bytes",
       [](const json& v, Config* c) {
         return ReadInt(v, "admin_max_body_bytes", 1024, 256 << 20, &c->admin_max_body_bytes);
       }},
      {"connection_timeout_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "connection_timeout_seconds", 1, 3600, &c->connection_timeout_seconds);
       }},
      {"per_client_connections",
       [](const json& v, Config* c) {
         return ReadInt(v, "per_client_connections", 1, 100000, &c->per_client_connections);
       }},
      {"max_connections",
       [](const json& v, Config* c) { return ReadInt(v, "max_connections", 1, 1000000, &c->max_connections); }},
      {"threads", [](const json& v, Config* c) { return ReadInt(v, "threads", 1, 64, &c->threads); }},
      {"handler_threads",
       [](const json& v, Config* c) { return ReadInt(v, "handler_threads", 0, 256, &c->handler_threads); }},
      {"drain_timeout_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "drain_timeout_seconds", 0, 600, &c->drain_timeout_seconds);
       }},
      {"max_open_sessions",
       [](const json& v, Config* c) { return ReadInt(v, "max_open_sessions", 1, 1000000, &c->max_open_sessions); }},
      {"max_open_sessions_per_client",
       [](const json& v, Config* c) {
         return ReadInt(v, "max_open_sessions_per_client", 1, 1000000, &c->max_open_sessions_per_client);
       }},
      {"busy_queue_delay_ms",
       [](const json& v, Config* c) {
         return ReadInt(v, "busy_queue_delay_ms", 0, 60000, &c->busy_queue_delay_ms);
       }},
      {"busy_retry_after_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "busy_retry_after_seconds", 1, 300, &c->busy_retry_after_seconds);
       }},
      {"public_url", [](const json& v, Config* c) { return ReadString(v, "public_url", &c->public_url); }},
      // Several appliances (docs/agent.md).
      {"public_urls", [](const json& v, Config* c) { return ReadStrings(v, "public_urls", &c->public_urls); }},
      {"ignition_validate",
       [](const json& v, Config* c) { return ReadString(v, "ignition_validate", &c->ignition_validate); }},
      // The agent bundle (docs/nodes.md).
      {"agent_bundle", [](const json& v, Config* c) { return ReadString(v, "agent_bundle", &c->agent_bundle); }},
      {"kubernetes", ReadKubernetes},  // approver mode (docs/kubernetes.md)
      {"cluster_ca_certificate",
       [](const json& v, Config* c) { return ReadString(v, "cluster_ca_certificate", &c->cluster_ca_certificate); }},
      {"cluster_ca_key",
       [](const json& v, Config* c) { return ReadString(v, "cluster_ca_key", &c->cluster_ca_key); }},
      {"client_csr_window_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "client_csr_window_seconds", 60, 30 * 86400, &c->client_csr_window_seconds);
       }},
      {"client_certificate_validity_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "client_certificate_validity_seconds", 60, 10 * 365 * 86400,
                        &c->client_certificate_validity_seconds);
       }},
      {"serving_certificate_validity_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "serving_certificate_validity_seconds", 60, 10 * 365 * 86400,
                        &c->serving_certificate_validity_seconds);
       }},
      {"max_csrs_in_flight",
       [](const json& v, Config* c) { return ReadInt(v, "max_csrs_in_flight", 1, 100000, &c->max_csrs_in_flight); }},
      {"max_csrs_in_flight_per_machine",
       [](const json& v, Config* c) {
         return ReadInt(v, "max_csrs_in_flight_per_machine", 1, 64, &c->max_csrs_in_flight_per_machine);
       }},
      {"log_level", [](const json& v, Config* c) { return ReadString(v, "log_level", &c->log_level); }},
      // The store (docs/ha.md).
      {"database", [](const json& v, Config* c) { return ReadString(v, "database", &c->database); }},
      {"database_password_file",
       [](const json& v, Config* c) {
         return ReadString(v, "database_password_file", &c->database_password_file);
       }},
      {"database_wait_seconds",
       [](const json& v, Config* c) {
         return ReadInt(v, "database_wait_seconds", 0, 86400, &c->database_wait_seconds);
       }},
      {"webhooks", ReadWebhooks},
      // Observability (docs/observability.md).
      {"metrics", ReadMetrics},
  };
  return *readers;
}

}  // namespace

Result<Config> ParseConfig(std::string_view json_text) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument("config_invalid", "config is not valid JSON");
  if (!doc.is_object()) return Status::InvalidArgument("config_invalid", "config must be a JSON object");
  Config c;
  for (const auto& [key, value] : doc.items()) {
    auto it = Readers().find(key);
    if (it == Readers().end()) return Invalid(key, "unknown key");
    if (Status s = it->second(value, &c); !s.ok()) return s;
  }
  if (c.listen_addresses.empty()) return Invalid("listen_addresses", "needs at least one address");
  if (c.state_dir.empty()) return Invalid("state_dir", "must not be empty");
  if (!c.public_url.empty() && c.public_url.rfind("https://", 0) != 0) {
    return Invalid("public_url", "must start with https://");
  }
  // Several appliances (docs/agent.md): the agent's list, joined by commas.
  if (c.public_urls.size() > 16) return Invalid("public_urls", "lists at most 16 appliances");
  for (const std::string& u : c.public_urls) {
    if (u.rfind("https://", 0) != 0 || u.size() <= 8 ||
        u.find_first_of(", \t\r\n/?#@", 8) != std::string::npos) {
      return Invalid("public_urls", "each must be https://HOST[:PORT] (no path, no comma)");
    }
  }
  if (auto sel = attest::ParsePcrSelectionList(c.default_pcr_selection); !sel.ok()) {
    return Invalid("default_pcr_selection", sel.status().message());
  }
  if (Status s = CheckDatabase(c); !s.ok()) return s;
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  if (std::find(std::begin(kLevels), std::end(kLevels), c.log_level) == std::end(kLevels)) {
    return Invalid("log_level", "expected trace, debug, info, warn, error, critical or off");
  }
  return c;
}

bool Config::database_is_server() const { return storage::IsServerDatabase(database); }

std::string Config::database_path() const {
  if (database.empty()) return state_dir + "/rackgate.db";
  return storage::DatabaseFile(database).value_or("");
}

Result<std::string> DatabaseForStore(const Config& config) {
  if (!config.database_is_server()) return config.database_path();
  if (config.database_password_file.empty()) return config.database;
  const std::string& file = config.database_password_file;
  const std::string key = "database_password_file";
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) return Invalid(key, "cannot read " + file);
  // SECURITY: a password file others can read is a leaked password: refuse
  // it at start rather than use it.
  if ((st.st_mode & 0037) != 0) {
    return Invalid(key, file + " is readable or writable by others: run `chmod 0600 " + file + "`");
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return Invalid(key, file + " belongs to another user: run `chown rackgate " + file + "`");
  }
  std::ifstream f(file);
  if (!f) return Invalid(key, "cannot read " + file);
  std::string secret(1025, '\0');
  f.read(secret.data(), static_cast<std::streamsize>(secret.size()));
  secret.resize(static_cast<size_t>(f.gcount()));
  if (secret.size() > 1024) return Invalid(key, file + " is over 1 KiB");
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return Invalid(key, file + " is empty");
  const std::string& url = config.database;
  const char sep = url.find('?') == std::string::npos ? '?' : '&';
  return url + sep + "password=" + hex::PercentEncode(secret);
}

Result<Config> LoadConfig(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::IoError("config_unreadable", "cannot read config file " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (ss.str().size() > (1 << 20)) return Status::InvalidArgument("config_invalid", "config file over 1 MiB");
  auto c = ParseConfig(ss.str());
  if (!c.ok()) return c.status().Annotate(path);
  return c;
}

}  // namespace rackgate::daemon
