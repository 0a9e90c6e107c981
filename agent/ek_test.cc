#include "agent/ek.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <map>
#include <set>

#include "attest/testing/test_util.h"

namespace rackgate::agent {
namespace {

// A TPM's NV as ChooseEk sees it: indices and their contents; indices in
// `broken` are listed but fail to read.
class FakeNv : public NvIndexReader {
 public:
  std::map<uint32_t, Bytes> indices;
  std::set<uint32_t> broken;
  bool list_fails = false;
  std::vector<uint32_t> reads;

  Result<std::vector<uint32_t>> ListNvIndices(uint32_t first, uint32_t last) override {
    if (list_fails) return Status::TpmError("tpm_failed", "TPM2_GetCapability failed");
    std::vector<uint32_t> out;
    for (const auto& [index, data] : indices) {
      if (index >= first && index <= last) out.push_back(index);
    }
    return out;
  }
  Result<Bytes> ReadNv(uint32_t index, size_t max_bytes) override {
    reads.push_back(index);
    if (broken.count(index)) return Status::TpmError("tpm_failed", "TPM2_NV_Read failed");
    const Bytes& data = indices.at(index);
    if (data.size() > max_bytes) return Status::InvalidArgument("nv_index_too_large", "too large");
    return data;
  }
};

Bytes PemToDer(const std::string& fixture) {
  const Bytes pem = testing::ReadFixture(fixture);
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_NE(x, nullptr) << fixture;
  unsigned char* der = nullptr;
  const int n = i2d_X509(x, &der);
  Bytes out(der, der + n);
  OPENSSL_free(der);
  X509_free(x);
  return out;
}

Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

const Bytes& EkDer() {
  static const Bytes der = testing::ReadFixture("attest/testdata/ek/ek-rsa2048.der");
  return der;
}
const Bytes& IssuerDer() {
  static const Bytes der = PemToDer("attest/testdata/ek/swtpm-localca-issuer.pem");
  return der;
}
const Bytes& RootDer() {
  static const Bytes der = PemToDer("attest/testdata/ek/swtpm-localca-root.pem");
  return der;
}

// The certificate at `kind`'s index, as tpm2_nvwrite of the DER leaves it.
FakeNv OnlyAt(EkKind kind, const Bytes& nv = EkDer()) {
  FakeNv fake;
  fake.indices[EkCertNvIndex(kind)] = nv;
  return fake;
}

void ExpectChosen(FakeNv fake, EkKind want, EkPreference preference = EkPreference::kAny) {
  auto choice = ChooseEk(&fake, preference);
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(EkKindName(choice->kind), EkKindName(want));
  ASSERT_TRUE(choice->certificate.has_value());
  EXPECT_EQ(*choice->certificate, EkDer());
}

// One test per layout the profile has: each certificate index alone, read
// with the default preference and with its own --ek-alg name.
TEST(ChooseEk, LowRangeRsa2048L1) {
  ExpectChosen(OnlyAt(EkKind::kRsa2048), EkKind::kRsa2048);
  EXPECT_EQ(EkCertNvIndex(EkKind::kRsa2048), 0x01c00002u);
}
TEST(ChooseEk, LowRangeP256L2) {
  ExpectChosen(OnlyAt(EkKind::kEccP256), EkKind::kEccP256);
  EXPECT_EQ(EkCertNvIndex(EkKind::kEccP256), 0x01c0000au);
}
TEST(ChooseEk, HighRangeRsa2048H1) {
  ExpectChosen(OnlyAt(EkKind::kRsa2048High), EkKind::kRsa2048High);
  ExpectChosen(OnlyAt(EkKind::kRsa2048High), EkKind::kRsa2048High, EkPreference::kRsa);
  EXPECT_EQ(EkCertNvIndex(EkKind::kRsa2048High), 0x01c00012u);
}
TEST(ChooseEk, HighRangeP256H2) {
  ExpectChosen(OnlyAt(EkKind::kEccP256High), EkKind::kEccP256High);
  ExpectChosen(OnlyAt(EkKind::kEccP256High), EkKind::kEccP256High, EkPreference::kEcc);
  EXPECT_EQ(EkCertNvIndex(EkKind::kEccP256High), 0x01c00014u);
}
TEST(ChooseEk, HighRangeP384H3) {
  ExpectChosen(OnlyAt(EkKind::kEccP384), EkKind::kEccP384);
  EXPECT_EQ(EkCertNvIndex(EkKind::kEccP384), 0x01c00016u);
}
TEST(ChooseEk, HighRangeP521H4) {
  ExpectChosen(OnlyAt(EkKind::kEccP521), EkKind::kEccP521);
  ExpectChosen(OnlyAt(EkKind::kEccP521), EkKind::kEccP521, EkPreference::kEcc);
  EXPECT_EQ(EkCertNvIndex(EkKind::kEccP521), 0x01c00018u);
}
TEST(ChooseEk, HighRangeRsa3072H6) {
  ExpectChosen(OnlyAt(EkKind::kRsa3072), EkKind::kRsa3072);
  ExpectChosen(OnlyAt(EkKind::kRsa3072), EkKind::kRsa3072, EkPreference::kRsa);
  EXPECT_EQ(EkCertNvIndex(EkKind::kRsa3072), 0x01c0001cu);
}

// The PC Client stored-certificate header (10 01 00, u16 size, 10 02) and
// the index's padding are not sent: the appliance gets the DER.
TEST(ChooseEk, HeaderAndPaddingAreStripped) {
  const Bytes& der = EkDer();
  const uint16_t size = static_cast<uint16_t>(der.size() + 2);
  const Bytes header = {0x10, 0x01, 0x00, static_cast<uint8_t>(size >> 8), static_cast<uint8_t>(size), 0x10, 0x02};
  ExpectChosen(OnlyAt(EkKind::kRsa2048High, Cat({header, der, Bytes(200, 0xff)})), EkKind::kRsa2048High);
  ExpectChosen(OnlyAt(EkKind::kRsa3072, Cat({der, Bytes(1032, 0xff)})), EkKind::kRsa3072);
  ExpectChosen(OnlyAt(EkKind::kEccP521, Cat({der, Bytes(9, 0x00)})), EkKind::kEccP521);
}

// An index that exists but holds no certificate (erased, or junk) is passed
// over for the next kind.
TEST(ChooseEk, AnIndexWithoutACertificateIsPassedOver) {
  FakeNv fake = OnlyAt(EkKind::kEccP384);
  fake.indices[kNvEkCertRsa2048] = Bytes(1024, 0xff);
  fake.indices[kNvEkCertEccP256] = Bytes{0x30, 0x82, 0x10, 0x00, 0x01};  // runs past its index
  ExpectChosen(fake, EkKind::kEccP384);
}

// The default order (docs/agent.md): the kinds older agents knew first, in
// their order (L-1, L-2, H-3), then H-1, H-2, H-6, H-4. Every index present;
// taking away the chosen one's certificate moves to the next.
TEST(ChooseEk, PreferenceOrder) {
  FakeNv fake;
  for (EkKind kind : kEkKindsByPreference) fake.indices[EkCertNvIndex(kind)] = EkDer();
  const std::vector<std::string> want = {"rsa2048",       "ecc-p256", "ecc-p384", "rsa2048-high",
                                         "ecc-p256-high", "rsa3072",  "ecc-p521"};
  for (const std::string& name : want) {
    auto choice = ChooseEk(&fake, EkPreference::kAny);
    ASSERT_TRUE(choice.ok());
    EXPECT_EQ(EkKindName(choice->kind), name);
    fake.indices.erase(EkCertNvIndex(choice->kind));
  }
  EXPECT_TRUE(fake.indices.empty());
}

TEST(ChooseEk, EkAlgRestrictsTheChoice) {
  FakeNv all;
  for (EkKind kind : kEkKindsByPreference) all.indices[EkCertNvIndex(kind)] = EkDer();
  ExpectChosen(all, EkKind::kRsa2048, EkPreference::kRsa);
  ExpectChosen(all, EkKind::kEccP256, EkPreference::kEcc);
  for (EkKind kind : kEkKindsByPreference) ExpectChosen(all, kind, EkPreference::Only(kind));
  // A family with no certificate of its own: its first kind, no certificate.
  FakeNv only384 = OnlyAt(EkKind::kEccP384);
  auto choice = ChooseEk(&only384, EkPreference::kRsa);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->kind, EkKind::kRsa2048);
  EXPECT_FALSE(choice->certificate.has_value());
  choice = ChooseEk(&only384, EkPreference::Only(EkKind::kEccP521));
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->kind, EkKind::kEccP521);
  EXPECT_FALSE(choice->certificate.has_value());
}

TEST(ChooseEk, NoCertificateAtAllReadsNoChain) {
  FakeNv fake;
  fake.indices[kNvEkChainFirst] = IssuerDer();
  auto choice = ChooseEk(&fake, EkPreference::kEcc);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->kind, EkKind::kEccP256);
  EXPECT_FALSE(choice->certificate.has_value());
  EXPECT_TRUE(choice->intermediates.empty());
  EXPECT_TRUE(fake.reads.empty());
}

TEST(ChooseEk, TpmFailuresOnTheCertificateAreErrorsOnTheChainNot) {
  FakeNv fake = OnlyAt(EkKind::kRsa2048);
  fake.list_fails = true;
  EXPECT_EQ(ChooseEk(&fake, EkPreference::kAny).status().reason(), "tpm_failed");
  fake.list_fails = false;
  fake.broken.insert(kNvEkCertRsa2048);
  EXPECT_EQ(ChooseEk(&fake, EkPreference::kAny).status().reason(), "tpm_failed");
  fake.broken = {kNvEkChainFirst + 1};
  fake.indices[kNvEkChainFirst] = IssuerDer();
  fake.indices[kNvEkChainFirst + 1] = RootDer();
  fake.indices[kNvEkChainFirst + 2] = RootDer();
  auto choice = ChooseEk(&fake, EkPreference::kAny);
  ASSERT_TRUE(choice.ok());
  // What came before the unreadable index; nothing after it.
  EXPECT_EQ(choice->intermediates, std::vector<Bytes>{IssuerDer()});
}

// Intel PTT: the chain concatenated at 0x01c00100, padded; sent as it is.
TEST(ChooseEk, ChainConcatenatedInOneIndexIsSent) {
  FakeNv fake = OnlyAt(EkKind::kEccP384);
  fake.indices[kNvEkChainFirst] = Cat({IssuerDer(), RootDer(), Bytes(300, 0xff)});
  auto choice = ChooseEk(&fake, EkPreference::kAny);
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->intermediates, (std::vector<Bytes>{IssuerDer(), RootDer()}));
}

// A certificate that begins in one index and goes on in the next, cut
// anywhere: in its header, its body, or between two certificates.
TEST(EkChainFromNv, ACertificateMayRunOnIntoTheNextIndex) {
  const Bytes chain = Cat({IssuerDer(), RootDer()});
  const std::vector<Bytes> want = {IssuerDer(), RootDer()};
  for (size_t cut = 1; cut < chain.size(); ++cut) {
    const Bytes first(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(cut));
    const Bytes second = Cat({Bytes(chain.begin() + static_cast<std::ptrdiff_t>(cut), chain.end()),
                              Bytes(64, 0xff)});
    ASSERT_EQ(EkChainFromNv({first, second}, kMaxIntermediates), want) << "cut at " << cut;
  }
  // Over three indices.
  const size_t third = chain.size() / 3;
  EXPECT_EQ(EkChainFromNv({Bytes(chain.begin(), chain.begin() + third),
                           Bytes(chain.begin() + third, chain.begin() + 2 * third),
                           Bytes(chain.begin() + 2 * third, chain.end())},
                          kMaxIntermediates),
            want);
}

TEST(EkChainFromNv, PaddingEndsAnIndexNotTheChain) {
  EXPECT_EQ(EkChainFromNv({Cat({IssuerDer(), Bytes(10, 0xff)}), Cat({RootDer(), Bytes(10, 0x00)})}, 4),
            (std::vector<Bytes>{IssuerDer(), RootDer()}));
  EXPECT_TRUE(EkChainFromNv({}, 4).empty());
  EXPECT_TRUE(EkChainFromNv({Bytes(2048, 0xff)}, 4).empty());
}

TEST(EkChainFromNv, BoundedAndUntrusted) {
  // At most `max`.
  EXPECT_EQ(EkChainFromNv({Cat({IssuerDer(), IssuerDer(), IssuerDer(), RootDer(), RootDer(), RootDer()})}, 4).size(),
            4u);
  // A header claiming more than kMaxChainCertBytes (or 16 MiB, or an
  // indefinite BER length) is no certificate; nothing is held back for it.
  for (const Bytes& bad : {Bytes{0x30, 0x82, 0x40, 0x00}, Bytes{0x30, 0x84, 0x01, 0x00, 0x00, 0x00},
                           Bytes{0x30, 0x80, 0x00, 0x00}}) {
    EXPECT_EQ(EkChainFromNv({Cat({IssuerDer(), bad}), RootDer()}, 4), (std::vector<Bytes>{IssuerDer(), RootDer()}));
  }
  // A certificate cut off by the last index is not sent.
  const Bytes& root = RootDer();
  EXPECT_EQ(EkChainFromNv({Cat({IssuerDer(), Bytes(root.begin(), root.end() - 1)})}, 4),
            std::vector<Bytes>{IssuerDer()});
  // Every prefix of a chain: never more certificates than are whole in it.
  const Bytes chain = Cat({IssuerDer(), RootDer()});
  for (size_t n = 0; n <= chain.size(); ++n) {
    const size_t whole = n >= chain.size() ? 2 : n >= IssuerDer().size() ? 1 : 0;
    ASSERT_EQ(EkChainFromNv({Bytes(chain.begin(), chain.begin() + static_cast<std::ptrdiff_t>(n))}, 4).size(), whole)
        << n;
  }
}

TEST(EkPreference, ParsesWhatItWrites) {
  EXPECT_EQ(ParseEkPreference("rsa"), EkPreference(EkPreference::kRsa));
  EXPECT_EQ(ParseEkPreference("ecc"), EkPreference(EkPreference::kEcc));
  for (EkKind kind : kEkKindsByPreference) {
    const EkPreference p = EkPreference::Only(kind);
    EXPECT_EQ(ParseEkPreference(EkPreferenceArg(p)), p);
    EXPECT_EQ(EkKindsFor(p), std::vector<EkKind>{kind});
  }
  EXPECT_EQ(EkPreferenceArg(EkPreference::kAny), "");
  EXPECT_EQ(EkPreferenceArg(EkPreference::kRsa), "rsa");
  EXPECT_FALSE(ParseEkPreference("").has_value());
  EXPECT_FALSE(ParseEkPreference("RSA").has_value());
  EXPECT_FALSE(ParseEkPreference("ecc-p192").has_value());
  EXPECT_EQ(EkKindsFor(EkPreference::kRsa),
            (std::vector<EkKind>{EkKind::kRsa2048, EkKind::kRsa2048High, EkKind::kRsa3072}));
  EXPECT_EQ(EkKindsFor(EkPreference::kEcc),
            (std::vector<EkKind>{EkKind::kEccP256, EkKind::kEccP384, EkKind::kEccP256High, EkKind::kEccP521}));
}

TEST(CheckEkMatchesCertificate, SameKeyOnly) {
  const Bytes rsa_pub = testing::ReadFixture("attest/testdata/ek/ek-rsa2048.pub");
  const Bytes rsa_der = testing::ReadFixture("attest/testdata/ek/ek-rsa2048.der");
  const Bytes ecc_pub = testing::ReadFixture("attest/testdata/ek/ek-ecc384.pub");
  const Bytes ecc_der = testing::ReadFixture("attest/testdata/ek/ek-secp384r1.der");
  EXPECT_TRUE(CheckEkMatchesCertificate(rsa_pub, rsa_der).ok());
  EXPECT_TRUE(CheckEkMatchesCertificate(ecc_pub, ecc_der).ok());
  const Status s = CheckEkMatchesCertificate(rsa_pub, ecc_der);
  EXPECT_EQ(s.code(), Status::Code::kTpmError);
  EXPECT_EQ(s.reason(), "ek_template_mismatch");
  EXPECT_EQ(CheckEkMatchesCertificate(rsa_pub, Bytes{1, 2, 3}).reason(), "ek_cert_malformed");
}

// The high-range keys the appliance learnt in issue 41: RSA-3072 (H-6, the
// certificate swtpm_setup made for it) and P-521 (H-4).
TEST(CheckEkMatchesCertificate, Rsa3072AndP521) {
  const Bytes rsa_pub = testing::ReadFixture("agent/testdata/ek-rsa3072-h6.pub");
  const Bytes rsa_der = testing::ReadFixture("agent/testdata/ek-rsa3072-h6.der");
  const Bytes ecc_pub = testing::ReadFixture("agent/testdata/ek-eccp521-h4.pub");
  const Bytes ecc_der = testing::ReadFixture("agent/testdata/ek-eccp521-h4.der");
  EXPECT_TRUE(CheckEkMatchesCertificate(rsa_pub, rsa_der).ok());
  EXPECT_TRUE(CheckEkMatchesCertificate(ecc_pub, ecc_der).ok());
  EXPECT_EQ(CheckEkMatchesCertificate(rsa_pub, ecc_der).reason(), "ek_template_mismatch");
  EXPECT_EQ(CheckEkMatchesCertificate(ecc_pub, rsa_der).reason(), "ek_template_mismatch");
}

}  // namespace
}  // namespace rackgate::agent
