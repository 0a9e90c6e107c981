#include "kube/csr.h"

#include <gtest/gtest.h>

#include <string>

#include "base/base64.h"
#include "kube/csr_json.h"
#include "kube/untrusted.h"

namespace rackgate::kube {
namespace {

using json = nlohmann::json;

const std::string kRequestPem = "-----BEGIN CERTIFICATE REQUEST-----\nMIIBcsr\n-----END CERTIFICATE REQUEST-----\n";
const std::string kCertPem = "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n";

// A kubelet's client CSR as a Kubernetes 1.20 API server lists it, with a
// field we do not know.
json Sample() {
  return json::parse(R"({
    "kind": "CertificateSigningRequest",
    "apiVersion": "certificates.k8s.io/v1",
    "metadata": {
      "name": "node-csr-Ab_9-x.y",
      "uid": "5b0a4c3e-0f0d-4c1a-9d0e-1f2a3b4c5d6e",
      "resourceVersion": "1234",
      "creationTimestamp": "2026-11-28T01:02:03Z",
      "labels": {"a": "b"},
      "managedFields": [{"manager": "kubelet", "operation": "Update"}]
    },
    "spec": {
      "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
      "username": "system:bootstrap:abcdef",
      "uid": "",
      "groups": ["system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"],
      "usages": ["digital signature", "key encipherment", "client auth"],
      "extra": {"x": ["y"]},
      "futureField": 7
    },
    "status": {}
  })");
}

json WithRequest(json j) {
  j["spec"]["request"] = base64::Encode(kRequestPem);
  return j;
}

Result<Csr> Parse(const json& j) { return ParseCsrJson(j.dump()); }

void ExpectInvalid(const json& j, const std::string& field) {
  Result<Csr> c = Parse(j);
  ASSERT_FALSE(c.ok()) << field;
  EXPECT_EQ(c.status().reason(), "kube_csr_invalid");
  EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().message();
}

TEST(ParseCsr, ReadsWhatAnApproverNeeds) {
  Result<Csr> c = Parse(WithRequest(Sample()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "node-csr-Ab_9-x.y");
  EXPECT_EQ(c->uid, "5b0a4c3e-0f0d-4c1a-9d0e-1f2a3b4c5d6e");
  EXPECT_EQ(c->resource_version, "1234");
  EXPECT_EQ(c->creation_timestamp, 1795827723);
  EXPECT_EQ(c->signer_name, "kubernetes.io/kube-apiserver-client-kubelet");
  EXPECT_EQ(c->username, "system:bootstrap:abcdef");
  EXPECT_EQ(c->requester_uid, "");
  EXPECT_EQ(c->groups.size(), 3u);
  EXPECT_EQ(c->usages, (std::vector<std::string>{"digital signature", "key encipherment", "client auth"}));
  EXPECT_EQ(c->request_pem, kRequestPem);
  EXPECT_FALSE(c->expiration_seconds.has_value());
  EXPECT_TRUE(c->conditions.empty());
  EXPECT_FALSE(c->has_certificate);
  EXPECT_FALSE(c->Approved() || c->Denied() || c->Failed());
}

TEST(ParseCsr, ConditionsAndCertificate) {
  json j = WithRequest(Sample());
  j["status"] = {{"conditions", {{{"type", "Approved"}, {"status", "True"}, {"reason", "AutoApproved"},
                                  {"message", "ok"}, {"lastUpdateTime", "2026-11-28T01:02:04Z"}}}},
                 {"certificate", base64::Encode(kCertPem)}};
  j["spec"]["expirationSeconds"] = 86400;
  Result<Csr> c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->conditions.size(), 1u);
  EXPECT_EQ(c->conditions[0].reason, "AutoApproved");
  EXPECT_TRUE(c->Approved());
  EXPECT_FALSE(c->Denied());
  EXPECT_TRUE(c->has_certificate);
  EXPECT_EQ(c->certificate_pem, kCertPem);
  EXPECT_EQ(c->expiration_seconds, 86400);
}

TEST(ParseCsr, Refusals) {
  const json ok = WithRequest(Sample());
  json j = ok;
  j["metadata"].erase("name");
  ExpectInvalid(j, "metadata.name");
  for (const char* bad : {"a/b", "a b", "..", "", "a%2fb", "\xc3\xa9"}) {
    j = ok;
    j["metadata"]["name"] = bad;
    ExpectInvalid(j, "metadata.name");
  }
  j = ok;
  j["metadata"]["name"] = std::string(kMaxCsrNameChars + 1, 'a');
  ExpectInvalid(j, "metadata.name");
  j = ok;
  j["metadata"]["resourceVersion"] = 1234;
  ExpectInvalid(j, "metadata.resourceVersion");
  j = ok;
  j["metadata"]["creationTimestamp"] = "2026-11-28 01:02:03";
  ExpectInvalid(j, "metadata.creationTimestamp");
  j = ok;
  j["spec"].erase("request");
  ExpectInvalid(j, "spec.request");
  j = ok;
  j["spec"]["request"] = "not base64!";
  ExpectInvalid(j, "spec.request");
  j = ok;
  j["spec"]["request"] = base64::Encode(std::string(kMaxCsrRequestBytes + 1, 'x'));
  ExpectInvalid(j, "spec.request");
  j = ok;
  j["spec"].erase("signerName");
  ExpectInvalid(j, "spec.signerName");
  j = ok;
  j["spec"]["usages"] = json::array();
  for (size_t i = 0; i <= kMaxCsrUsages; ++i) j["spec"]["usages"].push_back("client auth");
  ExpectInvalid(j, "spec.usages");
  j = ok;
  j["spec"]["usages"] = "client auth";
  ExpectInvalid(j, "spec.usages");
  j = ok;
  j["spec"]["groups"] = json::array();
  for (size_t i = 0; i <= kMaxCsrGroups; ++i) j["spec"]["groups"].push_back("g");
  ExpectInvalid(j, "spec.groups");
  j = ok;
  j["spec"]["groups"] = {std::string(kMaxCsrGroupBytes + 1, 'g')};
  ExpectInvalid(j, "spec.groups");
  j = ok;
  j["spec"]["groups"] = {1};
  ExpectInvalid(j, "spec.groups");
  j = ok;
  j["status"]["conditions"] = json::array();
  for (size_t i = 0; i <= kMaxCsrConditions; ++i) j["status"]["conditions"].push_back({{"type", "Failed"}});
  ExpectInvalid(j, "status.conditions");
  j = ok;
  j["status"]["conditions"] = {{{"status", "True"}}};
  ExpectInvalid(j, "status.conditions[].type");
  j = ok;
  j["status"]["certificate"] = base64::Encode(std::string(kMaxCsrCertificateBytes + 1, 'c'));
  ExpectInvalid(j, "status.certificate");
  j = ok;
  j["kind"] = "Secret";
  ExpectInvalid(j, "kind");
  j = ok;
  j["apiVersion"] = "certificates.k8s.io/v1beta1";
  ExpectInvalid(j, "apiVersion");
  j = ok;
  j["spec"] = "x";
  ExpectInvalid(j, "not an object");
  ExpectInvalid(json::array(), "not a JSON object");
  ExpectInvalid(json("x"), "not a JSON object");
}

TEST(ParseCsr, NotJsonAndTooDeep) {
  EXPECT_EQ(ParseCsrJson("{").status().reason(), "kube_csr_invalid");
  EXPECT_EQ(ParseCsrJson("").status().reason(), "kube_csr_invalid");
  std::string deep = WithRequest(Sample()).dump();
  deep.insert(deep.size() - 1, ",\"x\":" + std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']'));
  Result<Csr> c = ParseCsrJson(deep);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("too deep"), std::string::npos);
  EXPECT_EQ(ParseCsrJson(std::string(kMaxCsrObjectBytes + 1, ' ')).status().reason(), "kube_csr_invalid");
}

// The bound counts brackets on the text (base/json_depth.h): the object and 31
// arrays inside it are 32 and pass; one array more is refused, empty or not.
TEST(ParseCsr, DepthBoundCountsBrackets) {
  const std::string text = WithRequest(Sample()).dump();
  auto with = [&](size_t arrays) {
    std::string t = text;
    t.insert(t.size() - 1, ",\"x\":" + std::string(arrays, '[') + std::string(arrays, ']'));
    return t;
  };
  EXPECT_TRUE(ParseCsrJson(with(kMaxJsonDepth - 1)).ok());
  EXPECT_FALSE(ParseCsrJson(with(kMaxJsonDepth)).ok());
}

TEST(ParseCsr, EveryTruncationIsRefused) {
  const std::string text = WithRequest(Sample()).dump();
  ASSERT_TRUE(ParseCsrJson(text).ok());
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_FALSE(ParseCsrJson(std::string_view(text).substr(0, n)).ok()) << n;
  }
}

TEST(ApprovalBody, RoundTrip) {
  Result<Csr> c = Parse(WithRequest(Sample()));
  ASSERT_TRUE(c.ok());
  const std::string body = ApprovalBody(*c, true, "RackgateApproved", "attested \"node-1\"", 1795827800);
  Result<Csr> back = ParseCsrJson(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->Approved());
  EXPECT_EQ(back->name, c->name);
  EXPECT_EQ(back->resource_version, "1234");
  EXPECT_EQ(back->request_pem, kRequestPem);
  EXPECT_EQ(back->usages, c->usages);
  ASSERT_EQ(back->conditions.size(), 1u);
  EXPECT_EQ(back->conditions[0].reason, "RackgateApproved");
  EXPECT_EQ(back->conditions[0].message, "attested \"node-1\"");
  const json doc = json::parse(body);
  EXPECT_EQ(doc.at("apiVersion"), "certificates.k8s.io/v1");
  EXPECT_EQ(doc.at("kind"), "CertificateSigningRequest");
  EXPECT_EQ(doc.at("status").at("conditions").at(0).at("lastUpdateTime"), "2026-11-28T01:03:20Z");
  EXPECT_EQ(doc.at("status").at("conditions").at(0).at("status"), "True");
  // The whole spec and metadata as read, unknown fields too: the update
  // must carry them.
  EXPECT_EQ(doc.at("spec").at("futureField"), 7);
  EXPECT_EQ(doc.at("metadata").at("labels").at("a"), "b");
  EXPECT_EQ(doc.at("metadata").at("uid"), c->uid);
}

// Issue 40, item 2: the body names the object the decision was made for
// (uid and resourceVersion of the Csr), whatever its object_json holds, so
// the API server refuses it (409) for a CSR re-created under the name.
TEST(ApprovalBody, Issue40CarriesTheUidAndResourceVersionOfTheDecidedObject) {
  Result<Csr> c = Parse(WithRequest(Sample()));
  ASSERT_TRUE(c.ok());
  Csr decided = *c;
  decided.uid = "11111111-2222-3333-4444-555555555555";
  decided.resource_version = "77";
  const json doc = json::parse(ApprovalBody(decided, true, "r", "", 0));
  EXPECT_EQ(doc.at("metadata").at("uid"), "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(doc.at("metadata").at("resourceVersion"), "77");
  EXPECT_EQ(doc.at("metadata").at("name"), c->name);
  decided.object_json = "{}";
  const json bare = json::parse(ApprovalBody(decided, false, "r", "", 0));
  EXPECT_EQ(bare.at("metadata").at("uid"), "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(bare.at("metadata").at("resourceVersion"), "77");
}

TEST(ApprovalBody, DenyKeepsOtherConditionsAndReplacesItsOwnType) {
  json j = WithRequest(Sample());
  j["status"]["conditions"] = {{{"type", "Failed"}, {"status", "False"}},
                               {{"type", "Denied"}, {"status", "False"}, {"reason", "old"}}};
  Result<Csr> c = Parse(j);
  ASSERT_TRUE(c.ok());
  Result<Csr> back = ParseCsrJson(ApprovalBody(*c, false, "RackgateDenied", "", 0));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->conditions.size(), 2u);
  EXPECT_EQ(back->conditions[0].type, "Failed");
  EXPECT_EQ(back->conditions[1].type, "Denied");
  EXPECT_EQ(back->conditions[1].reason, "RackgateDenied");
  EXPECT_TRUE(back->Denied());
  EXPECT_FALSE(back->Approved());
}

TEST(ApprovalBody, InvalidUtf8InAMessageIsReplacedNotThrown) {
  Result<Csr> c = Parse(WithRequest(Sample()));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(ParseCsrJson(ApprovalBody(*c, true, "r", "bad \xff byte", 0)).ok());
}

TEST(CsrList, PageWithASkippedItem) {
  json bad = WithRequest(Sample());
  bad["metadata"]["name"] = "evil/name";
  const json page = {{"kind", "CertificateSigningRequestList"},
                     {"apiVersion", "certificates.k8s.io/v1"},
                     {"metadata", {{"resourceVersion", "999"}, {"continue", "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"}}},
                     {"items", {WithRequest(Sample()), bad}}};
  Result<CsrList> list = ParseCsrListJson(page.dump());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->resource_version, "999");
  EXPECT_EQ(list->continue_token, "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ");
  ASSERT_EQ(list->items.size(), 1u);
  ASSERT_EQ(list->skipped.size(), 1u);
  EXPECT_EQ(list->skipped[0].rfind("evil/name: ", 0), 0u) << list->skipped[0];
}

TEST(CsrList, Refusals) {
  EXPECT_EQ(ParseCsrListJson("[]").status().reason(), "kube_response_invalid");
  EXPECT_EQ(ParseCsrListJson(R"({"kind":"PodList","items":[]})").status().reason(), "kube_response_invalid");
  EXPECT_EQ(ParseCsrListJson(R"({"metadata":{}})").status().reason(), "kube_response_invalid");
  EXPECT_EQ(ParseCsrListJson(R"({"metadata":{"resourceVersion":"1 2"},"items":[]})").status().reason(),
            "kube_response_invalid");
  Result<CsrList> empty = ParseCsrListJson(R"({"metadata":{"resourceVersion":"5"},"items":null})");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->items.empty());
}

TEST(Rfc3339, ParseAndFormat) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339("2026-11-28T01:02:03Z"), 1795827723);
  EXPECT_EQ(ParseRfc3339("2026-11-28T01:02:03.123456Z"), 1795827723);
  EXPECT_EQ(ParseRfc3339("2026-11-28T02:02:03+01:00"), 1795827723);
  EXPECT_EQ(ParseRfc3339("2024-02-29T00:00:00Z"), 1709164800);
  for (const char* bad : {"", "2026-11-28", "2026-11-28T01:02:03", "2026-13-01T00:00:00Z",
                          "2026-11-31T00:00:00Z", "2023-02-29T00:00:00Z", "2026-11-28T24:00:00Z",
                          "2026-11-28T01:02:60Z", "2026-11-28T01:02:03.Z", "2026-11-28T01:02:03Zx",
                          "2026-11-28t01:02:03z", "+2026-11-28T01:02:03Z"}) {
    EXPECT_FALSE(ParseRfc3339(bad).has_value()) << bad;
  }
  EXPECT_EQ(FormatRfc3339(1795827723), "2026-11-28T01:02:03Z");
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
}

}  // namespace
}  // namespace rackgate::kube
