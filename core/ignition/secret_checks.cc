// What a public template may not carry: credential paths, private keys, credentials in URLs.
#include "core/ignition.h"

#include <fnmatch.h>

#include "core/ignition/internal.h"
#include "wire/data_url.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

Status SecretInPublic(const std::string& pointer, const std::string& why) {
  return Status::InvalidArgument("template_secret_in_public",
                                 Where(pointer) + ": " + why +
                                     "; a public config is served to unattested machines, move "
                                     "this to the attested template");
}

// Credential paths a public template may not write (files and links), matched
// case-insensitively against the cleaned path with fnmatch(3) without
// FNM_PATHNAME, so `*` also spans `/`. The list errs towards refusing: a
// false positive costs the operator a move to the attested template, a false
// negative hands a credential to anyone who can reach the port.
struct CredentialPath {
  const char* glob;
  const char* what;
};

constexpr CredentialPath kCredentialPaths[] = {
    // kubeconfigs: OpenShift's /etc/kubernetes/kubeconfig and
    // /var/lib/kubelet/kubeconfig, kubeadm's /etc/kubernetes/{admin,kubelet,
    // bootstrap-kubelet,...}.conf
    {"*kubeconfig*", "a kubeconfig"},
    {"/etc/kubernetes/*.conf", "a kubeconfig"},
    // pull secrets and registry credentials (containers-auth.json(5), docker,
    // the kubelet's config.json)
    {"*pull-secret*", "a pull secret"},
    {"*/auth.json", "container registry credentials"},
    {"*/.docker/config.json", "container registry credentials"},
    {"/var/lib/kubelet/config.json", "container registry credentials"},
    // private keys: TLS keys, SSH host keys (ssh_host_*_key), user SSH keys
    // (their .pub halves stay allowed), PKCS#12 bundles
    {"*.key", "a private key"},
    {"*-key.pem", "a private key"},
    {"*_key", "a private key"},
    {"*/id_rsa", "an SSH private key"},
    {"*/id_dsa", "an SSH private key"},
    {"*/id_ecdsa", "an SSH private key"},
    {"*/id_ecdsa_sk", "an SSH private key"},
    {"*/id_ed25519", "an SSH private key"},
    {"*/id_ed25519_sk", "an SSH private key"},
    {"*.p12", "a PKCS#12 bundle"},
    {"*.pfx", "a PKCS#12 bundle"},
    // bootstrap tokens, service account tokens, provisioning tokens
    {"*token*", "a token"},
};

const char* CredentialPathKind(const std::string& cleaned) {
  for (const CredentialPath& c : kCredentialPaths) {
    if (fnmatch(c.glob, cleaned.c_str(), FNM_CASEFOLD) == 0) return c.what;
  }
  return nullptr;
}

// A URL carrying userinfo ("https://user:password@host/") names a credential.
bool UrlHasUserinfo(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return false;
  std::string_view rest = url.substr(scheme + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  return authority.find('@') != std::string_view::npos;
}

constexpr std::string_view kPrivateKeyMarker = "PRIVATE KEY-----";

bool HoldsPrivateKey(std::string_view s) {
  return s.find(kPrivateKeyMarker) != std::string_view::npos;
}

// Every string value and every resource, anywhere in the template.
Status CheckNoSecretsIn(const json& node, const std::string& p) {
  if (node.is_string()) {
    if (HoldsPrivateKey(node.get_ref<const std::string&>())) {
      return SecretInPublic(p, "holds a PEM private key");
    }
    return Status::Ok();
  }
  if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) {
      Status st = CheckNoSecretsIn(node.at(i), Child(p, i));
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  if (!node.is_object()) return Status::Ok();
  if (IsResource(node)) {
    const std::string& source = node.at("source").get_ref<const std::string&>();
    const std::string sp = Child(p, "source");
    if (wire::IsDataUrl(source)) {
      // Cannot be searched for a private key, so it cannot be shown safe.
      if (IsCompressed(node))
        return SecretInPublic(sp, "compressed inline content cannot be checked");
      Result<wire::DataUrl> url = wire::DecodeDataUrl(source, kMaxTemplateBytes);
      if (url.ok() && HoldsPrivateKey(url->data))
        return SecretInPublic(sp, "holds a PEM private key");
    } else if (UrlHasUserinfo(source)) {
      return SecretInPublic(sp, "the URL carries credentials");
    }
    if (node.contains("httpHeaders") && node.at("httpHeaders").is_array()) {
      const json& headers = node.at("httpHeaders");
      for (size_t i = 0; i < headers.size(); ++i) {
        const json& h = headers.at(i);
        if (!h.is_object() || !h.contains("name") || !h.at("name").is_string()) continue;
        std::string name = AsciiLower(h.at("name").get_ref<const std::string&>());
        if (name == "authorization" || name == "proxy-authorization" || name == "cookie") {
          return SecretInPublic(
              Child(Child(Child(p, "httpHeaders"), i), "name"),
              "the " + h.at("name").get<std::string>() + " header is a credential");
        }
      }
    }
  }
  for (const auto& [key, value] : node.items()) {
    Status st = CheckNoSecretsIn(value, Child(p, key));
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace

Status CheckNoSecrets(const json& root) {
  if (root.contains("storage")) {
    const json& s = root.at("storage");
    for (const char* list : {"files", "links"}) {
      if (Absent(s, list)) continue;
      const json& nodes = s.at(list);
      for (size_t i = 0; i < nodes.size(); ++i) {
        const json& n = nodes.at(i);
        const std::string np = Child(Child("/storage", list), i);
        if (n.contains("rackgate") && n.at("rackgate").is_object() &&
            n.at("rackgate").contains("secret") && n.at("rackgate").at("secret") == true) {
          return SecretInPublic(np, "the file is marked secret");
        }
        const std::string cleaned = CleanPath(n.at("path").get_ref<const std::string&>());
        if (const char* what = CredentialPathKind(cleaned)) {
          return SecretInPublic(Child(np, "path"),
                                "\"" + cleaned + "\" is where " + what + " lives");
        }
      }
    }
    if (!Absent(s, "luks")) {
      const json& luks = s.at("luks");
      for (size_t i = 0; i < luks.size(); ++i) {
        const json& l = luks.at(i);
        if (!Absent(l, "keyFile") && !Absent(l.at("keyFile"), "source") &&
            wire::IsDataUrl(l.at("keyFile").at("source").get_ref<const std::string&>())) {
          return SecretInPublic(Child(Child(Child("/storage/luks", i), "keyFile"), "source"),
                                "an inline LUKS key file is a disk key");
        }
      }
    }
  }
  if (root.contains("passwd")) {
    const json& pw = root.at("passwd");
    for (const char* list : {"users", "groups"}) {
      if (Absent(pw, list)) continue;
      const json& entries = pw.at(list);
      for (size_t i = 0; i < entries.size(); ++i) {
        if (!Absent(entries.at(i), "passwordHash")) {
          return SecretInPublic(Child(Child(Child("/passwd", list), i), "passwordHash"),
                                "a password hash can be cracked offline");
        }
      }
    }
  }
  if (root.contains("ignition") && !Absent(root.at("ignition"), "proxy")) {
    const json& proxy = root.at("ignition").at("proxy");
    for (const char* key : {"httpProxy", "httpsProxy"}) {
      if (!Absent(proxy, key) && UrlHasUserinfo(proxy.at(key).get_ref<const std::string&>())) {
        return SecretInPublic(Child("/ignition/proxy", key), "the URL carries credentials");
      }
    }
  }
  return CheckNoSecretsIn(root, "");
}

}  // namespace rackgate::core::ignition
