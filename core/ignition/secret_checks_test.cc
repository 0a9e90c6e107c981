// Tests of what a public template may not carry, and what it may.
#include "core/ignition.h"

#include <gtest/gtest.h>

#include "core/ignition/testing/test_util.h"

namespace rackgate::core::ignition {
namespace {

using nlohmann::json;

// Each rule that keeps secrets out of public templates, and the same template
// accepted as an attested one.
TEST(Template, SecretsRefusedInPublicAcceptedInAttested) {
  const std::string pem = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";
  const std::string rsa_pem =
      "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n";
  std::vector<Refusal> cases = {
      {"marked secret", FileAt("/etc/app/config", R"("rackgate":{"secret":true})"), "",
       "marked secret"},
      {"openshift kubeconfig", FileAt("/etc/kubernetes/kubeconfig"), "", "/storage/files/0/path"},
      {"kubelet kubeconfig", FileAt("/var/lib/kubelet/kubeconfig"), "", "a kubeconfig"},
      {"kubeadm admin.conf", FileAt("/etc/kubernetes/admin.conf"), "", "a kubeconfig"},
      {"pull secret", FileAt("/var/lib/rackgate/pull-secret.json"), "", "a pull secret"},
      {"containers auth.json", FileAt("/run/containers/0/auth.json"), "", "registry credentials"},
      {"docker config", FileAt("/root/.docker/config.json"), "", "registry credentials"},
      {"kubelet registry config", FileAt("/var/lib/kubelet/config.json"), "",
       "registry credentials"},
      {"tls key", FileAt("/etc/pki/tls/private/server.key"), "", "a private key"},
      {"-key.pem", FileAt("/etc/kubernetes/pki/kubelet-client-key.pem"), "", "a private key"},
      {"ssh host key", FileAt("/etc/ssh/ssh_host_ed25519_key"), "", "a private key"},
      {"id_rsa", FileAt("/root/.ssh/id_rsa"), "", "an SSH private key"},
      {"id_ecdsa", FileAt("/home/core/.ssh/id_ecdsa"), "", "an SSH private key"},
      {"id_ed25519", FileAt("/home/core/.ssh/id_ed25519"), "", "an SSH private key"},
      {"p12", FileAt("/etc/certs/client.p12"), "", "PKCS#12"},
      {"pfx", FileAt("/etc/certs/client.pfx"), "", "PKCS#12"},
      {"token", FileAt("/etc/kubernetes/bootstrap-token"), "", "a token"},
      {"path case", FileAt("/root/.ssh/ID_RSA"), "", "an SSH private key"},
      {"path with dot segment", FileAt("/etc/kubernetes/./admin.conf"), "",
       "/etc/kubernetes/admin.conf"},
      {"path with double slash", FileAt("/var//lib/kubelet/config.json"), "",
       "registry credentials"},
      {"path with dotdot", FileAt("/etc/ssh/x/../ssh_host_rsa_key"), "", "a private key"},
      {"link at a credential path",
       Tmpl(R"("storage":{"links":[{"path":"/etc/kubernetes/kubeconfig","target":"/run/k"}]})"), "",
       "/storage/links/0/path"},
      {"inline private key, plain",
       FileAt(
           "/etc/app/tls.pem", R"("contents":{"source":"data:,)" +
                                   [&] {
                                     std::string enc;
                                     for (char c : pem) {
                                       if (c == '\n')
                                         enc += "%0A";
                                       else if (c == ' ')
                                         enc += "%20";
                                       else
                                         enc += c;
                                     }
                                     return enc;
                                   }() +
                                   "\"}"),
       "", "holds a PEM private key"},
      {"inline private key, base64",
       FileAt("/etc/app/tls.pem", R"("contents":{"source":"data:application/x-pem-file;base64,)" +
                                      B64(rsa_pem) + "\"}"),
       "", "/storage/files/0/contents/source"},
      {"inline private key, append",
       FileAt("/etc/app/tls.pem", R"("append":[{"source":"data:;base64,)" + B64(pem) + "\"}]"), "",
       "/storage/files/0/append/0/source"},
      {"private key in a unit",
       Tmpl(
           R"("systemd":{"units":[{"name":"a.service","contents":"-----BEGIN EC PRIVATE KEY-----"}]})"),
       "", "/systemd/units/0/contents"},
      {"compressed inline content",
       FileAt(
           "/etc/app/blob",
           R"("contents":{"source":"data:;base64,H4sIAAAAAAAAA0sEAEMXtrQBAAAA","compression":"gzip"})"),
       "", "compressed"},
      {"user passwordHash", Tmpl(R"("passwd":{"users":[{"name":"core","passwordHash":"$6$x"}]})"),
       "", "/passwd/users/0/passwordHash"},
      {"group passwordHash",
       Tmpl(R"("passwd":{"groups":[{"name":"wheel","passwordHash":"$6$x"}]})"), "",
       "/passwd/groups/0/passwordHash"},
      {"authorization header",
       FileAt(
           "/opt/agent",
           R"("contents":{"source":"https://a/agent","httpHeaders":[{"name":"authorization","value":"Bearer x"}]})"),
       "", "header is a credential"},
      {"credentials in a URL",
       FileAt("/opt/agent", R"("contents":{"source":"https://u:p@a/agent"})"), "",
       "the URL carries credentials"},
      {"credentials in the proxy",
       R"({"ignition":{"version":"3.3.0","proxy":{"httpsProxy":"http://u:p@proxy:3128"}}})", "",
       "/ignition/proxy/httpsProxy"},
      {"inline LUKS key",
       Tmpl(
           R"("storage":{"luks":[{"name":"data","device":"/dev/vdb","keyFile":{"source":"data:,hunter2"}}]})"),
       "", "/storage/luks/0/keyFile/source"},
  };
  for (Refusal& r : cases) {
    r.reason = "template_secret_in_public";
    ExpectRefused(r, TemplateKind::kPublic);
    Result<Template> attested = ParseTemplate(r.text, TemplateKind::kAttested);
    EXPECT_TRUE(attested.ok()) << r.name << ": " << attested.status().ToString();
  }
}

TEST(Template, PublicMayCarryWhatIsNotSecret) {
  for (
      const std::string& text :
      {FileAt("/root/.ssh/id_rsa.pub"), FileAt("/etc/ssh/sshd_config"),
       FileAt(
           "/etc/pki/ca-trust/source/anchors/appliance.pem",
           R"("contents":{"source":"data:;base64,)" + B64("-----BEGIN CERTIFICATE-----\n") + "\"}"),
       FileAt("/etc/app/x", R"("rackgate":{"secret":false})"),
       FileAt(
           "/opt/agent",
           R"("contents":{"source":"https://a/agent","httpHeaders":[{"name":"User-Agent","value":"x"}]})"),
       Tmpl(R"("passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]})")}) {
    Result<Template> t = ParseTemplate(text, TemplateKind::kPublic);
    EXPECT_TRUE(t.ok()) << text << ": " << t.status().ToString();
  }
}

}  // namespace
}  // namespace rackgate::core::ignition
