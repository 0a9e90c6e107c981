// Tests of the protocol's bodies: round trips, truncation, malformed fields.
#include "wire/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace rackgate::wire {
namespace {

const std::string kB64 = "AAEC";  // 00 01 02

TEST(ChallengeRequest, ParsesAndRefuses) {
  auto r = ParseChallengeRequest(R"({"ek_public":"AAEC","ak_public":"AAEC","ek_certificate":"AAEC"})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ek_public, (Bytes{0, 1, 2}));
  EXPECT_TRUE(r->ek_certificate.has_value());

  struct Case { const char* body; const char* reason; };
  for (const Case& c : {Case{"", "bad_json"}, Case{"[]", "bad_json"}, Case{"{", "bad_json"},
                        Case{R"({"ak_public":"AAEC"})", "field_missing"},
                        Case{R"({"ek_public":"AAEC"})", "field_missing"},
                        Case{R"({"ek_public":"AAE","ak_public":"AAEC"})", "field_invalid"},
                        Case{R"({"ek_public":1,"ak_public":"AAEC"})", "field_invalid"},
                        Case{R"({"ek_public":"","ak_public":"AAEC"})", "field_invalid"},
                        Case{R"({"ek_public":"AAEC","ak_public":"AAEC","extra":1})", "field_invalid"},
                        Case{R"({"ek_public":"AAEC","ak_public":"AAEC","ek_intermediates":"AAEC"})",
                             "field_invalid"},
                        Case{R"({"ek_public":"AAEC","ak_public":"AAEC","ek_intermediates":["A","B","C","D","E"]})",
                             "field_invalid"}}) {
    auto x = ParseChallengeRequest(c.body);
    ASSERT_FALSE(x.ok()) << c.body;
    EXPECT_EQ(x.status().reason(), c.reason) << c.body;
  }
}

TEST(EvidenceRequest, ParsesPcrsStrictly) {
  const std::string h32(64, 'a');
  auto ok = ParseEvidenceRequest(R"({"session":"s1","secret":"00ff","quote":"AAEC","signature":"AAEC",)"
                                 R"("pcrs":{"sha256":{"0":")" + h32 + R"(","23":")" + h32 + R"("}}})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->pcrs.at(attest::kAlgSha256).size(), 2u);
  EXPECT_FALSE(ok->event_log.has_value());
  for (const std::string& pcrs : std::vector<std::string>{R"({"sha256":{"24":")" + h32 + R"("}})", R"({"sha256":{"00":")" + h32 + R"("}})",
                                 R"({"md5":{"0":")" + h32 + R"("}})", R"({"sha256":{"0":"abcd"}})",
                                 R"({"sha1":{"0":")" + h32 + R"("}})", R"({"sha256":{"-1":")" + h32 + R"("}})",
                                 R"({"sha256":[]})", R"([])"}) {
    auto x = ParseEvidenceRequest(R"({"session":"s1","secret":"00ff","quote":"AAEC","signature":"AAEC","pcrs":)" +
                                  pcrs + "}");
    ASSERT_FALSE(x.ok()) << pcrs;
    EXPECT_EQ(x.status().reason(), "field_invalid") << pcrs;
  }
  auto long_session = ParseEvidenceRequest(R"({"session":")" + std::string(65, 'x') +
                                           R"(","secret":"00","quote":"AAEC","signature":"AAEC","pcrs":{}})");
  EXPECT_FALSE(long_session.ok());
}

// --- round trips and truncation ---------------------------------------------

Bytes Seq(size_t n, uint8_t start = 0) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(start + i * 7);
  return b;
}

ChallengeRequest SomeChallengeRequest() {
  ChallengeRequest r;
  r.ek_public = Seq(300);
  r.ek_certificate = Seq(900, 3);
  r.ek_intermediates = {Seq(40, 1), Seq(41, 2)};
  r.ak_public = Seq(280, 9);
  return r;
}

EvidenceRequest SomeEvidenceRequest() {
  EvidenceRequest e;
  e.session = "c2Vzc2lvbi1pZC0xMjM0";
  e.secret = Seq(32, 5);
  e.quote = Seq(145);
  e.signature = Seq(262, 4);
  for (uint32_t pcr : {0u, 1u, 7u, 23u}) {
    e.pcrs[attest::kAlgSha256][pcr] = Seq(32, static_cast<uint8_t>(pcr));
    e.pcrs[attest::kAlgSha1][pcr] = Seq(20, static_cast<uint8_t>(pcr + 1));
  }
  e.event_log = Seq(5000, 2);
  e.pcr_signature = R"({"sha256":[{"pcrs":[11],"pkfp":"aa","pol":"bb","sig":"AAEC"}]})";
  return e;
}

// Every proper prefix of a body is refused as bad_json.
template <typename Decode>
void ExpectEveryPrefixRefused(const std::string& body, Decode decode) {
  for (size_t n = 0; n < body.size(); ++n) {
    auto r = decode(std::string_view(body).substr(0, n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().reason(), "bad_json") << n;
  }
}

TEST(ChallengeRequest, RoundTripsAndTruncation) {
  const ChallengeRequest r = SomeChallengeRequest();
  const std::string body = EncodeChallengeRequest(r);
  auto back = DecodeChallengeRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  auto parsed = ParseChallengeRequest(body);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, r);
  ChallengeRequest bare;
  bare.ek_public = {1};
  bare.ak_public = {2};
  auto bare_back = DecodeChallengeRequest(EncodeChallengeRequest(bare));
  ASSERT_TRUE(bare_back.ok());
  EXPECT_EQ(*bare_back, bare);
  ExpectEveryPrefixRefused(body, DecodeChallengeRequest);
}

TEST(ChallengeRequest, RefusesOversizedFields) {
  ChallengeRequest r = SomeChallengeRequest();
  r.ek_public = Seq(kMaxTpm2bPublic + 1);
  auto x = DecodeChallengeRequest(EncodeChallengeRequest(r));
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().reason(), "field_invalid");
  EXPECT_NE(x.status().message().find("ek_public"), std::string::npos);
  r = SomeChallengeRequest();
  r.ek_certificate = Seq(kMaxCertificate + 1);
  EXPECT_EQ(DecodeChallengeRequest(EncodeChallengeRequest(r)).status().reason(), "field_invalid");
}

TEST(EvidenceRequest, RoundTripsAndTruncation) {
  const EvidenceRequest e = SomeEvidenceRequest();
  const std::string body = EncodeEvidenceRequest(e);
  auto back = DecodeEvidenceRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, e);
  EvidenceRequest no_log = e;
  no_log.event_log.reset();
  auto parsed = ParseEvidenceRequest(EncodeEvidenceRequest(no_log));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, no_log);
  ExpectEveryPrefixRefused(EncodeEvidenceRequest(no_log), DecodeEvidenceRequest);
  // Without a PCR signature (a machine not booted from a signed UKI).
  EvidenceRequest no_sig = e;
  no_sig.pcr_signature.reset();
  EXPECT_EQ(*DecodeEvidenceRequest(EncodeEvidenceRequest(no_sig)), no_sig);
  EXPECT_EQ(nlohmann::json::parse(body).at("pcr_signature").at("sha256").at(0).at("sig"), "AAEC");
}

TEST(EvidenceRequest, NamesTheMalformedField) {
  const nlohmann::json good = nlohmann::json::parse(EncodeEvidenceRequest(SomeEvidenceRequest()));
  struct Case { const char* field; nlohmann::json value; const char* reason; };
  for (const Case& c : {Case{"secret", "0", "field_invalid"}, Case{"secret", 7, "field_invalid"},
                        Case{"secret", std::string(2 * kMaxSecret + 2, 'a'), "field_invalid"},
                        Case{"quote", "AAE", "field_invalid"}, Case{"quote", "", "field_invalid"},
                        Case{"signature", nlohmann::json::array(), "field_invalid"},
                        Case{"session", "", "field_invalid"}, Case{"event_log", "!!!!", "field_invalid"},
                        Case{"pcrs", "sha256:0", "field_invalid"},
                        Case{"pcr_signature", "{}", "field_invalid"},
                        Case{"pcr_signature", nlohmann::json::array(), "field_invalid"},
                        Case{"pcr_signature",
                             nlohmann::json{{"sha256", std::string(kMaxPcrSignatureField, 'a')}},
                             "field_invalid"}}) {
    nlohmann::json doc = good;
    doc[c.field] = c.value;
    auto x = DecodeEvidenceRequest(doc.dump());
    ASSERT_FALSE(x.ok()) << c.field;
    EXPECT_EQ(x.status().reason(), c.reason) << c.field;
    EXPECT_NE(x.status().message().find(c.field), std::string::npos) << x.status().message();
  }
  for (const char* field : {"session", "secret", "quote", "signature", "pcrs"}) {
    nlohmann::json doc = good;
    doc.erase(field);
    auto x = DecodeEvidenceRequest(doc.dump());
    ASSERT_FALSE(x.ok()) << field;
    EXPECT_EQ(x.status().reason(), "field_missing") << field;
    EXPECT_NE(x.status().message().find(field), std::string::npos);
  }
  nlohmann::json extra = good;
  extra["nonce"] = "00";
  EXPECT_EQ(DecodeEvidenceRequest(extra.dump()).status().reason(), "field_invalid");
}

TEST(Challenge, RoundTripsAndTruncation) {
  Challenge c;
  c.session = "c2Vzc2lvbg";
  c.nonce = Seq(32);
  c.pcr_selection = attest::ParsePcrSelectionList("sha256:0,1,2,7+sha1:7").value();
  c.credential = Seq(326, 1);
  c.expires_in = 120;
  const std::string body = EncodeChallenge(c);
  auto back = DecodeChallenge(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->session, c.session);
  EXPECT_EQ(back->nonce, c.nonce);
  EXPECT_EQ(attest::FormatPcrSelectionList(back->pcr_selection), attest::FormatPcrSelectionList(c.pcr_selection));
  EXPECT_EQ(back->credential, c.credential);
  EXPECT_EQ(back->expires_in, 120);
  ExpectEveryPrefixRefused(body, DecodeChallenge);
}

// The agent reads the appliance's answers: tolerant of fields it does not
// know, strict about the ones it uses.
TEST(Challenge, ParsesAndRefusesMalformed) {
  auto c = DecodeChallenge(
      R"({"session": "s1", "nonce": "00ff", "pcr_selection": "sha256:0,1", "credential": "AAEC", "expires_in": 120})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->session, "s1");
  EXPECT_EQ(c->nonce, (Bytes{0x00, 0xff}));
  ASSERT_EQ(c->pcr_selection.size(), 1u);
  EXPECT_EQ(c->credential, (Bytes{0x00, 0x01, 0x02}));
  EXPECT_TRUE(DecodeChallenge(R"({"session": "s1", "nonce": "00", "pcr_selection": "sha256:0", "credential": "",)"
                              R"( "something_new": [1]})")
                  .ok());
  for (const char* bad : {"", "[]", R"({"session": "s1"})",
                          R"({"session": "s1", "nonce": "0g", "pcr_selection": "sha256:0", "credential": ""})",
                          R"({"session": "s1", "nonce": "00", "pcr_selection": "md5:0", "credential": ""})",
                          R"({"session": "s1", "nonce": "00", "pcr_selection": "sha256:0", "credential": "!"})",
                          R"({"session": "", "nonce": "00", "pcr_selection": "sha256:0", "credential": ""})",
                          R"({"session": "s1", "nonce": "", "pcr_selection": "sha256:0", "credential": ""})"}) {
    EXPECT_FALSE(DecodeChallenge(bad).ok()) << bad;
  }
}

TEST(Evidence, EncodesPerProtocol) {
  EvidenceRequest e;
  e.session = "s";
  e.secret = {0xab, 0xcd};
  e.quote = {1, 2, 3};
  e.signature = {4};
  e.pcrs[attest::kAlgSha256][7] = Bytes(32, 0x11);
  const auto j = nlohmann::json::parse(EncodeEvidenceRequest(e));
  EXPECT_EQ(j.at("secret"), "abcd");
  EXPECT_EQ(j.at("quote"), "AQID");
  EXPECT_EQ(j.at("signature"), "BA==");
  EXPECT_EQ(j.at("pcrs").at("sha256").at("7"), std::string(64, '1'));
  EXPECT_FALSE(j.contains("event_log"));
}

TEST(Token, RoundTripsAndRefusesWhatCannotBeAHeader) {
  Token t{"dG9rZW4tMTIz_-", 900, "node-1", "attested"};
  auto back = DecodeToken(EncodeToken(t));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, t);
  ExpectEveryPrefixRefused(EncodeToken(t), DecodeToken);
  EXPECT_TRUE(DecodeToken(R"({"token": "abc-_", "expires_in": 900, "hostname": "n", "state": "attested"})").ok());
  EXPECT_FALSE(DecodeToken(R"({"token": "a b"})").ok());
  EXPECT_FALSE(DecodeToken(R"({"token": "a\r\nX-Evil: 1"})").ok());
  EXPECT_EQ(DecodeToken(R"({"expires_in": 900})").status().reason(), "field_missing");
  auto odd = DecodeToken(R"({"token": "t", "state": "a\u001b[31m"})");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->state.find('\x1b'), std::string::npos);
}

std::string PemBlock(char fill) {
  return "-----BEGIN CERTIFICATE-----\n" + std::string(64, fill) + "\n-----END CERTIFICATE-----\n";
}

TEST(Token, CaBundleRoundTripsAndIsBounded) {
  Token t{"tok", 900, "node-1", "joined", PemBlock('A') + PemBlock('B')};
  auto back = DecodeToken(EncodeToken(t));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, t);
  ExpectEveryPrefixRefused(EncodeToken(t), DecodeToken);
  // Absent or "" (an appliance before 0.2.0): no bundle, and none encoded.
  EXPECT_EQ(DecodeToken(R"({"token": "t", "ca_bundle": ""})")->ca_bundle, "");
  EXPECT_FALSE(nlohmann::json::parse(EncodeToken({"t", 1, "h", "joined"})).contains("ca_bundle"));
  auto with = [](const std::string& bundle) {
    return DecodeToken(nlohmann::json{{"token", "t"}, {"ca_bundle", bundle}}.dump());
  };
  std::string eight, nine;
  for (int i = 0; i < 8; ++i) eight += PemBlock('C');
  nine = eight + PemBlock('D');
  EXPECT_TRUE(with(eight).ok());
  EXPECT_EQ(with(nine).status().reason(), "field_invalid");
  std::string big = "-----BEGIN CERTIFICATE-----\n" + std::string(kMaxCaBundleBytes, 'A') + "\n-----END CERTIFICATE-----\n";
  EXPECT_EQ(with(big).status().reason(), "field_invalid");
  EXPECT_EQ(with("no pem here").status().reason(), "field_invalid");
  EXPECT_EQ(with("-----BEGIN CERTIFICATE-----\nAAAA\n").status().reason(), "field_invalid");  // unterminated
  EXPECT_EQ(with(PemBlock('A') + std::string(1, '\0')).status().reason(), "field_invalid");
  EXPECT_EQ(with(PemBlock('A') + "\x1b[31m").status().reason(), "field_invalid");
  EXPECT_EQ(DecodeToken(R"({"token": "t", "ca_bundle": 5})").status().reason(), "field_invalid");
}

TEST(Machine, RoundTripsAndHostnameMustBeADnsName) {
  MachineRecord m{"node-1.rack.example", "workers", "joined", true};
  auto back = DecodeMachineRecord(EncodeMachineRecord(m));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, m);
  ExpectEveryPrefixRefused(EncodeMachineRecord(m), DecodeMachineRecord);
  EXPECT_TRUE(DecodeMachineRecord(R"({"hostname": "node-1.rack.example", "pool": "p", "state": "attested"})").ok());
  for (const char* bad : {R"({"hostname": "node 1"})", R"({"hostname": "-x"})", R"({"hostname": "a..b"})",
                          R"({"hostname": "x,O=system:masters"})", R"({"hostname": ""})", R"({})"}) {
    EXPECT_FALSE(DecodeMachineRecord(bad).ok()) << bad;
  }
  EXPECT_TRUE(ValidHostname("a-b.c"));
  EXPECT_FALSE(ValidHostname("a-.c"));
  EXPECT_FALSE(ValidHostname(std::string(64, 'a')));
}

TEST(Csr, RequestAndAnswer) {
  CsrRequest r;
  r.signer = "kubernetes.io/kube-apiserver-client-kubelet";
  r.csr_pem = "PEM";
  r.usages = {"digital signature", "client auth"};
  auto j = nlohmann::json::parse(EncodeCsrRequest(r));
  EXPECT_FALSE(j.contains("tpm_key"));
  EXPECT_EQ(j.at("usages").size(), 2u);
  r.tpm_key = TpmKeyProof{{1}, {2}, {3}};
  j = nlohmann::json::parse(EncodeCsrRequest(r));
  EXPECT_EQ(j.at("tpm_key").at("public"), "AQ==");
  EXPECT_EQ(j.at("tpm_key").at("certify_info"), "Ag==");
  EXPECT_EQ(j.at("tpm_key").at("certify_signature"), "Aw==");

  auto a = DecodeIssuedCertificate(R"({"certificate": "C", "ca": "A", "serial": "0a", "not_after": 1700000000})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->not_after, 1700000000);
  EXPECT_FALSE(DecodeIssuedCertificate(R"({"certificate": "C"})").ok());
}

TEST(Csr, RoundTripsAndTruncation) {
  CsrRequest r;
  r.signer = "kubernetes.io/kubelet-serving";
  r.csr_pem = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
  auto back = DecodeCsrRequest(EncodeCsrRequest(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_FALSE(back->usages.has_value());
  r.usages = std::vector<std::string>{"digital signature", "server auth"};
  r.tpm_key = TpmKeyProof{Seq(90), Seq(120, 1), Seq(72, 2)};
  const std::string body = EncodeCsrRequest(r);
  back = DecodeCsrRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  ExpectEveryPrefixRefused(body, DecodeCsrRequest);

  IssuedCertificate c{"CERT PEM", "CA PEM", "0a1b", 1700000000, 1700086400, true, "joined"};
  auto issued = DecodeIssuedCertificate(EncodeIssuedCertificate(c));
  ASSERT_TRUE(issued.ok());
  EXPECT_EQ(*issued, c);
  ExpectEveryPrefixRefused(EncodeIssuedCertificate(c), DecodeIssuedCertificate);
}

TEST(Csr, RefusesWhatTheApplianceRefuses) {
  const nlohmann::json good = {{"signer", "s"}, {"csr", "PEM"}};
  struct Case { nlohmann::json body; const char* reason; const char* field; };
  nlohmann::json long_usages = good;
  long_usages["usages"] = std::vector<std::string>(kMaxUsages + 1, "client auth");
  nlohmann::json long_usage = good;
  long_usage["usages"] = {std::string(kMaxUsageChars + 1, 'u')};
  nlohmann::json usages_not_list = good;
  usages_not_list["usages"] = "client auth";
  nlohmann::json big = good;
  big["csr"] = std::string(kMaxCsrPem + 1, 'x');
  nlohmann::json half_key = good;
  half_key["tpm_key"] = {{"public", "AQ=="}, {"certify_info", "Ag=="}};
  nlohmann::json bad_key = good;
  bad_key["tpm_key"] = {{"public", "AQ=="}, {"certify_info", "Ag=="}, {"certify_signature", "A"}};
  nlohmann::json extra = good;
  extra["machine"] = "other";
  for (const Case& c : {Case{{{"csr", "PEM"}}, "field_missing", "signer"},
                        Case{{{"signer", "s"}, {"csr", 1}}, "field_missing", "csr"},
                        Case{long_usages, "field_invalid", "usages"}, Case{long_usage, "field_invalid", "usages"},
                        Case{usages_not_list, "field_invalid", "usages"}, Case{big, "csr_malformed", ""},
                        Case{half_key, "field_invalid", "tpm_key.certify_signature"},
                        Case{bad_key, "field_invalid", "tpm_key.certify_signature"},
                        Case{extra, "field_invalid", "machine"}}) {
    auto x = DecodeCsrRequest(c.body.dump());
    ASSERT_FALSE(x.ok()) << c.body.dump().substr(0, 200);
    EXPECT_EQ(x.status().reason(), c.reason) << c.field;
    EXPECT_NE(x.status().message().find(c.field), std::string::npos) << x.status().message();
  }
  EXPECT_EQ(DecodeCsrRequest("[1]").status().reason(), "bad_json");
}

}  // namespace
TEST(Renewal, RoundTripsAndRefusals) {
  CsrRequest r;
  r.signer = "kubernetes.io/kube-apiserver-client-kubelet";
  r.csr_pem = "PEM";
  r.renewal = RenewalProof{"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", Seq(71, 3)};
  const std::string body = EncodeCsrRequest(r);
  auto back = DecodeCsrRequest(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  ExpectEveryPrefixRefused(body, DecodeCsrRequest);

  const nlohmann::json good = {{"signer", "s"}, {"csr", "PEM"}};
  for (const auto& [renewal, field] :
       std::vector<std::pair<nlohmann::json, std::string>>{
           {nlohmann::json("x"), "renewal"},
           {{{"certificate", "C"}}, "renewal.signature"},
           {{{"signature", "AQ=="}}, "renewal.certificate"},
           {{{"certificate", ""}, {"signature", "AQ=="}}, "renewal.certificate"},
           {{{"certificate", "C"}, {"signature", "A"}}, "renewal.signature"},
           {{{"certificate", "C"}, {"signature", "AQ=="}, {"key", "x"}}, "renewal.key"}}) {
    nlohmann::json b = good;
    b["renewal"] = renewal;
    auto x = DecodeCsrRequest(b.dump());
    ASSERT_FALSE(x.ok()) << b.dump();
    EXPECT_EQ(x.status().reason(), "field_invalid") << b.dump();
    EXPECT_NE(x.status().message().find(field), std::string::npos) << x.status().message();
  }
}

TEST(Renewal, SignedMessageBindsNonceAndKey) {
  const Bytes nonce = Seq(32, 1), key = Seq(32, 9);
  const Bytes m = RenewalSignedMessage(nonce, key);
  const std::string label = "rackgate-renewal-v1";
  ASSERT_EQ(m.size(), label.size() + 1 + 2 + 32 + 32);
  EXPECT_EQ(std::string(m.begin(), m.begin() + label.size()), label);
  EXPECT_EQ(m[label.size()], 0);
  EXPECT_EQ(m[label.size() + 1], 0);
  EXPECT_EQ(m[label.size() + 2], 32);
  EXPECT_NE(RenewalSignedMessage(Seq(32, 2), key), m);
  EXPECT_NE(RenewalSignedMessage(nonce, Seq(32, 8)), m);
}

TEST(MachineRecordWire, RenewFraction) {
  MachineRecord m{"node-1", "workers", "joined", false, 0.25};
  auto back = DecodeMachineRecord(EncodeMachineRecord(m));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, m);
  // An older appliance sends none; a nonsense one is ignored.
  auto old = DecodeMachineRecord(R"({"hostname": "node-1"})");
  ASSERT_TRUE(old.ok());
  EXPECT_DOUBLE_EQ(old->renew_fraction, 1.0 / 3.0);
  auto odd = DecodeMachineRecord(R"({"hostname": "node-1", "renew_fraction": 7})");
  ASSERT_TRUE(odd.ok());
  EXPECT_DOUBLE_EQ(odd->renew_fraction, 1.0 / 3.0);
}

// Issue 42: the API server and the node's addresses come from the
// appliance (the pool's `apiserver`, the machine's enrolled IP addresses).
TEST(MachineRecordWire, ApiserverAndAddresses) {
  MachineRecord m{"node-1", "workers", "joined"};
  m.apiserver = "https://api.cluster.example:6443";
  m.addresses = {"10.0.0.6", "fd00::6"};
  const std::string body = EncodeMachineRecord(m);
  auto back = DecodeMachineRecord(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);
  ExpectEveryPrefixRefused(body, DecodeMachineRecord);
  // An older appliance sends neither: "" and none.
  auto old = DecodeMachineRecord(R"({"hostname": "node-1", "kubelet_certificates": "signer"})");
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->apiserver, "");
  EXPECT_TRUE(old->addresses.empty());
  auto empty = DecodeMachineRecord(R"({"hostname": "node-1", "apiserver": "", "addresses": []})");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->apiserver, "");
  std::string many = R"({"hostname": "node-1", "addresses": [)";
  for (size_t i = 0; i <= kMaxAddresses; ++i) many += (i ? ", " : "") + std::string("\"10.0.0.1\"");
  many += "]}";
  for (const std::string& bad : std::vector<std::string>{
           R"({"hostname": "node-1", "apiserver": "http://api:6443"})",
           R"({"hostname": "node-1", "apiserver": "https://api\n  insecure-skip-tls-verify: true"})",
           R"({"hostname": "node-1", "apiserver": "https://api\"x"})",
           R"({"hostname": "node-1", "apiserver": 6443})",
           R"({"hostname": "node-1", "addresses": "10.0.0.6"})",
           R"({"hostname": "node-1", "addresses": [6]})",
           R"({"hostname": "node-1", "addresses": ["10.0.0.300"]})",
           R"({"hostname": "node-1", "addresses": ["node-1.example"]})",
           R"({"hostname": "node-1", "addresses": ["10.0.0.6,DNS:evil"]})",
           many,
       }) {
    auto r = DecodeMachineRecord(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().reason(), "field_invalid") << bad;
  }
  EXPECT_TRUE(ValidIpLiteral("fd00::6"));
  EXPECT_FALSE(ValidIpLiteral("fd00::6/64"));
  EXPECT_TRUE(ValidApiserverUrl("https://[fd00::1]:6443"));
  EXPECT_FALSE(ValidApiserverUrl("https://api x"));
}

TEST(Report, RoundTripsAndRefusals) {
  ProvisioningReport r{"failed", "config", "template_value_missing", "the value 'x' is missing", 3,
                       {"attested"}};
  const std::string body = EncodeProvisioningReport(r);
  auto back = DecodeProvisioningReport(body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  ExpectEveryPrefixRefused(body, DecodeProvisioningReport);
  // The appliance's answer, the bytes it has always sent.
  EXPECT_EQ(EncodeReportRecorded(), R"({"recorded":true})");
  auto ok = DecodeProvisioningReport(R"({"outcome": "ok", "step": "csr", "done": ["config_applied"]})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->exit_status, 0);

  auto esc = DecodeProvisioningReport(R"({"outcome": "failed", "step": "csr", "reason": "x", "message": "a\u001b[31mb\nc"})");
  ASSERT_TRUE(esc.ok());
  for (char c : esc->message) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << int(c);

  for (const char* bad : {
           R"({"outcome": "maybe", "step": "csr"})",
           R"({"outcome": "ok", "step": "CSR!"})",
           R"({"outcome": "failed", "step": "csr"})",
           R"({"outcome": "ok", "step": "csr", "exit_status": 256})",
           R"({"outcome": "ok", "step": "csr", "exit_status": -1})",
           R"({"outcome": "ok", "step": "csr", "done": ["a b"]})",
           R"({"outcome": "ok", "step": "csr", "hostname": "other"})",
       }) {
    auto x = DecodeProvisioningReport(bad);
    EXPECT_FALSE(x.ok()) << bad;
  }
  nlohmann::json long_message = {{"outcome", "ok"}, {"step", "csr"}, {"message", std::string(kMaxReportMessage + 1, 'm')}};
  EXPECT_FALSE(DecodeProvisioningReport(long_message.dump()).ok());
  nlohmann::json many = {{"outcome", "ok"}, {"step", "csr"}, {"done", std::vector<std::string>(kMaxReportDone + 1, "x")}};
  EXPECT_FALSE(DecodeProvisioningReport(many.dump()).ok());
}

}  // namespace rackgate::wire
