// The corpus of real vendor EK certificates (testdata/ekcerts/, issue 41):
// every leaf of testdata/ekcerts/leaves/ verified against the vendor CAs of
// testdata/ekcerts/ca/ loaded as an operator's ek_roots folder, with the
// verdict testdata/ekcerts/manifest.tsv and docs/ek-vendors.md state for it.
#include "attest/ek_cert.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/testing/test_util.h"

namespace rackgate::attest {
namespace {

// What the corpus holds; a change to the folders must change these (and the
// figure in docs/ek-vendors.md and testdata/ekcerts/README.md).
constexpr size_t kRealLeaves = 17;
constexpr size_t kVendorCas = 215;
// Files of ca/ as loicsikidi/tpm-ca-certificates stores them: DER followed
// by a newline (AMD fTPM CAs). Loading takes them as the CAs they are.
constexpr const char* kDerWithNewline[] = {
    "tpm-ca-certificates_src_AMD_AMD-fTPM-ECC-ICA-PHXFamily.crt",
    "tpm-ca-certificates_src_AMD_AMD-fTPM-RSA-ICA-PHXFamily.crt",
};

std::string CorpusDir() {
  if (const char* env = std::getenv("RACKGATE_TESTDATA_DIR")) return std::string(env) + "/ekcerts";
  return testing::SourcePath("testdata/ekcerts");
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// One line of manifest.tsv (its header line names the columns).
struct Row {
  std::string leaf;        // file name under leaves/
  std::string vendor;      // for the reader; docs/ek-vendors.md groups by it
  int64_t verify_at = 0;   // unix seconds, inside the leaf's validity
  std::string verdict;     // "accept" or "refuse"
  std::string reason;      // "-" for accept; else the Status reason
  std::string relaxation;  // "-", or the kEkRelax* name that turns the refusal into acceptance
  std::string anchor;      // SHA-256 of the anchor the path ends at ("-" when none is reached)
  std::string manufacturer;  // EkCertInfo.tpm_manufacturer on acceptance ("-" when absent)
};

int64_t ParseDay(const std::string& day) {  // "YYYY-MM-DD", midnight UTC
  std::tm tm{};
  std::istringstream in(day);
  in >> std::get_time(&tm, "%Y-%m-%d");
  if (in.fail()) throw std::runtime_error("bad date in manifest: " + day);
  return static_cast<int64_t>(timegm(&tm));
}

std::vector<Row> ReadManifest() {
  std::ifstream f(CorpusDir() + "/manifest.tsv");
  if (!f) throw std::runtime_error("cannot open manifest.tsv");
  std::vector<Row> rows;
  std::string line;
  bool header = true;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {  // the column names
      header = false;
      continue;
    }
    std::vector<std::string> cols;
    std::string col;
    std::istringstream in(line);
    while (std::getline(in, col, '\t')) cols.push_back(col);
    if (cols.size() < 8) throw std::runtime_error("manifest line with too few columns: " + line);
    rows.push_back(Row{cols[0], cols[1], ParseDay(cols[2]), cols[3], cols[4], cols[5], cols[6],
                       cols[7]});
  }
  return rows;
}

// Intel's EK certificate service answers JSON whose "certificate" is the DER
// in base64url (padding as %3D), as tpm2_getekcertificate reads it.
std::vector<uint8_t> DerFromIntelJson(const std::vector<uint8_t>& json) {
  const std::string text(json.begin(), json.end());
  const std::string key = "\"certificate\":\"";
  const size_t at = text.find(key);
  if (at == std::string::npos) throw std::runtime_error("no certificate in Intel JSON");
  const size_t end = text.find('"', at + key.size());
  if (end == std::string::npos) throw std::runtime_error("unterminated certificate in Intel JSON");
  std::string b64 = text.substr(at + key.size(), end - at - key.size());
  for (size_t pos; (pos = b64.find("%3D")) != std::string::npos;) b64.replace(pos, 3, "=");
  std::replace(b64.begin(), b64.end(), '-', '+');
  std::replace(b64.begin(), b64.end(), '_', '/');
  while (b64.size() % 4 != 0) b64.push_back('=');
  std::vector<uint8_t> out(b64.size());
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0) throw std::runtime_error("bad base64 in Intel JSON");
  const size_t pad = static_cast<size_t>(std::count(b64.end() - 2, b64.end(), '='));
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

// The leaf as its source holds it: NV bytes (header, padding), DER, PEM, or
// Intel's JSON answer, which the corpus test unwraps (rackgatectl ek-cert
// import does it for operators).
std::vector<uint8_t> LeafBytes(const Row& row) {
  std::vector<uint8_t> bytes = ReadAll(CorpusDir() + "/leaves/" + row.leaf);
  if (row.leaf.ends_with(".json")) return DerFromIntelJson(bytes);
  return bytes;
}

EkTrustStore LoadVendorCas() {
  Result<EkTrustStore> store = EkTrustStore::Load({CorpusDir() + "/ca"}, {});
  if (!store.ok()) throw std::runtime_error("ca/ refused: " + store.status().ToString());
  return std::move(store).value();
}

std::string Describe(const Status& s) { return s.ok() ? "accepted" : s.ToString(); }

class EkCorpusTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { rows_ = new std::vector<Row>(ReadManifest()); }
  static void TearDownTestSuite() {
    delete rows_;
    rows_ = nullptr;
  }
  static const std::vector<Row>& rows() { return *rows_; }

 private:
  static std::vector<Row>* rows_;
};
std::vector<Row>* EkCorpusTest::rows_ = nullptr;

TEST_F(EkCorpusTest, FolderLoadsWholeAsAnOperatorCollectsIt) {
  EkTrustStore store = LoadVendorCas();
  std::set<std::string> distinct;
  size_t self_signed = 0;
  for (const EkAnchor& a : store.Anchors()) {
    if (distinct.insert(a.sha256).second && a.self_signed) ++self_signed;
  }
  // The folder holds some CAs twice (the same root from two collections):
  // loading notes each repeat and skips it. The only other notes are the
  // files it cannot take, each named; the rest of the folder still loads.
  size_t repeats = 0;
  for (const std::string& note : store.LoadNotes()) {
    if (note.ends_with("skipped: already an anchor")) {
      ++repeats;
      continue;
    }
    ADD_FAILURE() << "load note: " << note;
  }
  EXPECT_GT(repeats, 0u);
  for (const char* file : kDerWithNewline) {
    bool loaded = false;
    for (const EkAnchor& a : store.Anchors()) loaded = loaded || a.source.ends_with(file);
    EXPECT_TRUE(loaded) << file << " is not an anchor";
  }
  EXPECT_EQ(distinct.size(), kVendorCas);
  // Roots and intermediates mixed, as Keylime ships its store: most anchors
  // are not self-signed.
  EXPECT_GT(distinct.size() - self_signed, self_signed);
  // GlobalSign's TPM ECC root and STMicro's ECC root 01 (which it issued) end
  // at 2038-01-19 03:14:07 UTC, the last second of a signed 32-bit time_t.
  size_t at_2038_edge = 0;
  for (const EkAnchor& a : store.Anchors()) {
    const bool named =
        a.subject.find("GlobalSign Trusted Platform Module ECC Root CA") != std::string::npos ||
        a.subject.find("STM TPM ECC Root CA 01") != std::string::npos;
    if (named && a.not_after == 2147483647) ++at_2038_edge;
  }
  EXPECT_GE(at_2038_edge, 2u);

  // Every leaf file has its line in the manifest, and no line lacks its file.
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(CorpusDir() + "/leaves")) {
    files.insert(e.path().filename().string());
  }
  std::set<std::string> listed;
  for (const Row& r : rows()) {
    EXPECT_TRUE(listed.insert(r.leaf).second) << "listed twice: " << r.leaf;
  }
  EXPECT_EQ(files, listed);
  EXPECT_EQ(rows().size(), kRealLeaves);
  std::cout << "ek corpus: " << rows().size() << " real leaves and " << distinct.size()
            << " vendor CAs (" << self_signed << " self-signed)\n";
}

// Checks one manifest line; counts what it showed in `tally`.
struct Tally {
  size_t accepted = 0, relaxed = 0, refused = 0;
};

void CheckRow(const EkTrustStore& store, const Row& row, Tally* tally) {
  SCOPED_TRACE(row.leaf);
  const std::vector<uint8_t> leaf = LeafBytes(row);
  Result<EkCertInfo> got = VerifyEkCertificate(store, leaf, row.verify_at);
  std::cout << row.leaf << ": "
            << (got.ok() ? "accepted, anchor " + got->anchor_subject : got.status().ToString())
            << "\n";
  if (row.verdict == "accept") {
    ASSERT_TRUE(got.ok()) << Describe(got.status());
    EXPECT_EQ(got->anchor_sha256, row.anchor);
    EXPECT_TRUE(got->relaxations_used.empty());
    EXPECT_EQ(got->tpm_manufacturer.empty() ? "-" : got->tpm_manufacturer, row.manufacturer);
    ++tally->accepted;
    return;
  }
  ASSERT_EQ(row.verdict, "refuse");
  ASSERT_FALSE(got.ok()) << "accepted, anchor " << got->anchor_subject;
  EXPECT_EQ(got.status().reason(), row.reason) << got.status().ToString();
  if (row.relaxation == "-") {
    // Nothing an operator may grant would accept it: the message offers nothing.
    EXPECT_EQ(got.status().message().find("ek_anchor_relaxations"), std::string::npos)
        << got.status().ToString();
    ++tally->refused;
    return;
  }
  // Refused by default, naming the setting and the anchor that could grant it...
  EXPECT_NE(got.status().message().find("\"" + row.relaxation + "\""), std::string::npos)
      << got.status().ToString();
  EXPECT_NE(got.status().message().find(row.anchor), std::string::npos) << got.status().ToString();
  EXPECT_NE(got.status().message().find("ek_anchor_relaxations"), std::string::npos)
      << got.status().ToString();
  // ... and accepted once that anchor is granted it, naming what it used.
  EkTrustStore granted = LoadVendorCas();
  ASSERT_TRUE(granted.AllowForAnchor(row.anchor, row.relaxation).ok());
  Result<EkCertInfo> again = VerifyEkCertificate(granted, leaf, row.verify_at);
  ASSERT_TRUE(again.ok()) << Describe(again.status());
  EXPECT_EQ(again->anchor_sha256, row.anchor);
  EXPECT_EQ(again->relaxations_used, std::vector<std::string>{row.relaxation});
  EXPECT_EQ(again->tpm_manufacturer.empty() ? "-" : again->tpm_manufacturer, row.manufacturer);
  ++tally->relaxed;
}

TEST_F(EkCorpusTest, EachLeafVerifiesOrIsRefusedAsDocumented) {
  const EkTrustStore store = LoadVendorCas();
  Tally tally;
  for (const Row& row : rows()) CheckRow(store, row, &tally);
  std::cout << "ek corpus: " << tally.accepted << " accepted, " << tally.relaxed
            << " accepted only with a per-anchor relaxation, " << tally.refused
            << " refused as documented\n";
  EXPECT_EQ(tally.accepted + tally.relaxed + tally.refused, rows().size());
}

bool Contains(const std::vector<uint8_t>& haystack, const std::vector<uint8_t>& needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) !=
         haystack.end();
}

Row RowOf(const std::vector<Row>& rows, const std::string& leaf) {
  for (const Row& r : rows) {
    if (r.leaf == leaf) return r;
  }
  throw std::runtime_error("no manifest line for " + leaf);
}

// Intel PTT's EK certificates carry DER that strict parsers refuse; they
// parse here, the facts come out, and the certificate is kept byte for byte
// (signatures are checked over what was received, never a re-encoding).
TEST_F(EkCorpusTest, IntelPttDerQuirksParse) {
  const std::vector<uint8_t> der = LeafBytes(RowOf(rows(), "cmc_intel_glk_ekcertservice.json"));
  // The quirks are there: basicConstraints with the default cA FALSE written
  // out, subjectDirectoryAttributes with an explicit critical FALSE, and a
  // UTF8String country in the issuer.
  EXPECT_TRUE(Contains(der, {0x55, 0x1d, 0x13, 0x01, 0x01, 0xff, 0x04, 0x05, 0x30, 0x03, 0x01, 0x01,
                             0x00}));
  EXPECT_TRUE(Contains(der, {0x55, 0x1d, 0x09, 0x01, 0x01, 0x00}));
  EXPECT_TRUE(Contains(der, {0x06, 0x03, 0x55, 0x04, 0x06, 0x0c, 0x02, 'U', 'S'}));
  Result<EkCertInfo> info = ParseEkCertificate(der);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->der, der);
  EXPECT_EQ(info->tpm_manufacturer, "id:494E5443");
  EXPECT_EQ(info->tpm_model, "GLK");
  EXPECT_TRUE(info->has_ek_eku);
  EXPECT_TRUE(info->has_ek_policy);
  EXPECT_EQ(info->key_type, kAlgEcc);
}

// Nuvoton's issuer is one RDN whose SET lists CN, O, C unsorted (not DER);
// the leaf still verifies to the root whose subject is encoded the same way.
TEST_F(EkCorpusTest, NuvotonUnsortedIssuerSetVerifies) {
  const Row row = RowOf(rows(), "keylime_nuvoton_2111_ecc.der");
  const std::vector<uint8_t> der = LeafBytes(row);
  // SET (0x31) of three AttributeTypeAndValues, commonName (2.5.4.3) first.
  EXPECT_TRUE(Contains(der, {0x31, 0x53, 0x30, 0x1f, 0x06, 0x03, 0x55, 0x04, 0x03}));
  Result<EkCertInfo> got = VerifyEkCertificate(LoadVendorCas(), der, row.verify_at);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->anchor_sha256, row.anchor);
}

// An operator who keeps only self-signed roots: the machine presents the
// CAs between (the agent sends what NV 0x01c00100… holds), and the path ends
// at the root; without the issuing CA it is refused, naming it.
TEST_F(EkCorpusTest, PresentedChainReachesARootOnlyStore) {
  const Row row = RowOf(rows(), "keylime_st_sha256_with_rsa.nv.der");
  EkTrustStore roots;
  const Bytes globalsign = ReadAll(CorpusDir() + "/ca/tpm2-tss_GlobalSign_TPM_RSA_Root_CA.pem");
  ASSERT_TRUE(roots.AddRoot(globalsign).ok());
  const Bytes st_root = ReadAll(CorpusDir() + "/ca/keylime_STM_RSA_RT.pem");
  const Bytes st_ca05 = ReadAll(CorpusDir() + "/ca/keylime_STM_RSA_05I.pem");

  const std::vector<Bytes> chain = {st_ca05, st_root};
  Result<EkCertInfo> got = VerifyEkCertificate(roots, LeafBytes(row), row.verify_at, chain);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->anchor_subject,
            "CN=GlobalSign Trusted Platform Module Root CA,O=GlobalSign,OU=GlobalSign Trusted "
            "Computing Certificate Authority");

  const std::vector<Bytes> partial = {st_root};
  Result<EkCertInfo> refused = VerifyEkCertificate(roots, LeafBytes(row), row.verify_at, partial);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), kEkCertMissingIntermediate);
  EXPECT_NE(refused.status().message().find("STM TPM EK Intermediate CA 05"), std::string::npos)
      << refused.status().ToString();
}

// A relaxation granted to an anchor does not reach paths ending elsewhere: the
// leaves that verify plainly keep their anchors and use none, and those that a
// relaxation accepts are still refused when another anchor holds the grant.
TEST_F(EkCorpusTest, RelaxationsStayWithTheirAnchor) {
  for (const Row& row : rows()) {
    if (row.relaxation == "-") continue;
    SCOPED_TRACE(row.leaf);
    EkTrustStore store = LoadVendorCas();
    for (const EkAnchor& a : store.Anchors()) {
      if (a.sha256 != row.anchor) {
        ASSERT_TRUE(store.AllowForAnchor(a.sha256, row.relaxation).ok());
      }
    }
    Result<EkCertInfo> got = VerifyEkCertificate(store, LeafBytes(row), row.verify_at);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().reason(), row.reason);
  }
}

}  // namespace
}  // namespace rackgate::attest
