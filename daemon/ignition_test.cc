// Tests for Ignition negotiation, conversion, template validation, rendering
// and merging.
#include "daemon/ignition.h"
#include "core/secrets.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "wire/codec.h"

namespace rackgate::daemon::ignition {
namespace {

using nlohmann::json;

constexpr SpecVersion k300{3, 0, 0};
constexpr SpecVersion k310{3, 1, 0};
constexpr SpecVersion k320{3, 2, 0};
constexpr SpecVersion k330{3, 3, 0};

std::string V(SpecVersion v) { return FormatSpecVersion(v); }

// The test's own decoder, so that a round trip does not trust the code under
// test twice.
std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string B64(std::string_view s) {
  return wire::Base64Encode(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

// ---------------------------------------------------------------------------
// Versions

TEST(SpecVersion, ParseFormatCompare) {
  auto v = ParseSpecVersion("3.2.0");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, k320);
  EXPECT_EQ(FormatSpecVersion(*v), "3.2.0");
  EXPECT_LT(k310, k320);
  EXPECT_LT((SpecVersion{3, 9, 0}), (SpecVersion{4, 0, 0}));
  EXPECT_GT((SpecVersion{3, 10, 0}), (SpecVersion{3, 9, 9}));
  for (const char* bad : {"", "3", "3.1", "3.1.0.0", "03.1.0", "3.1.0-experimental", "3.a.0",
                          "-3.1.0", "3..0", "3.1.0 ", "1234567.0.0"}) {
    EXPECT_FALSE(ParseSpecVersion(bad).ok()) << bad;
  }
  EXPECT_TRUE(IsSupported(k300));
  EXPECT_TRUE(IsSupported(k330));
  EXPECT_FALSE(IsSupported(SpecVersion{3, 4, 0}));
  EXPECT_FALSE(IsSupported(SpecVersion{2, 2, 0}));
}

// ---------------------------------------------------------------------------
// Negotiation

constexpr std::string_view kIgn = "application/vnd.coreos.ignition+json";

std::string IgnVersion(std::string_view v) {
  return std::string(kIgn) + ";version=" + std::string(v);
}

struct NegotiationCase {
  std::string name;
  std::optional<std::string> accept;
  SpecVersion config = k310;
  std::optional<SpecVersion> want;  // nullopt: an error with want_reason
  std::string want_reason;
};

TEST(Negotiate, Table) {
  const std::string ignition_header = IgnVersion("3.3.0") + ", */*;q=0.1";
  const std::vector<NegotiationCase> cases = {
      {.name = "no header", .accept = std::nullopt, .want = k310},
      {.name = "empty", .accept = "", .want = k310},
      {.name = "blank", .accept = "  \t ", .want = k310},
      {.name = "only commas", .accept = " , ,", .want = k310},
      {.name = "3.0.0", .accept = IgnVersion("3.0.0"), .want = k300},
      {.name = "3.1.0", .accept = IgnVersion("3.1.0"), .want = k310},
      {.name = "3.2.0", .accept = IgnVersion("3.2.0"), .want = k320},
      {.name = "3.3.0", .accept = IgnVersion("3.3.0"), .want = k330},
      {.name = "3.4.0", .accept = IgnVersion("3.4.0"), .want = k330},
      {.name = "3.4.0-experimental", .accept = IgnVersion("3.4.0-experimental"), .want = k330},
      {.name = "3.9.0", .accept = IgnVersion("3.9.0"), .want = k330},
      {.name = "3.3.0-experimental is below 3.3.0",
       .accept = IgnVersion("3.3.0-experimental"),
       .want = k320},
      {.name = "3.0.0-experimental is below everything",
       .accept = IgnVersion("3.0.0-experimental"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "2.2.0 only",
       .accept = IgnVersion("2.2.0"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "4.0.0 only",
       .accept = IgnVersion("4.0.0"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "unparsable version",
       .accept = IgnVersion("three"),
       .want_reason = "ignition_version_unsupported"},
      {.name = "text/html", .accept = "text/html", .want_reason = "ignition_version_unsupported"},
      {.name = "ignition without version", .accept = std::string(kIgn), .want = k310},
      {.name = "application/json", .accept = "application/json", .want = k310},
      {.name = "application/*", .accept = "application/*", .want = k310},
      {.name = "*/*", .accept = "*/*", .want = k310},
      {.name = "Ignition's own header", .accept = ignition_header, .want = k330},
      {.name = "Ignition's own header, config 3.3.0",
       .accept = ignition_header,
       .config = k330,
       .want = k330},
      {.name = "higher q wins",
       .accept = IgnVersion("3.1.0") + ";q=0.5, " + IgnVersion("3.2.0") + ";q=0.9",
       .want = k320},
      {.name = "higher q wins over a higher version",
       .accept = IgnVersion("3.1.0") + ";q=0.9, " + IgnVersion("3.3.0") + ";q=0.5",
       .want = k310},
      {.name = "q ties go to the higher version",
       .accept = IgnVersion("3.2.0") + ", " + IgnVersion("3.1.0"),
       .want = k320},
      {.name = "q=0 excludes, the wildcard gives the config's version",
       .accept = IgnVersion("3.3.0") + ";q=0, */*;q=0.1",
       .config = k320,
       .want = k320},
      {.name = "q=0 excludes the config's own version too",
       .accept = IgnVersion("3.3.0") + ";q=0, */*;q=0.1",
       .config = k330,
       .want_reason = "ignition_version_unsupported"},
      {.name = "*/*;q=0 only", .accept = "*/*;q=0", .want_reason = "ignition_version_unsupported"},
      {.name = "quoted version", .accept = std::string(kIgn) + "; version=\"3.2.0\"", .want = k320},
      {.name = "quoted pair in a quoted version",
       .accept = std::string(kIgn) + ";version=\"3.\\2.0\"",
       .want = k320},
      {.name = "case-insensitive type and parameter names",
       .accept = "Application/VND.CoreOS.Ignition+JSON;VERSION=3.2.0;Q=1",
       .want = k320},
      {.name = "other parameters and extensions after q are ignored",
       .accept = std::string(kIgn) + ";charset=utf-8;version=3.2.0;q=0.5;ext=\"x\"",
       .want = k320},
      {.name = "repeated version parameter matches nothing",
       .accept = std::string(kIgn) + ";version=3.2.0;version=3.1.0",
       .want_reason = "ignition_version_unsupported"},
      {.name = "garbage", .accept = "garbage", .want_reason = "accept_malformed"},
      {.name = "missing subtype", .accept = "application/", .want_reason = "accept_malformed"},
      {.name = "*/json", .accept = "*/json", .want_reason = "accept_malformed"},
      {.name = "two ranges without a comma",
       .accept = "text/html text/plain",
       .want_reason = "accept_malformed"},
      {.name = "q above 1", .accept = "*/*;q=1.5", .want_reason = "accept_malformed"},
      {.name = "q with 4 decimals", .accept = "*/*;q=0.1234", .want_reason = "accept_malformed"},
      {.name = "q=1.001", .accept = "*/*;q=1.001", .want_reason = "accept_malformed"},
      {.name = "q not a number", .accept = "*/*;q=high", .want_reason = "accept_malformed"},
      {.name = "quoted q", .accept = "*/*;q=\"0.5\"", .want_reason = "accept_malformed"},
      {.name = "unterminated quote",
       .accept = std::string(kIgn) + ";version=\"3.2.0",
       .want_reason = "accept_malformed"},
      {.name = "parameter without value",
       .accept = std::string(kIgn) + ";version",
       .want_reason = "accept_malformed"},
      {.name = "space around =",
       .accept = std::string(kIgn) + ";version = 3.2.0",
       .want_reason = "accept_malformed"},
      {.name = "control character",
       .accept = std::string("text/html\x01"),
       .want_reason = "accept_malformed"},
  };
  for (const NegotiationCase& c : cases) {
    std::optional<std::string_view> accept;
    if (c.accept) accept = *c.accept;
    Result<SpecVersion> got = Negotiate(accept, c.config);
    if (c.want) {
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
      EXPECT_EQ(V(*got), V(*c.want)) << c.name;
    } else {
      ASSERT_FALSE(got.ok()) << c.name << " gave " << V(*got);
      EXPECT_EQ(got.status().reason(), c.want_reason) << c.name;
    }
  }
}

TEST(Negotiate, StatusCodes) {
  EXPECT_EQ(Negotiate("garbage", k310).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Negotiate("text/html", k310).status().code(), Status::Code::kUnsupported);
}

TEST(Negotiate, BoundsOnRangesAndLength) {
  std::string header = "*/*";
  for (size_t i = 1; i < kMaxAcceptRanges; ++i) header += ",*/*";
  EXPECT_TRUE(Negotiate(header, k310).ok());  // exactly 64
  header += ",*/*";
  Result<SpecVersion> r = Negotiate(header, k310);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "accept_malformed");

  // Within the length bound, padding is fine; one byte over is refused.
  std::string padded = "*/*" + std::string(kMaxAcceptBytes - 3, ' ');
  EXPECT_TRUE(Negotiate(padded, k310).ok());
  padded += ' ';
  EXPECT_EQ(Negotiate(padded, k310).status().reason(), "accept_malformed");
}

// Every prefix of a real header either parses or is refused as malformed;
// none crashes or reads past the end.
TEST(Negotiate, TruncationLoop) {
  const std::string full = std::string(kIgn) + ";version=\"3.3.0\";q=0.9, */*;q=0.1";
  for (size_t n = 0; n <= full.size(); ++n) {
    Result<SpecVersion> r = Negotiate(std::string_view(full).substr(0, n), k310);
    if (!r.ok()) {
      EXPECT_TRUE(r.status().reason() == "accept_malformed" ||
                  r.status().reason() == "ignition_version_unsupported")
          << n << ": " << r.status().ToString();
    }
  }
}

// ---------------------------------------------------------------------------
// Conversion

json Config(std::string_view text) { return json::parse(text); }

TEST(Convert, UpgradeRewritesVersionOnly) {
  json c = Config(R"({"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/x"}]}})");
  Result<json> up = ConvertToVersion(c, k330);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->at("ignition").at("version"), "3.3.0");
  json back = *up;
  back["ignition"]["version"] = "3.0.0";
  EXPECT_EQ(back, c);
}

TEST(Convert, DowngradeWhenNothingNewIsUsed) {
  json c = Config(R"({"ignition":{"version":"3.3.0"},
                      "storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,x",
                        "verification":{"hash":"sha512-00"}}}]},
                      "passwd":{"users":[{"name":"core"}]}})");
  Result<json> down = ConvertToVersion(c, k300);
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->at("ignition").at("version"), "3.0.0");
}

struct TooNewCase {
  std::string config;
  SpecVersion target;
  std::string pointer;
  std::string since;
};

TEST(Convert, RefusesFieldsNewerThanTarget) {
  const std::vector<TooNewCase> cases = {
      {R"({"ignition":{"version":"3.3.0"},"kernelArguments":{"shouldExist":["a"]}})", k320,
       "/kernelArguments", "3.3.0"},
      {R"({"ignition":{"version":"3.3.0"},"storage":{"filesystems":[{"device":"/dev/vdb","format":"none"}]}})",
       k320, "/storage/filesystems/0/format", "3.3.0"},
      {R"({"ignition":{"version":"3.2.0"},"storage":{"luks":[{"name":"a","device":"/dev/vdb"}]}})",
       k310, "/storage/luks", "3.2.0"},
      {R"({"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"a"},{"name":"b","shouldExist":false}]}})",
       k310, "/passwd/users/1/shouldExist", "3.2.0"},
      {R"({"ignition":{"version":"3.2.0"},"storage":{"disks":[{"device":"/dev/sda","partitions":[{"label":"r","resize":true}]}]}})",
       k310, "/storage/disks/0/partitions/0/resize", "3.2.0"},
      {R"({"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/x","contents":{"source":"gs://b/o"}}]}})",
       k310, "/storage/files/0/contents/source", "3.2.0"},
      {R"({"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/x","contents":{"source":"https://a/b","httpHeaders":[{"name":"A","value":"b"}]}}]}})",
       k300, "/storage/files/0/contents/httpHeaders", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/x","contents":{"source":"https://a/b","verification":{"hash":"sha256-00"}}}]}})",
       k300, "/storage/files/0/contents/verification/hash", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0","proxy":{"httpProxy":"http://p"}}})", k300,
       "/ignition/proxy", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0","security":{"tls":{"certificateAuthorities":[{"source":"data:,x","compression":null}]}}}})",
       k300, "/ignition/security/tls/certificateAuthorities/0/compression", "3.1.0"},
      {R"({"ignition":{"version":"3.1.0"},"storage":{"filesystems":[{"device":"/dev/vdb","mountOptions":["a"]}]}})",
       k300, "/storage/filesystems/0/mountOptions", "3.1.0"},
  };
  for (const TooNewCase& c : cases) {
    Result<json> r = ConvertToVersion(Config(c.config), c.target);
    ASSERT_FALSE(r.ok()) << c.config;
    EXPECT_EQ(r.status().reason(), "ignition_config_too_new") << c.config;
    EXPECT_NE(r.status().message().find(c.pointer), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.since), std::string::npos) << r.status().message();
    // The same config converts to the version that introduced the field.
    Result<SpecVersion> since = ParseSpecVersion(c.since);
    ASSERT_TRUE(since.ok());
    EXPECT_TRUE(ConvertToVersion(Config(c.config), *since).ok()) << c.config;
  }
}

TEST(Convert, RefusesUnsupportedTargetAndUnreadableConfig) {
  json c = Config(R"({"ignition":{"version":"3.1.0"}})");
  EXPECT_EQ(ConvertToVersion(c, SpecVersion{3, 4, 0}).status().reason(),
            "ignition_version_unsupported");
  EXPECT_EQ(ConvertToVersion(c, SpecVersion{2, 2, 0}).status().reason(),
            "ignition_version_unsupported");
  EXPECT_EQ(ConvertToVersion(Config(R"({"ignition":{}})"), k310).status().reason(),
            "ignition_config_invalid");
  EXPECT_EQ(ConvertToVersion(Config("[]"), k310).status().reason(), "ignition_config_invalid");
}

// ---------------------------------------------------------------------------
// Templates

// A template of the given version with `body` spliced in after "ignition".
std::string Tmpl(std::string_view body, std::string_view version = "3.3.0") {
  std::string out = R"({"ignition":{"version":")" + std::string(version) + "\"}";
  if (!body.empty()) out += "," + std::string(body);
  return out + "}";
}

std::string FileAt(std::string_view path, std::string_view extra = "") {
  std::string f = R"({"path":")" + std::string(path) + "\"";
  if (!extra.empty()) f += "," + std::string(extra);
  return Tmpl(R"("storage":{"files":[)" + f + "}]}");
}

TEST(Template, ParsesAValidPublicTemplate) {
  const std::string text = Tmpl(R"(
    "storage":{"files":[{"path":"/etc/rackgate/appliance","mode":420,"overwrite":true,
                         "contents":{"source":"data:,{{appliance.url}}%0A"}},
                        {"path":"/etc/rackgate/ca.pem","contents":{"source":"data:,{{appliance.ca_pem}}"}}],
               "directories":[{"path":"/etc/rackgate/conf.d","mode":493}],
               "links":[{"path":"/etc/rackgate/current","target":"/etc/rackgate/conf.d"}]},
    "systemd":{"units":[{"name":"rackgate-agent.service","enabled":true,
                         "contents":"[Service]\nExecStart=/usr/bin/rackgate-agent --pool {{pool}}\n",
                         "dropins":[{"name":"10-x.conf","contents":"[Unit]\n"}]}]},
    "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]},
    "kernelArguments":{"shouldExist":["console=ttyS0"]})");
  Result<Template> t = ParseTemplate(text, TemplateKind::kPublic);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->version, k330);
  EXPECT_EQ(t->placeholders,
            (std::vector<std::string>{"appliance.ca_pem", "appliance.url", "pool"}));
}

TEST(Template, CollectsPerMachinePlaceholdersInAttested) {
  const std::string text =
      Tmpl(R"(
    "storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,{{hostname}}"}},
                        {"path":"/etc/rack","contents":{"source":"data:;base64,)" +
           B64("rack={{machine.rack}} ek={{ek_hash}} ip={{address.InternalIP}}") + R"("}}]})");
  Result<Template> t = ParseTemplate(text, TemplateKind::kAttested);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->placeholders, (std::vector<std::string>{"address.InternalIP", "ek_hash", "hostname",
                                                       "machine.rack"}));
}

struct Refusal {
  std::string name;
  std::string text;
  std::string reason;
  std::string in_message;  // the pointer or words the message must name
};

void ExpectRefused(const Refusal& r, TemplateKind kind) {
  Result<Template> t = ParseTemplate(r.text, kind);
  ASSERT_FALSE(t.ok()) << r.name << " was accepted";
  EXPECT_EQ(t.status().reason(), r.reason) << r.name << ": " << t.status().ToString();
  EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument) << r.name;
  EXPECT_NE(t.status().message().find(r.in_message), std::string::npos)
      << r.name << ": " << t.status().message();
}

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

TEST(Template, StructureRefusals) {
  const std::vector<Refusal> cases = {
      {"not JSON", "{\"ignition\": ", "template_invalid", "byte"},
      {"trailing garbage", Tmpl("") + "x", "template_invalid", "byte"},
      {"top-level array", "[]", "template_invalid", "expected an object"},
      {"unknown top key", Tmpl(R"("storgae":{})"), "template_invalid", "/storgae: unknown key"},
      {"duplicate key", Tmpl(R"("storage":{},"storage":{})"), "template_invalid",
       "duplicate key \"storage\""},
      {"no ignition", R"({"storage":{}})", "template_invalid", "/ignition: required"},
      {"no version", R"({"ignition":{}})", "template_invalid", "/ignition/version: required"},
      {"version 3.4.0", Tmpl("", "3.4.0"), "template_version_unsupported", "/ignition/version"},
      {"version 2.2.0", Tmpl("", "2.2.0"), "template_version_unsupported", "/ignition/version"},
      {"version 3.1", Tmpl("", "3.1"), "template_version_unsupported", "/ignition/version"},
      {"version experimental", Tmpl("", "3.3.0-experimental"), "template_version_unsupported",
       "/ignition/version"},
      {"version not a string", R"({"ignition":{"version":3}})", "template_invalid",
       "/ignition/version"},
      {"typo in a file", FileAt("/etc/x", R"("overwirte":true)"), "template_invalid",
       "/storage/files/0/overwirte"},
      {"relative path", FileAt("etc/x"), "template_invalid",
       "/storage/files/0/path: must be absolute"},
      {"path not a string", Tmpl(R"("storage":{"files":[{"path":7}]})"), "template_invalid",
       "/storage/files/0/path"},
      {"missing path", Tmpl(R"("storage":{"files":[{"mode":420}]})"), "template_invalid",
       "/storage/files/0/path: required"},
      {"mode as a string", FileAt("/etc/x", R"("mode":"0644")"), "template_invalid",
       "/storage/files/0/mode"},
      {"mode out of range", FileAt("/etc/x", R"("mode":4096)"), "template_invalid",
       "/storage/files/0/mode"},
      {"overwrite not bool", FileAt("/etc/x", R"("overwrite":"yes")"), "template_invalid",
       "/storage/files/0/overwrite"},
      {"source not a string", FileAt("/etc/x", R"("contents":{"source":1})"), "template_invalid",
       "/storage/files/0/contents/source"},
      {"append not a list", FileAt("/etc/x", R"("append":{"source":"data:,x"})"),
       "template_invalid", "/storage/files/0/append"},
      {"duplicate path across kinds",
       Tmpl(R"("storage":{"files":[{"path":"/etc/x"}],"directories":[{"path":"/etc//x/"}]})"),
       "template_invalid", "same path as /storage/files/0"},
      {"link without target", Tmpl(R"("storage":{"links":[{"path":"/etc/l"}]})"),
       "template_invalid", "/storage/links/0/target"},
      {"unit without name", Tmpl(R"("systemd":{"units":[{"enabled":true}]})"), "template_invalid",
       "/systemd/units/0/name"},
      {"unit enabled not bool",
       Tmpl(R"("systemd":{"units":[{"name":"a.service","enabled":"yes"}]})"), "template_invalid",
       "/systemd/units/0/enabled"},
      {"dropin without name",
       Tmpl(R"("systemd":{"units":[{"name":"a.service","dropins":[{"contents":""}]}]})"),
       "template_invalid", "/systemd/units/0/dropins/0/name"},
      {"user without name", Tmpl(R"("passwd":{"users":[{"uid":1000}]})"), "template_invalid",
       "/passwd/users/0/name"},
      {"merge without source", R"({"ignition":{"version":"3.3.0","config":{"merge":[{}]}}})",
       "template_invalid", "/ignition/config/merge/0/source"},
      {"CA without source",
       R"({"ignition":{"version":"3.3.0","security":{"tls":{"certificateAuthorities":[{}]}}}})",
       "template_invalid", "/ignition/security/tls/certificateAuthorities/0/source"},
      {"unknown key in ignition", R"({"ignition":{"version":"3.3.0","configs":{}}})",
       "template_invalid", "/ignition/configs"},
      {"unknown key in rackgate", FileAt("/etc/x", R"("rackgate":{"secret":true,"mode":1})"),
       "template_invalid", "/storage/files/0/rackgate/mode"},
      {"rackgate not an object", FileAt("/etc/x", R"("rackgate":true)"), "template_invalid",
       "/storage/files/0/rackgate"},
      {"rackgate on a directory",
       Tmpl(R"("storage":{"directories":[{"path":"/d","rackgate":{"secret":true}}]})"),
       "template_invalid", "/storage/directories/0/rackgate: unknown key"},
      {"kernelArguments in a 3.2.0 template",
       Tmpl(R"("kernelArguments":{"shouldExist":["a"]})", "3.2.0"), "template_invalid",
       "/kernelArguments: needs spec 3.3.0"},
      {"httpHeaders in a 3.0.0 template",
       Tmpl(
           R"("storage":{"files":[{"path":"/x","contents":{"source":"https://a","httpHeaders":[]}}]})",
           "3.0.0"),
       "template_invalid", "/storage/files/0/contents/httpHeaders: needs spec 3.1.0"},
      {"bad data URL", FileAt("/x", R"("contents":{"source":"data:;base64,@@@"})"),
       "template_invalid", "/storage/files/0/contents/source"},
      {"bad percent escape", FileAt("/x", R"("contents":{"source":"data:,%zz"})"),
       "template_invalid", "bad percent escape"},
      {"data URL without comma", FileAt("/x", R"("contents":{"source":"data:text/plain"})"),
       "template_invalid", "without a comma"},
  };
  for (const Refusal& r : cases) {
    ExpectRefused(r, TemplateKind::kAttested);
  }
}

TEST(Template, TooLargeAndTooDeep) {
  std::string big = Tmpl(R"("systemd":{"units":[{"name":"a","contents":")" +
                         std::string(kMaxTemplateBytes, 'a') + "\"}]}");
  EXPECT_EQ(ParseTemplate(big, TemplateKind::kAttested).status().reason(), "template_invalid");

  std::string deep = std::string(1000, '[') + std::string(1000, ']');
  Result<Template> t = ParseTemplate(deep, TemplateKind::kAttested);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nested deeper"), std::string::npos) << t.status().message();
  // Deep but legal: within the bound inside an unchecked place (a disk).
  std::string ok_depth = Tmpl(R"("storage":{"disks":[{"device":"/dev/sda","x":)" +
                              std::string(20, '[') + std::string(20, ']') + "}]}");
  EXPECT_TRUE(ParseTemplate(ok_depth, TemplateKind::kAttested).ok());
}

TEST(Template, PlaceholderRefusals) {
  const std::vector<Refusal> cases = {
      {"unknown name", FileAt("/x", R"("contents":{"source":"data:,{{nope}}"})"),
       "template_invalid", "unknown placeholder {{nope}}"},
      {"unterminated", Tmpl(R"("systemd":{"units":[{"name":"a","contents":"{{hostname"}]})"),
       "template_invalid", "/systemd/units/0/contents: '{{' without '}}'"},
      {"spaces inside", Tmpl(R"("systemd":{"units":[{"name":"a","contents":"{{ hostname }}"}]})"),
       "template_invalid", "malformed placeholder"},
      {"empty", Tmpl(R"("systemd":{"units":[{"name":"a","contents":"{{}}"}]})"), "template_invalid",
       "malformed"},
      {"machine without var", FileAt("/x", R"("contents":{"source":"data:,{{machine.}}"})"),
       "template_invalid", "unknown placeholder"},
      {"machine var too long",
       FileAt("/x", R"("contents":{"source":"data:,{{machine.)" + std::string(64, 'a') + R"(}}"})"),
       "template_invalid", "unknown placeholder"},
      {"unknown address", FileAt("/x", R"("contents":{"source":"data:,{{address.Foo}}"})"),
       "template_invalid", "unknown placeholder"},
      {"placeholder in media type", FileAt("/x", R"("contents":{"source":"data:text/{{pool}},x"})"),
       "template_invalid", "media type"},
      {"placeholder with a hash",
       FileAt("/x",
              R"("contents":{"source":"data:,{{pool}}","verification":{"hash":"sha512-00"}})"),
       "template_invalid", "never match"},
      {"base64 placeholder with a hash",
       FileAt("/x", R"("contents":{"source":"data:;base64,)" + B64("{{pool}}") +
                        R"(","verification":{"hash":"sha256-00"}})"),
       "template_invalid", "/storage/files/0/contents/source"},
  };
  for (const Refusal& r : cases) ExpectRefused(r, TemplateKind::kAttested);

  // Per-machine names are refused in public templates, allowed in attested.
  for (const char* name : {"hostname", "ek_hash", "machine.rack", "address.InternalIP",
                           "address.ExternalDNS", "address.Hostname"}) {
    const std::string text =
        FileAt("/x", R"("contents":{"source":"data:,{{)" + std::string(name) + R"(}}"})");
    ExpectRefused({name, text, "template_invalid", "only for attested templates"},
                  TemplateKind::kPublic);
    EXPECT_TRUE(ParseTemplate(text, TemplateKind::kAttested).ok()) << name;
  }
  // A hash on inline content without placeholders, and placeholders in keys,
  // are fine.
  EXPECT_TRUE(
      ParseTemplate(
          FileAt("/x", R"("contents":{"source":"data:,x","verification":{"hash":"sha512-00"}})"),
          TemplateKind::kPublic)
          .ok());
}

TEST(Template, TruncationLoop) {
  const std::string full = FileAt("/etc/x", R"("contents":{"source":"data:,{{pool}}"})");
  ASSERT_TRUE(ParseTemplate(full, TemplateKind::kPublic).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    Result<Template> t = ParseTemplate(std::string_view(full).substr(0, n), TemplateKind::kPublic);
    EXPECT_FALSE(t.ok()) << n;
    if (!t.ok()) {
      EXPECT_EQ(t.status().reason(), "template_invalid") << n;
    }
  }
}

// ---------------------------------------------------------------------------
// Render

Values PublicValues() {
  return Values{
      {{"pool", "workers"},
       {"appliance.url", "https://rackgate.lab:22623"},
       {"appliance.ca_pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}}};
}

Values AttestedValues() {
  Values v = PublicValues();
  v.values["hostname"] = "node-1.lab";
  v.values["machine.rack"] = "r 12/b?&=%";
  v.values["address.InternalIP"] = "10.0.0.7";
  v.values["ek_hash"] = "ab01";
  return v;
}

std::string SourceOf(const json& config, size_t file) {
  return config.at("storage").at("files").at(file).at("contents").at("source").get<std::string>();
}

TEST(Render, PlainDataUrlRoundTrip) {
  Result<Template> t = ParseTemplate(
      FileAt(
          "/etc/rack",
          R"("contents":{"source":"data:text/plain;charset=utf-8,rack%3D{{machine.rack}} host={{hostname}}%0A"})"),
      TemplateKind::kAttested);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Result<json> r = Render(*t, AttestedValues());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string src = SourceOf(*r, 0);
  const std::string prefix = "data:text/plain;charset=utf-8,";
  ASSERT_EQ(src.substr(0, prefix.size()), prefix);
  // Only unreserved characters stay unencoded.
  for (char c : src.substr(prefix.size())) {
    EXPECT_TRUE(isalnum(static_cast<unsigned char>(c)) ||
                std::string_view("-._~%").find(c) != std::string_view::npos)
        << src;
  }
  EXPECT_EQ(PercentDecode(src.substr(prefix.size())), "rack=r 12/b?&=% host=node-1.lab\n");
}

TEST(Render, Base64DataUrlRoundTrip) {
  Result<Template> t = ParseTemplate(
      FileAt("/etc/ca.pem", R"("contents":{"source":"data:application/x-pem-file;base64,)" +
                                B64("pool={{pool}}\n{{appliance.ca_pem}}") + "\"}"),
      TemplateKind::kPublic);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Result<json> r = Render(*t, PublicValues());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string src = SourceOf(*r, 0);
  const std::string prefix = "data:application/x-pem-file;base64,";
  ASSERT_EQ(src.substr(0, prefix.size()), prefix);
  std::optional<std::vector<uint8_t>> bytes = wire::Base64Decode(src.substr(prefix.size()), 1 << 20);
  ASSERT_TRUE(bytes.has_value()) << src;
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()),
            "pool=workers\n" + PublicValues().values.at("appliance.ca_pem"));
}

TEST(Render, UntouchedDataUrlsStayByteIdentical) {
  // Not canonical for our encoder (reserved characters left bare), but valid.
  const std::string src = "data:,a/b:c=d%20e";
  Result<Template> t =
      ParseTemplate(FileAt("/x", R"("contents":{"source":")" + src + "\"}"), TemplateKind::kPublic);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Result<json> r = Render(*t, Values{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(SourceOf(*r, 0), src);
}

TEST(Render, PlainStringsAndLiteralBraces) {
  Result<Template> t = ParseTemplate(Tmpl(R"("systemd":{"units":[{"name":"agent.service",
             "contents":"ExecStart=/usr/bin/agent --url {{appliance.url}}/config/{{pool}} --format '{{\"{{\"}}.Names}}'"}]})"),
                                     TemplateKind::kPublic);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->placeholders, (std::vector<std::string>{"appliance.url", "pool"}));
  Result<json> r = Render(*t, PublicValues());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->at("systemd").at("units").at(0).at("contents"),
            "ExecStart=/usr/bin/agent --url https://rackgate.lab:22623/config/workers --format "
            "'{{.Names}}'");
}

TEST(Render, MissingValueIsNamed) {
  Result<Template> t =
      ParseTemplate(FileAt("/etc/hostname", R"("contents":{"source":"data:,{{hostname}}"})"),
                    TemplateKind::kAttested);
  ASSERT_TRUE(t.ok());
  Result<json> r = Render(*t, PublicValues());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "template_value_missing");
  EXPECT_EQ(r.status().code(), Status::Code::kNotFound);
  EXPECT_NE(r.status().message().find("{{hostname}}"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("/storage/files/0/contents/source"), std::string::npos);
}

TEST(Render, ValueThatIsNotUtf8) {
  Result<Template> t =
      ParseTemplate(Tmpl(R"("systemd":{"units":[{"name":"a.service","contents":"{{hostname}}"}]})"),
                    TemplateKind::kAttested);
  ASSERT_TRUE(t.ok());
  Values v{{{"hostname", "\xff\xfe"}}};
  EXPECT_EQ(Render(*t, v).status().reason(), "template_value_invalid");
  // Inside a data URL any bytes are fine: they are encoded.
  Result<Template> d = ParseTemplate(FileAt("/x", R"("contents":{"source":"data:,{{hostname}}"})"),
                                     TemplateKind::kAttested);
  ASSERT_TRUE(d.ok());
  Result<json> r = Render(*d, v);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(SourceOf(*r, 0), "data:,%FF%FE");
  EXPECT_NO_THROW(Serialize(*r));
}

TEST(Render, AnnotationStripped) {
  Result<Template> t = ParseTemplate(
      Tmpl(R"("storage":{"files":[{"path":"/etc/kubernetes/kubeconfig","rackgate":{"secret":true},
                                   "contents":{"source":"data:,x"}},
                                  {"path":"/etc/y","rackgate":{"secret":false}}]})"),
      TemplateKind::kAttested);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->config.at("storage").at("files").at(0).contains("rackgate"));
  Result<json> r = Render(*t, Values{});
  ASSERT_TRUE(r.ok());
  const std::string out = Serialize(*r);
  EXPECT_EQ(out.find("rackgate"), std::string::npos) << out;
  EXPECT_EQ(r->at("storage").at("files").at(0).at("path"), "/etc/kubernetes/kubeconfig");
}

// ---------------------------------------------------------------------------
// Merge

TEST(Merge, FilePathOverrideInPlace) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},"storage":{"files":[
      {"path":"/etc/a","contents":{"source":"data:,public-a"}},
      {"path":"/etc/b","mode":420},
      {"path":"/etc/c"}]}})");
  json overlay = Config(R"({"ignition":{"version":"3.3.0"},"storage":{"files":[
      {"path":"/etc//b","contents":{"source":"data:,secret-b"}},
      {"path":"/etc/d"}]}})");
  json m = Merge(base, overlay);
  const json& files = m.at("storage").at("files");
  ASSERT_EQ(files.size(), 4u) << m.dump();
  EXPECT_EQ(files.at(0).at("path"), "/etc/a");
  EXPECT_EQ(files.at(1).at("contents").at("source"), "data:,secret-b");
  EXPECT_FALSE(files.at(1).contains("mode")) << "replaced whole, not merged";
  EXPECT_EQ(files.at(2).at("path"), "/etc/c");
  EXPECT_EQ(files.at(3).at("path"), "/etc/d");
}

TEST(Merge, NodeOfAnotherKindIsReplaced) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},"storage":{
      "directories":[{"path":"/etc/x"},{"path":"/etc/keep"}],"links":[{"path":"/etc/y","target":"/t"}]}})");
  json overlay = Config(
      R"({"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"/etc/x"},{"path":"/etc/y"}]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("storage").at("directories"), Config(R"([{"path":"/etc/keep"}])"));
  EXPECT_TRUE(m.at("storage").at("links").empty());
  EXPECT_EQ(m.at("storage").at("files").size(), 2u);
}

TEST(Merge, UnitOverrideByName) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},"systemd":{"units":[
      {"name":"agent.service","enabled":true,"contents":"public"},{"name":"other.service","mask":true}]}})");
  json overlay = Config(R"({"ignition":{"version":"3.3.0"},"systemd":{"units":[
      {"name":"agent.service","contents":"attested"},{"name":"kubelet.service","enabled":true}]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(
      m.at("systemd").at("units"),
      Config(
          R"([{"name":"agent.service","contents":"attested"},{"name":"other.service","mask":true},
                       {"name":"kubelet.service","enabled":true}])"));
}

TEST(Merge, UsersGroupsDisksByKey) {
  json base = Config(R"({"ignition":{"version":"3.3.0"},
      "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["a"]}],"groups":[{"name":"g","gid":1}]},
      "storage":{"disks":[{"device":"/dev/sda","wipeTable":false}],"filesystems":[{"device":"/dev/sda1","format":"xfs"}]}})");
  json overlay = Config(R"({"ignition":{"version":"3.3.0"},
      "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["b"]}],"groups":[{"name":"g","gid":2}]},
      "storage":{"disks":[{"device":"/dev/sda","wipeTable":true}],"filesystems":[{"device":"/dev/sda1","format":"ext4"}]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("passwd").at("users"), overlay.at("passwd").at("users"));
  EXPECT_EQ(m.at("passwd").at("groups"), overlay.at("passwd").at("groups"));
  EXPECT_EQ(m.at("storage").at("disks"), overlay.at("storage").at("disks"));
  EXPECT_EQ(m.at("storage").at("filesystems"), overlay.at("storage").at("filesystems"));
}

TEST(Merge, ListsConcatenateWithoutDuplicates) {
  json base = Config(R"({"ignition":{"version":"3.3.0","security":{"tls":{"certificateAuthorities":[
        {"source":"data:,ca1"},{"source":"data:,ca2"}]}}},
      "kernelArguments":{"shouldExist":["console=ttyS0","quiet"],"shouldNotExist":["debug"]}})");
  json overlay =
      Config(R"({"ignition":{"version":"3.3.0","security":{"tls":{"certificateAuthorities":[
        {"source":"data:,ca2"},{"source":"data:,ca3"}]}}},
      "kernelArguments":{"shouldExist":["quiet","debug","rd.net=1"],"shouldNotExist":["console=ttyS0","x"]}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("ignition").at("security").at("tls").at("certificateAuthorities"),
            Config(R"([{"source":"data:,ca1"},{"source":"data:,ca2"},{"source":"data:,ca3"}])"));
  // The overlay's word wins where the two disagree.
  EXPECT_EQ(m.at("kernelArguments").at("shouldExist"), Config(R"(["quiet","debug","rd.net=1"])"));
  EXPECT_EQ(m.at("kernelArguments").at("shouldNotExist"), Config(R"(["console=ttyS0","x"])"));
}

TEST(Merge, ObjectsRecursiveScalarsFromOverlayNullKeepsBase) {
  json base = Config(
      R"({"ignition":{"version":"3.3.0","timeouts":{"httpTotal":10,"httpResponseHeaders":5}}})");
  json overlay = Config(
      R"({"ignition":{"version":"3.3.0","timeouts":{"httpTotal":20,"httpResponseHeaders":null}}})");
  json m = Merge(base, overlay);
  EXPECT_EQ(m.at("ignition").at("timeouts"), Config(R"({"httpTotal":20,"httpResponseHeaders":5})"));
}

TEST(Merge, VersionIsTheHigher) {
  json a = Config(R"({"ignition":{"version":"3.3.0"}})");
  json b = Config(R"({"ignition":{"version":"3.1.0"}})");
  EXPECT_EQ(Merge(a, b).at("ignition").at("version"), "3.3.0");
  EXPECT_EQ(Merge(b, a).at("ignition").at("version"), "3.3.0");
  EXPECT_EQ(Merge(b, b).at("ignition").at("version"), "3.1.0");
}

// ---------------------------------------------------------------------------
// Serialize and hash

TEST(Serialize, CompactAndSorted) {
  EXPECT_EQ(Serialize(Config(R"({ "b": 1, "a": [1, 2], "c": {"z": null, "y": "s"} })")),
            R"({"a":[1,2],"b":1,"c":{"y":"s","z":null}})");
}

// The digest rackgated audits for a served config (daemon/secrets.h).
TEST(Sha256Hex, KnownVectors) {
  EXPECT_EQ(rackgate::core::Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(rackgate::core::Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// ---------------------------------------------------------------------------
// The real validator, when installed

// Runs ignition-validate on `config`; its exit status and output.
std::pair<int, std::string> RunIgnitionValidate(const std::string& config) {
  char path[] = "/tmp/rackgate-ignition-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return {-1, "mkstemp failed"};
  close(fd);
  std::ofstream(path) << config;
  const std::string out_path = std::string(path) + ".out";
  const std::string cmd =
      std::string("/usr/bin/ignition-validate ") + path + " >" + out_path + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(out_path).rdbuf();
  std::remove(path);
  std::remove(out_path.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out.str()};
}

TEST(IgnitionValidate, RenderedPublicAndAttestedConfigsAreValid) {
  if (access("/usr/bin/ignition-validate", X_OK) != 0)
    GTEST_SKIP() << "ignition-validate not installed";
  // The harness sees a refusal (so a pass below means something).
  ASSERT_NE(RunIgnitionValidate(
                R"({"ignition":{"version":"3.3.0"},"storage":{"files":[{"path":"rel"}]}})")
                .first,
            0);
  Result<Template> pub = ParseTemplate(Tmpl(R"(
    "storage":{"files":[{"path":"/etc/rackgate/appliance","mode":420,"overwrite":true,
                         "contents":{"source":"data:,{{appliance.url}}%0A"}},
                        {"path":"/etc/rackgate/ca.pem","mode":420,
                         "contents":{"source":"data:;base64,)" +
                                                B64("{{appliance.ca_pem}}") + R"("}}]},
    "systemd":{"units":[{"name":"rackgate-agent.service","enabled":true,
      "contents":"[Unit]\nDescription=rackgate agent\n[Service]\nType=oneshot\nExecStart=/usr/bin/rackgate-agent --pool {{pool}}\n[Install]\nWantedBy=multi-user.target\n"}]})",
                                            "3.1.0"),
                                       TemplateKind::kPublic);
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  Result<Template> att = ParseTemplate(
      Tmpl(R"(
    "storage":{"files":[{"path":"/etc/hostname","mode":420,"overwrite":true,
                         "contents":{"source":"data:,{{hostname}}%0A"}},
                        {"path":"/etc/kubernetes/kubeconfig","mode":384,"rackgate":{"secret":true},
                         "contents":{"source":"data:;base64,)" +
           B64("server: {{appliance.url}}\nnode: {{hostname}} {{machine.rack}}\n") + R"("}},
                        {"path":"/etc/rackgate/appliance","contents":{"source":"data:,override"}}]},
    "systemd":{"units":[{"name":"rackgate-agent.service","dropins":[{"name":"10-ek.conf","contents":"[Service]\nEnvironment=EK={{ek_hash}}\n"}]}]},
    "passwd":{"users":[{"name":"core","passwordHash":"$6$rounds=4096$x$y"}]},
    "kernelArguments":{"shouldExist":["rd.neednet=1"]})"),
      TemplateKind::kAttested);
  ASSERT_TRUE(att.ok()) << att.status().ToString();
  Result<json> p = Render(*pub, AttestedValues());
  Result<json> a = Render(*att, AttestedValues());
  ASSERT_TRUE(p.ok() && a.ok());

  json merged = Merge(*p, *a);
  ASSERT_EQ(merged.at("ignition").at("version"), "3.3.0");
  auto [rc, out] = RunIgnitionValidate(Serialize(merged));
  EXPECT_EQ(rc, 0) << out << "\n" << merged.dump(2);

  // The public config on its own, in every version it converts to.
  for (SpecVersion v : {k300, k310, k320, k330}) {
    Result<json> c = ConvertToVersion(*p, v);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto [vrc, vout] = RunIgnitionValidate(Serialize(*c));
    EXPECT_EQ(vrc, 0) << V(v) << ": " << vout;
  }
}

}  // namespace
}  // namespace rackgate::daemon::ignition
