// Tests of template parsing: structure, bounds and placeholders.
#include "core/ignition.h"

#include <gtest/gtest.h>

#include "core/ignition/testing/test_util.h"

namespace rackgate::core::ignition {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------
// Templates

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

// A number no double holds is refused, not thrown (ignition_template_fuzz
// found nlohmann's out_of_range 406 escaping the parser).
TEST(Template, NumberTooLargeIsRefused) {
  const std::string huge = Tmpl(R"("storage":{"files":[{"path":"/a","mode":66666666660000000000e000000000000000000000210468}]})");
  Result<Template> t = ParseTemplate(huge, TemplateKind::kAttested);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().reason(), "template_invalid");
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

}  // namespace
}  // namespace rackgate::core::ignition
