// Tests of rendering templates, and of the result against the real ignition-validate.
#include "core/ignition.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>


#include "core/ignition/testing/test_util.h"

namespace rackgate::core::ignition {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------
// Render
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
}  // namespace rackgate::core::ignition
