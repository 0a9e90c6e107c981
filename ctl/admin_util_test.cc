#include "ctl/admin_util.h"

#include <gtest/gtest.h>

#include "ctl/command_line.h"
#include "ctl/json_util.h"
#include "wire/admin_machines.h"

namespace rackgate::ctl {
namespace {

TEST(AdminUtil, JsonErrorsNameFileLineAndColumn) {
  auto j = ParseJsonText("{\n  \"a\": 1,\n  \"b\": tru\n}\n", "policy.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().reason(), "bad_json");
  EXPECT_EQ(j.status().message().rfind("policy.json:3:", 0), 0u) << j.status().message();
  j = ParseJsonText("{\"a\": 1,}", "t.ign");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message().rfind("t.ign:1:9: ", 0), 0u) << j.status().message();
  j = ParseJsonText("", "empty.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message().rfind("empty.json:1:1: ", 0), 0u) << j.status().message();
  EXPECT_TRUE(ParseJsonText("{\"a\": [1, 2]}", "ok.json").ok());
}

TEST(AdminUtil, HelpCommandReadsTheUsageLine) {
  EXPECT_EQ(HelpCommand("Usage: rackgatectl pool put NAME [--x]\n"), "pool put");
  EXPECT_EQ(HelpCommand("Usage: rackgatectl ek verify --roots FILE\n"), "ek verify");
  EXPECT_EQ(HelpCommand("Usage: rackgatectl list [--pool POOL]\n"), "list");
  EXPECT_EQ(HelpCommand("Usage: rackgatectl import FILE [--json]\n"), "import");
  EXPECT_EQ(HelpCommand("Usage: rackgatectl verify-quote --ak-public AK.pub\n"), "verify-quote");
  EXPECT_EQ(HelpCommand("no usage line"), "");
}

TEST(AdminUtil, CertificatesAreRecognised) {
  EXPECT_TRUE(LooksLikeCertificate("-----BEGIN CERTIFICATE-----\nMII"));
  EXPECT_TRUE(LooksLikeCertificate(std::string("\x30\x82\x03\x10", 4)));
  // A TPM2B_PUBLIC: a two-byte size, then TPMT_PUBLIC (type 0x0001, RSA).
  EXPECT_FALSE(LooksLikeCertificate(std::string("\x01\x3a\x00\x01", 4)));
  EXPECT_FALSE(LooksLikeCertificate(""));
}

TEST(AdminUtil, TableColumnsFitTheWidestCell) {
  testing::internal::CaptureStdout();
  Table t({"HOSTNAME", "POOL"});
  t.Add({"a-very-long-hostname-of-a-machine", "p"});
  t.Add({"n1", "workers"});
  t.Print();
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out,
            "HOSTNAME                           POOL\n"
            "a-very-long-hostname-of-a-machine  p\n"
            "n1                                 workers\n");
}

// --json prints an answer as rackgated's body parsed and indented by two;
// the wire decoders read the same text, and a malformed answer is unusable.
TEST(AdminUtil, AnswersPrintIndentedAndDecodeThroughWire) {
  const AdminAnswer answer{"{\"b\":[1,2],\"a\":\"x\"}"};
  testing::internal::CaptureStdout();
  PrintAnswer(answer);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "{\n  \"a\": \"x\",\n  \"b\": [\n    1,\n    2\n  ]\n}\n");
  int code = kExitOk;
  testing::internal::CaptureStderr();
  auto m = DecodeAnswer(AdminAnswer{"[]"}, wire::DecodeMachineView, &code);  // not an object
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(m.ok());
  EXPECT_EQ(code, kExitUnusable);
  EXPECT_EQ(err.rfind("rackgatectl: rackgated's answer is malformed: ", 0), 0u) << err;
}

}  // namespace
}  // namespace rackgate::ctl
