// Kubelet credential files and kubeconfig.
#include "agent/kubelet.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "agent/rootfs.h"

namespace rackgate::agent {

namespace {

std::span<const uint8_t> AsBytes(std::string_view s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

Status EnsureDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("io_failed", "mkdir " + dir + ": " + ec.message());
  return Status::Ok();
}

// A YAML scalar as a JSON string: YAML 1.2 reads double-quoted JSON strings
// as they are, so no value can break out of its line.
std::string Quote(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

}  // namespace

Status WriteInDir(const std::string& dir, const std::string& name, std::string_view data, unsigned mode) {
  if (Status s = EnsureDir(dir); !s.ok()) return s;
  auto root = Root::Open(dir);
  if (!root.ok()) return root.status();
  return root->WriteFile("/" + name, AsBytes(data), static_cast<mode_t>(mode), {}, true);
}

Result<std::string> WriteKubeletPair(const std::string& dir, const char* prefix, std::string_view cert_pem,
                                     std::optional<std::string_view> key_pem, std::time_t now) {
  struct tm tm;
  if (gmtime_r(&now, &tm) == nullptr) return Status::InvalidArgument("clock_invalid", "bad time");
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H-%M-%S", &tm);
  const std::string file = std::string(prefix) + "-" + stamp + ".pem";
  std::string data(cert_pem);
  if (key_pem) data += *key_pem;
  // 0600: the file holds the private key.
  if (Status s = WriteInDir(dir, file, data, 0600); !s.ok()) return s;
  auto root = Root::Open(dir);
  if (!root.ok()) return root.status();
  const std::string current = std::string(prefix) + "-current.pem";
  // Relative, as kubelet makes it: the directory can move as a whole.
  if (Status s = root->Symlink("/" + current, file, {}, true); !s.ok()) return s;
  return (std::filesystem::path(dir) / current).string();
}

std::string RenderKubeconfig(std::string_view server, std::string_view ca_file, std::string_view client_cert,
                             std::string_view client_key) {
  std::string y;
  y += "apiVersion: v1\n";
  y += "kind: Config\n";
  y += "clusters:\n";
  y += "- cluster:\n";
  y += "    certificate-authority: " + Quote(ca_file) + "\n";
  y += "    server: " + Quote(server) + "\n";
  y += "  name: default-cluster\n";
  y += "contexts:\n";
  y += "- context:\n";
  y += "    cluster: default-cluster\n";
  y += "    namespace: default\n";
  y += "    user: default-auth\n";
  y += "  name: default-context\n";
  y += "current-context: default-context\n";
  y += "preferences: {}\n";
  y += "users:\n";
  y += "- name: default-auth\n";
  y += "  user:\n";
  y += "    client-certificate: " + Quote(client_cert) + "\n";
  if (!client_key.empty()) y += "    client-key: " + Quote(client_key) + "\n";
  return y;
}

std::string ChosenApiserver(const std::string& flag, const wire::MachineRecord& machine) {
  // The flag wins: an operator who names the API server on the node means it.
  return flag.empty() ? machine.apiserver : flag;
}

std::vector<std::string> ChosenNodeIps(const std::vector<std::string>& flags, const wire::MachineRecord& machine) {
  return flags.empty() ? machine.addresses : flags;
}

}  // namespace rackgate::agent
