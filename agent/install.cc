#include "agent/install.h"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

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

std::span<const uint8_t> Bytes(const std::string& s) {
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

}  // namespace

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

Status InstallIntoRoot(const InstallOptions& o, Root* root) {
  if (Status s = CheckBundle(o.bundle_dir); !s.ok()) return s;
  if (Status s = CopyBundle(o.bundle_dir, root); !s.ok()) return s;
  if (Status s = root->WriteFile(kInstalledCa, Bytes(o.ca_pem), 0644, Owner{}, true); !s.ok()) return s;
  if (Status s = root->WriteFile(kInstalledEnv, Bytes(AgentEnvFile(o)), 0644, Owner{}, true); !s.ok()) return s;
  return InstallUnits(o.bundle_dir, root);
}

}  // namespace rackgate::agent
