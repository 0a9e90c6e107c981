#include "attest/ek_nv.h"

#include <gtest/gtest.h>

#include "attest/ek_cert.h"
#include "attest/testing/test_util.h"

namespace rackgate::attest {
namespace {

// Each fixture read once: the tests take begin() and end() of the same object.
const Bytes& Rsa() {
  static const Bytes der = testing::ReadFixture("attest/testdata/ek/ek-rsa2048.der");
  return der;
}
const Bytes& Ecc() {
  static const Bytes der = testing::ReadFixture("attest/testdata/ek/ek-secp384r1.der");
  return der;
}

// The PC Client stored-certificate header over `body`.
Bytes WithHeader(const Bytes& body) {
  Bytes out = {0x10, 0x01, 0x00, static_cast<uint8_t>(body.size() >> 8), static_cast<uint8_t>(body.size())};
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

TEST(EkCertificateDerFromNv, TheDerAloneIsItself) {
  auto der = EkCertificateDerFromNv(Rsa());
  ASSERT_TRUE(der.ok()) << der.status().ToString();
  EXPECT_EQ(*der, Rsa());
}

TEST(EkCertificateDerFromNv, StripsPaddingOfOneRepeatedValue) {
  // 0xFF: an unwritten index; 0x00; 0x11: a vendor's fill (a HIRS sample).
  for (uint8_t pad : {uint8_t{0xFF}, uint8_t{0x00}, uint8_t{0x11}}) {
    Bytes nv = Rsa();
    nv.resize(Rsa().size() + 500, pad);  // an index larger than its certificate
    auto der = EkCertificateDerFromNv(nv);
    ASSERT_TRUE(der.ok()) << der.status().ToString();
    EXPECT_EQ(*der, Rsa());
  }
}

TEST(EkCertificateDerFromNv, StripsTheStoredCertificateHeader) {
  auto plain = EkCertificateDerFromNv(WithHeader(Rsa()));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(*plain, Rsa());
  // With the full-certificate tag inside, and padding after the header's size.
  Bytes tagged = {0x10, 0x02};
  tagged.insert(tagged.end(), Rsa().begin(), Rsa().end());
  Bytes nv = WithHeader(tagged);
  nv.resize(nv.size() + 64, 0xFF);
  auto der = EkCertificateDerFromNv(nv);
  ASSERT_TRUE(der.ok()) << der.status().ToString();
  EXPECT_EQ(*der, Rsa());
}

TEST(EkCertificateDerFromNv, RefusesAnythingButPaddingAfterTheDer) {
  Bytes junk = Rsa();
  junk.insert(junk.end(), {0x01, 0x02});
  EXPECT_EQ(EkCertificateDerFromNv(junk).status().reason(), "ek_cert_malformed");
  Bytes mixed = Rsa();
  mixed.insert(mixed.end(), {0xFF, 0xFF, 0x00});
  EXPECT_EQ(EkCertificateDerFromNv(mixed).status().reason(), "ek_cert_malformed");
  // A second certificate is not padding either: the leaf index holds one.
  Bytes two = Rsa();
  two.insert(two.end(), Ecc().begin(), Ecc().end());
  EXPECT_EQ(EkCertificateDerFromNv(two).status().reason(), "ek_cert_malformed");
}

TEST(EkCertificateDerFromNv, RefusesAHeaderLongerThanItsInput) {
  Bytes nv = WithHeader(Rsa());
  nv.resize(nv.size() - 1);
  EXPECT_EQ(EkCertificateDerFromNv(nv).status().reason(), "ek_cert_malformed");
}

TEST(EkCertificateDerFromNv, TruncationLoop) {
  const Bytes full = WithHeader(Rsa());
  for (size_t n = 0; n < full.size(); ++n) {
    auto der = EkCertificateDerFromNv(std::span<const uint8_t>(full.data(), n));
    EXPECT_FALSE(der.ok()) << "accepted a prefix of " << n << " bytes";
  }
}

TEST(EkCertificateDerFromNv, RefusesIndefiniteAndOverlongLengths) {
  EXPECT_FALSE(EkCertificateDerFromNv(Bytes{0x30, 0x80, 0x00, 0x00}).ok());
  EXPECT_FALSE(EkCertificateDerFromNv(Bytes{0x30, 0x84, 0x00, 0x00, 0x00, 0x01, 0x00}).ok());
  EXPECT_FALSE(EkCertificateDerFromNv(Bytes{0x31, 0x00}).ok());
}

TEST(EkCertificateDerFromNv, EveryLeafPathTakesThePaddedForm) {
  // What `tpm2_nvread` writes parses as the certificate it holds.
  Bytes nv = WithHeader(Rsa());
  nv.resize(nv.size() + 100, 0xFF);
  auto info = ParseEkCertificate(nv);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->der, Rsa());
}

TEST(SplitDerCertificates, StopsAtPaddingAndAtTheLimit) {
  Bytes padded = Rsa();
  padded.resize(Rsa().size() + 200, 0xff);
  auto one = SplitDerCertificates(padded, 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], Rsa());

  Bytes both = Rsa();
  both.insert(both.end(), Ecc().begin(), Ecc().end());
  auto two = SplitDerCertificates(both, 4);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1], Ecc());
  EXPECT_EQ(SplitDerCertificates(both, 1).size(), 1u);
  EXPECT_TRUE(SplitDerCertificates(Bytes(Rsa().begin(), Rsa().end() - 1), 4).empty());  // truncated
  EXPECT_TRUE(SplitDerCertificates({}, 4).empty());
}

// The swtpm certificate with its serial padded by hand (its signature no
// longer matters here: this is the parse-only copy).
Bytes PaddedSerial(const Bytes& der, size_t zeros) {
  // 30 82 LL LL | 30 82 LL LL | a0 03 02 01 02 | 02 len serial...
  EXPECT_EQ(der[8], 0xa0);
  const size_t serial_at = 8 + 2 + der[9];
  EXPECT_EQ(der[serial_at], 0x02);
  Bytes out(der.begin(), der.begin() + static_cast<long>(serial_at));
  const uint8_t len = der[serial_at + 1];
  out.push_back(0x02);
  out.push_back(static_cast<uint8_t>(len + zeros));
  out.insert(out.end(), zeros, 0x00);
  out.insert(out.end(), der.begin() + static_cast<long>(serial_at + 2), der.end());
  const size_t tbs_len = ((out[6] << 8) | out[7]) + zeros;
  const size_t cert_len = ((out[2] << 8) | out[3]) + zeros;
  out[6] = static_cast<uint8_t>(tbs_len >> 8);
  out[7] = static_cast<uint8_t>(tbs_len);
  out[2] = static_cast<uint8_t>(cert_len >> 8);
  out[3] = static_cast<uint8_t>(cert_len);
  return out;
}

TEST(CertificateWithMinimalSerial, RemovesOnlyZerosTheValueDoesNotNeed) {
  for (size_t zeros : {1, 3}) {
    const Bytes padded = PaddedSerial(Rsa(), zeros);
    ASSERT_EQ(padded.size(), Rsa().size() + zeros);
    std::optional<Bytes> minimal = CertificateWithMinimalSerial(padded);
    ASSERT_TRUE(minimal.has_value());
    EXPECT_EQ(*minimal, Rsa());
    // The TBS as received keeps the zeros.
    std::optional<Bytes> tbs = TbsCertificateOf(padded);
    ASSERT_TRUE(tbs.has_value());
    EXPECT_EQ(tbs->size(), ((Rsa()[6] << 8) | Rsa()[7]) + 4 + zeros);
  }
  // Already minimal, or a needed zero (00 80..): nothing to do.
  EXPECT_FALSE(CertificateWithMinimalSerial(Rsa()).has_value());
  EXPECT_FALSE(CertificateWithMinimalSerial(Ecc()).has_value());
}

TEST(CertificateWithMinimalSerial, TruncationAndTrailingBytes) {
  const Bytes padded = PaddedSerial(Rsa(), 1);
  for (size_t n = 0; n < padded.size(); ++n) {
    const std::span<const uint8_t> prefix(padded.data(), n);
    EXPECT_FALSE(CertificateWithMinimalSerial(prefix).has_value()) << n;
    EXPECT_FALSE(TbsCertificateOf(prefix).has_value()) << n;
  }
  Bytes trailing = padded;
  trailing.push_back(0x00);
  EXPECT_FALSE(CertificateWithMinimalSerial(trailing).has_value());
  EXPECT_FALSE(TbsCertificateOf(trailing).has_value());
  EXPECT_FALSE(CertificateWithMinimalSerial(Bytes{0x30, 0x80, 0x00, 0x00}).has_value());
}

}  // namespace
}  // namespace rackgate::attest
