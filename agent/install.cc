#include "agent/install.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

#include "agent/agent.h"
#include "agent/renewal.h"
#include "base/files.h"

namespace rackgate::agent {

namespace {

namespace fs = std::filesystem;

// The largest file of the bundle is libcrypto (4.9 MB); nothing of it comes
// near this.
constexpr size_t kMaxBundleFileBytes = 64u << 20;
// The units the bundle carries, and the target each is enabled for.
constexpr struct {
  const char* name;
  const char* wanted_by;
} kUnits[] = {{"rackgate-agent.service", "multi-user.target"}, {"rackgate-agent-renew.timer", "timers.target"}};

std::span<const uint8_t> TextBytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

Status CheckBundle(const std::string& dir) {
  std::error_code ec;
  for (const char* part : {"rackgate-agent", "lib/ld-linux-x86-64.so.2", "systemd/rackgate-agent.service",
                           "systemd/rackgate-agent-renew.timer"}) {
    if (!fs::is_regular_file(fs::path(dir) / part, ec)) {
      return Status::InvalidArgument("bundle_invalid", dir + " has no " + part + " (not the agent bundle)");
    }
  }
  return Status::Ok();
}

// One entry of the bundle's tree, at `dest` in the root.
Status CopyEntry(const fs::directory_entry& e, const std::string& dest, Root* root) {
  std::error_code ec;
  const fs::file_status st = e.symlink_status(ec);
  if (ec) return Status::IoError("io_failed", e.path().string() + ": " + ec.message());
  if (fs::is_symlink(st)) {
    const fs::path target = fs::read_symlink(e.path(), ec);
    if (ec) return Status::IoError("io_failed", e.path().string() + ": " + ec.message());
    return root->Symlink(dest, target.string(), Owner{}, true);
  }
  const mode_t mode = static_cast<mode_t>(st.permissions()) & 07777;
  if (fs::is_directory(st)) return root->MakeDirectory(dest, mode, Owner{});
  if (!fs::is_regular_file(st)) return Status::InvalidArgument("bundle_invalid", e.path().string() + ": not a file");
  auto data = ReadFile(e.path().string(), kMaxBundleFileBytes);
  if (!data.ok()) return data.status();
  return root->WriteFile(dest, *data, mode, Owner{}, true);
}

// The bundle's tree at kInstalledDir, but for its systemd/ directory.
Status CopyBundle(const std::string& dir, Root* root) {
  if (Status s = root->MakeDirectory(kInstalledDir, 0755, Owner{}); !s.ok()) return s;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    // Lexical: fs::relative would resolve a link to what it points at.
    const std::string rel = it->path().lexically_relative(dir).string();
    if (rel == "systemd") {
      it.disable_recursion_pending();
      continue;
    }
    if (Status s = CopyEntry(*it, std::string(kInstalledDir) + "/" + rel, root); !s.ok()) return s;
  }
  if (ec) return Status::IoError("io_failed", dir + ": " + ec.message());
  return Status::Ok();
}

Status InstallUnits(const std::string& dir, Root* root) {
  for (const auto& unit : kUnits) {
    auto text = ReadFile(dir + "/systemd/" + unit.name, 1 << 20);
    if (!text.ok()) return text.status();
    const std::string path = std::string(kUnitDir) + "/" + unit.name;
    if (Status s = root->WriteFile(path, *text, 0644, Owner{}, true); !s.ok()) return s;
    const std::string link = std::string(kUnitDir) + "/" + unit.wanted_by + ".wants/" + unit.name;
    if (Status s = root->Symlink(link, path, Owner{}, true); !s.ok()) return s;
  }
  return Status::Ok();
}

// `path` as the real root sees it when it is under `install_root`.
std::string Rebased(const std::string& path, const std::string& install_root) {
  const fs::path root = fs::path(install_root).lexically_normal();
  const fs::path p = fs::path(path).lexically_normal();
  if (root == "/" || root.empty() || !p.is_absolute()) return path;
  const fs::path rel = p.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..") return path;
  return rel == "." ? "/" : "/" + rel.string();
}

// SECURITY: RACKGATE_AGENT_ARGS is read by systemd (EnvironmentFile=, then
// $VAR split on whitespace): a value that could be split, quoted or
// expanded there would reach the later boots as other flags.
bool SafeArgValue(std::string_view v) {
  for (char c : v) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || c == '"' || c == '\'' || c == '\\' || c == '$' ||
        c == '%' || c == '`') {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<std::vector<std::string>> InstalledAgentArgs(const AgentOptions& o, const std::string& tcti,
                                                    const std::string& install_root, bool config_stamped) {
  std::vector<std::string> args;
  std::string unsafe;
  auto add = [&](const char* flag, const std::string& value) {
    if (!SafeArgValue(value)) unsafe = flag;
    args.push_back(std::string(flag) + "=" + value);
  };
  if (tcti != kDefaultTcti) add("--tcti", tcti);
  if (o.ek != EkPreference::kAny) add("--ek-alg", EkPreferenceArg(o.ek));
  if (o.ak != AkAlg::kEcc) add("--ak-alg", "rsa");
  if (o.eventlog_path != kDefaultEventLog) add("--eventlog", Rebased(o.eventlog_path, install_root));
  if (o.pcr_signature_path != kDefaultPcrSignature) {
    add("--pcr-signature", Rebased(o.pcr_signature_path, install_root));
  }
  const std::string kubelet_dir = Rebased(o.kubelet_dir, install_root);
  const std::string kubeconfig = Rebased(o.kubeconfig, install_root);
  if (kubelet_dir != kDefaultKubeletDir) add("--kubelet-dir", kubelet_dir);
  if (kubeconfig != kDefaultKubeconfig) add("--kubeconfig", kubeconfig);
  if (!o.bootstrap_kubeconfig.empty()) add("--bootstrap-kubeconfig", Rebased(o.bootstrap_kubeconfig, install_root));
  for (const auto& ip : o.node_ips) add("--node-ip", ip);
  if (o.tpm_key) args.push_back("--tpm-key");
  if (config_stamped) args.push_back("--config-root=/");
  if (!unsafe.empty()) {
    return Status::InvalidArgument("install_arg_unsafe",
                                   unsafe + ": a value with whitespace, a quote, a backslash, $, % or ` cannot be "
                                            "carried into the installed unit's RACKGATE_AGENT_ARGS; use a plain path");
  }
  return args;
}

std::string AgentEnvFile(const InstallOptions& o) {
  std::string urls, args;
  for (const auto& u : o.urls) urls += (urls.empty() ? "" : ",") + u;
  for (const auto& a : o.agent_args) args += (args.empty() ? "" : " ") + a;
  return "# Written by rackgate-agent --install-root on this node's first boot (docs/nodes.md).\n"
         "RACKGATE_URL=" + urls + "\n" +
         "RACKGATE_CA=" + kInstalledCa + "\n" +
         "RACKGATE_APISERVER=" + o.apiserver + "\n" +
         "RACKGATE_AGENT_ARGS=" + args + "\n";
}

Status InstallIntoRoot(const InstallOptions& o, Root* root, std::time_t now) {
  if (Status s = CheckBundle(o.bundle_dir); !s.ok()) return s;
  if (Status s = CopyBundle(o.bundle_dir, root); !s.ok()) return s;
  if (!o.config_for.empty()) {
    // The disk's config is the attested config of this machine: later
    // boots (--config-root=/) check it names the machine they attest as.
    if (Status s = root->WriteFile(kConfigStampInRoot, TextBytes(ConfigStampText(o.config_for, now)), 0644, Owner{},
                                   true);
        !s.ok()) {
      return s;
    }
  }
  if (Status s = root->WriteFile(kInstalledCa, TextBytes(o.ca_pem), 0644, Owner{}, true); !s.ok()) return s;
  if (Status s = root->WriteFile(kInstalledEnv, TextBytes(AgentEnvFile(o)), 0644, Owner{}, true); !s.ok()) return s;
  return InstallUnits(o.bundle_dir, root);
}

}  // namespace rackgate::agent
