// Reading a kubeconfig (yaml-cpp) and a pod's service account.
#include "kube/kubeconfig.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "base/base64.h"
#include "base/files.h"
#include "base/text.h"

namespace rackgate::kube {

namespace {

constexpr size_t kMaxServerChars = 2048;
constexpr size_t kMaxTokenBytes = 16 * 1024;
// What a message may carry of a name or a server the kubeconfig chose
// (text::PrintableAscii: no control bytes into a message or a terminal).
constexpr size_t kMaxShownChars = 200;
constexpr std::string_view kSupported =
    "supported: token, tokenFile, client-certificate(-data) with client-key(-data)";

Status Invalid(std::string_view where, std::string_view why) {
  return Status::InvalidArgument("kubeconfig_invalid", std::string(where) + ": " + std::string(why));
}

Status Unsupported(std::string_view where, std::string_view why) {
  return Status::Unsupported("kubeconfig_unsupported", std::string(where) + ": " + std::string(why));
}

// A file the kubeconfig names, or the kubeconfig itself. Only the path and
// the failure go into a message, never the content.
Result<std::string> ReadText(const std::string& path, std::string_view what) {
  Result<std::vector<uint8_t>> bytes = ReadFile(path, kMaxKubeconfigBytes);
  if (!bytes.ok()) {
    if (bytes.status().reason() == "file_too_large") {
      return Invalid(path, std::string(what) + " is larger than " + std::to_string(kMaxKubeconfigBytes) + " bytes");
    }
    return Status::IoError("kubeconfig_unreadable", "cannot read " + std::string(what) + " " + path);
  }
  return std::string(bytes->begin(), bytes->end());
}

// A map's scalar value; nullopt when absent or null. *bad when present but
// not a scalar.
std::optional<std::string> Scalar(const YAML::Node& map, const char* key, bool* bad) {
  const YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  if (!v.IsScalar()) {
    *bad = true;
    return std::nullopt;
  }
  return v.Scalar();
}

// The entry of `list` (clusters, users, contexts) whose name is `name`: its
// inner map (`inner`: "cluster", "user", "context").
Result<YAML::Node> FindNamed(const YAML::Node& root, const char* list, const char* inner, const std::string& name,
                             const std::string& where) {
  // IsDefined() first: yaml-cpp throws from any other question to a node a
  // missing key returned.
  const YAML::Node entries = root[list];
  const bool present = entries.IsDefined() && !entries.IsNull();
  if (present && !entries.IsSequence()) return Invalid(where, std::string(list) + " is not a list");
  if (present) {
    for (const YAML::Node& e : entries) {
      bool bad = false;
      if (!e.IsMap() || Scalar(e, "name", &bad) != name) continue;
      const YAML::Node v = e[inner];
      if (!v.IsDefined() || !v.IsMap()) {
        return Invalid(where, std::string(list) + " entry \"" + text::PrintableAscii(name, kMaxShownChars) +
                                  "\" has no " + inner);
      }
      return v;
    }
  }
  return Invalid(where,
                 std::string(inner) + " \"" + text::PrintableAscii(name, kMaxShownChars) + "\" not found in " + list);
}

std::string Resolve(const std::string& file, const std::string& kubeconfig) {
  if (!file.empty() && file[0] == '/') return file;
  const std::filesystem::path dir = std::filesystem::path(kubeconfig).parent_path();
  return dir.empty() ? file : (dir / file).string();
}

// SECURITY: the server must be https: the token or the client key is sent to
// it, and its CA is the only proof it is the cluster.
Status CheckServer(std::string* server, std::string_view where) {
  if (server->empty()) return Invalid(where, "server is missing");
  if (server->size() > kMaxServerChars) return Invalid(where, "server is too long");
  for (char c : *server) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return Invalid(where, "server has spaces or control characters");
    }
  }
  if (server->rfind("http://", 0) == 0) {
    return Unsupported(where, "server " + text::PrintableAscii(*server, kMaxShownChars) +
                                  " is http://; the API server must be reached over https://");
  }
  if (server->rfind("https://", 0) != 0 || server->size() == 8) {
    return Invalid(where, "server " + text::PrintableAscii(*server, kMaxShownChars) + " is not an https:// URL");
  }
  while (server->size() > 8 && server->back() == '/') server->pop_back();
  return Status::Ok();
}

bool LooksLikePem(const std::string& text, std::string_view label_end) {
  return text.find("-----BEGIN ") != std::string::npos && text.find(label_end) != std::string::npos;
}

// A `*-data` field (base64) or its file twin; both is an error. *out empty
// when neither is set.
Status DataOrFile(const YAML::Node& map, const char* data_key, const char* file_key, const std::string& kubeconfig,
                  std::string_view where, std::string* out) {
  bool bad = false;
  const std::optional<std::string> data = Scalar(map, data_key, &bad);
  const std::optional<std::string> file = Scalar(map, file_key, &bad);
  if (bad) return Invalid(where, std::string(data_key) + " or " + file_key + " is not a string");
  if (data && file) return Invalid(where, std::string("set one of ") + data_key + " and " + file_key + ", not both");
  if (data) {
    std::optional<std::string> decoded = base64::DecodeToString(*data, kMaxKubeconfigBytes);
    if (!decoded) return Invalid(where, std::string(data_key) + " is not base64");
    *out = std::move(*decoded);
  } else if (file) {
    Result<std::string> text = ReadText(Resolve(*file, kubeconfig), file_key);
    if (!text.ok()) return text.status();
    *out = std::move(*text);
  }
  return Status::Ok();
}

// A bearer token as read (a file's trailing newline dropped): printable
// ASCII without spaces, since it goes into an HTTP header.
Status CheckToken(std::string* token, std::string_view where) {
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r' || token->back() == ' ')) {
    token->pop_back();
  }
  if (token->empty()) return Invalid(where, "the token is empty");
  if (token->size() > kMaxTokenBytes) return Invalid(where, "the token is too long");
  for (char c : *token) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return Invalid(where, "the token has spaces or control characters");
    }
  }
  return Status::Ok();
}

Status ReadCluster(const YAML::Node& cluster, const std::string& kubeconfig, std::string_view where,
                   Credentials* out) {
  bool bad = false;
  const std::optional<std::string> skip = Scalar(cluster, "insecure-skip-tls-verify", &bad);
  // SECURITY: without verification anyone on the path could answer as the
  // cluster and collect our credentials; there is no way to ask for it.
  if (skip && *skip != "false") {
    return Unsupported(where, "insecure-skip-tls-verify is set; remove it and give the cluster's CA "
                              "(certificate-authority or certificate-authority-data)");
  }
  for (const char* key : {"tls-server-name", "proxy-url"}) {
    if (cluster[key].IsDefined() && !cluster[key].IsNull()) {
      return Unsupported(where, std::string(key) + " is not supported; remove it");
    }
  }
  out->server = Scalar(cluster, "server", &bad).value_or("");
  if (bad) return Invalid(where, "server is not a string");
  Status s = CheckServer(&out->server, where);
  if (!s.ok()) return s;
  s = DataOrFile(cluster, "certificate-authority-data", "certificate-authority", kubeconfig, where, &out->ca_pem);
  if (!s.ok()) return s;
  if (out->ca_pem.empty()) {
    return Invalid(where, "no certificate-authority or certificate-authority-data: the cluster's CA is required "
                          "(the system trust store is never used)");
  }
  if (!LooksLikePem(out->ca_pem, "CERTIFICATE-----")) return Invalid(where, "the cluster's CA is not a PEM certificate");
  return Status::Ok();
}

Status ReadToken(const YAML::Node& user, const std::string& kubeconfig, std::string_view where, Credentials* out) {
  bool bad = false;
  const std::optional<std::string> token = Scalar(user, "token", &bad);
  const std::optional<std::string> token_file = Scalar(user, "tokenFile", &bad);
  if (bad) return Invalid(where, "token or tokenFile is not a string");
  if (token && token_file) return Invalid(where, "set one of token and tokenFile, not both");
  if (token) {
    out->bearer_token = *token;
  } else if (token_file) {
    Result<std::string> text = ReadText(Resolve(*token_file, kubeconfig), "tokenFile");
    if (!text.ok()) return text.status();
    out->bearer_token = std::move(*text);
  } else {
    return Status::Ok();
  }
  return CheckToken(&out->bearer_token, where);
}

Status ReadUser(const YAML::Node& user, const std::string& kubeconfig, std::string_view where, Credentials* out) {
  for (const char* key : {"exec", "auth-provider"}) {
    if (user[key].IsDefined() && !user[key].IsNull()) {
      return Unsupported(where, std::string(key) + " plugins are not supported; " + std::string(kSupported));
    }
  }
  for (const char* key : {"username", "password"}) {
    if (user[key].IsDefined() && !user[key].IsNull()) {
      return Unsupported(where, "basic authentication (username/password) is not supported; " + std::string(kSupported));
    }
  }
  Status s = ReadToken(user, kubeconfig, where, out);
  if (s.ok()) {
    s = DataOrFile(user, "client-certificate-data", "client-certificate", kubeconfig, where, &out->client_cert_pem);
  }
  if (s.ok()) s = DataOrFile(user, "client-key-data", "client-key", kubeconfig, where, &out->client_key_pem);
  if (!s.ok()) return s;
  if (out->client_cert_pem.empty() != out->client_key_pem.empty()) {
    return Invalid(where, "a client certificate needs its key and a key its certificate");
  }
  if (!out->client_cert_pem.empty() && !LooksLikePem(out->client_cert_pem, "CERTIFICATE-----")) {
    return Invalid(where, "the client certificate is not a PEM certificate");
  }
  if (!out->client_key_pem.empty() && !LooksLikePem(out->client_key_pem, "PRIVATE KEY-----")) {
    return Invalid(where, "the client key is not a PEM private key");
  }
  if (out->bearer_token.empty() && out->client_cert_pem.empty()) {
    return Invalid(where, "no credentials; " + std::string(kSupported));
  }
  return Status::Ok();
}

Result<Credentials> FromDocument(const YAML::Node& root, const std::string& path, const std::string& context) {
  if (!root.IsMap()) return Invalid(path, "not a kubeconfig (no YAML mapping at the top)");
  bool bad = false;
  const std::string name = context.empty() ? Scalar(root, "current-context", &bad).value_or("") : context;
  if (bad) return Invalid(path, "current-context is not a string");
  if (name.empty()) return Invalid(path, "no current-context; name a context");
  Result<YAML::Node> ctx = FindNamed(root, "contexts", "context", name, path);
  if (!ctx.ok()) return ctx.status();
  const std::optional<std::string> cluster_name = Scalar(*ctx, "cluster", &bad);
  const std::optional<std::string> user_name = Scalar(*ctx, "user", &bad);
  if (bad || !cluster_name || !user_name) {
    return Invalid(path, "context \"" + text::PrintableAscii(name, kMaxShownChars) + "\" needs a cluster and a user");
  }
  Result<YAML::Node> cluster = FindNamed(root, "clusters", "cluster", *cluster_name, path);
  if (!cluster.ok()) return cluster.status();
  Result<YAML::Node> user = FindNamed(root, "users", "user", *user_name, path);
  if (!user.ok()) return user.status();
  Credentials out;
  Status s = ReadCluster(*cluster, path,
                         path + ": cluster \"" + text::PrintableAscii(*cluster_name, kMaxShownChars) + "\"", &out);
  if (s.ok()) {
    s = ReadUser(*user, path, path + ": user \"" + text::PrintableAscii(*user_name, kMaxShownChars) + "\"", &out);
  }
  if (!s.ok()) return s;
  return out;
}

}  // namespace

Result<Credentials> LoadKubeconfig(const std::string& path, const std::string& context) {
  Result<std::string> text = ReadText(path, "the kubeconfig");
  if (!text.ok()) return text.status();
  try {
    return FromDocument(YAML::Load(*text), path, context);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's message names a line and column, not the content.
    return Invalid(path, "not YAML: " + text::PrintableAscii(e.what(), kMaxShownChars));
  }
}

Result<Credentials> InClusterCredentials(const InClusterPaths& paths) {
  const char* host = std::getenv(paths.host_env.c_str());
  const char* port = std::getenv(paths.port_env.c_str());
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return Status::InvalidArgument("in_cluster_unavailable", paths.host_env + " and " + paths.port_env +
                                                                 " are not set: not running in a pod; "
                                                                 "give a kubeconfig instead");
  }
  const std::string_view p(port);
  if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string_view::npos) {
    return Status::InvalidArgument("in_cluster_unavailable", paths.port_env + " is not a port number");
  }
  const std::string_view h(host);
  const bool v6 = h.find(':') != std::string_view::npos;
  Credentials out;
  out.server = "https://" + (v6 ? "[" + std::string(h) + "]" : std::string(h)) + ":" + std::string(p);
  Status s = CheckServer(&out.server, paths.host_env);
  if (!s.ok()) return Status::InvalidArgument("in_cluster_unavailable", s.message());
  Result<std::string> token = ReadText(paths.token_file, "the service account token");
  if (!token.ok()) return token.status();
  out.bearer_token = std::move(*token);
  s = CheckToken(&out.bearer_token, paths.token_file);
  if (!s.ok()) return s;
  Result<std::string> ca = ReadText(paths.ca_file, "the service account CA");
  if (!ca.ok()) return ca.status();
  out.ca_pem = std::move(*ca);
  if (!LooksLikePem(out.ca_pem, "CERTIFICATE-----")) return Invalid(paths.ca_file, "not a PEM certificate");
  return out;
}

}  // namespace rackgate::kube
