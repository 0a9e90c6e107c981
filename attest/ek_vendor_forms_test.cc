// Tests of the certificate forms real vendors ship (issue 41): DER that strict
// parsers refuse (Intel PTT, Nuvoton), the signature algorithms of their CA
// chains, and the 32-bit time_t edge of a vendor root. Each quirk is made by
// editing a TBSCertificate and signing the edited bytes, so a pass shows the
// signature was checked over the bytes as received, never a re-encoding, and
// a flipped TBS bit shows it was checked at all.
#include "attest/ek_cert.h"

#include <gtest/gtest.h>
#include <openssl/err.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attest/testing/ek_cert_test_pki.h"
#include "attest/ek_identity.h"
#include "attest/testing/test_util.h"

namespace rackgate::attest {
namespace {

using ek_testing::CaSpec;
using ek_testing::CertSpec;
using ek_testing::Der;
using ek_testing::EkCertTest;
using ek_testing::GenEc;
using ek_testing::GenRsa;
using ek_testing::kDay;
using ek_testing::kNow;
using ek_testing::MakeCert;
using ek_testing::Pem;

// --- a small DER editor (tests only; single-byte tags, as in X.509) ---------

struct Tlv {
  uint8_t tag = 0;
  Bytes content;
};

Bytes EncodeTlv(uint8_t tag, const Bytes& content) { return rackgate::testing::DerTlv(tag, content); }

Bytes EncodeTlv(const Tlv& t) { return EncodeTlv(t.tag, t.content); }

std::vector<Tlv> Children(const Bytes& content) {
  std::vector<Tlv> out;
  size_t i = 0;
  while (i < content.size()) {
    Tlv t;
    t.tag = content.at(i++);
    size_t n = content.at(i++);
    if (n & 0x80) {
      const size_t bytes = n & 0x7f;
      n = 0;
      for (size_t k = 0; k < bytes; ++k) n = (n << 8) | content.at(i++);
    }
    if (n > content.size() - i) throw std::runtime_error("DER overrun");
    t.content.assign(content.begin() + static_cast<long>(i),
                     content.begin() + static_cast<long>(i + n));
    i += n;
    out.push_back(std::move(t));
  }
  return out;
}

Bytes Join(const std::vector<Tlv>& items) {
  Bytes out;
  for (const Tlv& t : items) {
    const Bytes e = EncodeTlv(t);
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

// TBSCertificate fields by position (v3 certificates).
enum TbsField { kVersion = 0, kSerial, kSigAlg, kIssuer, kValidity, kSubject, kSpki, kExtensions };

// The certificate `der` with its TBS fields edited by `edit`, signed again
// with `issuer_key` over the edited TBS bytes exactly.
Bytes EditAndResign(const Bytes& der, const std::function<void(std::vector<Tlv>*)>& edit,
                    EVP_PKEY* issuer_key, const EVP_MD* md = EVP_sha256()) {
  const std::vector<Tlv> cert = Children(Children(der).at(0).content);
  std::vector<Tlv> tbs_fields = Children(cert.at(0).content);
  edit(&tbs_fields);
  const Bytes tbs = EncodeTlv(0x30, Join(tbs_fields));
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  size_t n = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, issuer_key) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &n, tbs.data(), tbs.size()) != 1) {
    throw std::runtime_error("sign init");
  }
  Bytes sig(n + 1, 0);  // BIT STRING: no unused bits
  if (EVP_DigestSign(ctx.get(), sig.data() + 1, &n, tbs.data(), tbs.size()) != 1) {
    throw std::runtime_error("sign");
  }
  sig.resize(n + 1);
  Bytes body = tbs;
  const Bytes alg = EncodeTlv(cert.at(1));
  const Bytes bits = EncodeTlv(0x03, sig);
  body.insert(body.end(), alg.begin(), alg.end());
  body.insert(body.end(), bits.begin(), bits.end());
  return EncodeTlv(0x30, body);
}

// The offset of `needle` in `hay` (which must hold it once at least).
size_t Find(const Bytes& hay, const Bytes& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  if (it == hay.end()) throw std::runtime_error("needle not found");
  return static_cast<size_t>(it - hay.begin());
}

// One bit of the subject's printable text flipped (the certificate still
// parses; only the signature can notice).
Bytes FlipSubjectBit(Bytes der, const std::string& text) {
  der[Find(der, Bytes(text.begin(), text.end()))] ^= 0x01;
  return der;
}

// A vendor chain made to order: root -> intermediate -> EK certificates.
class VendorFormsTest : public EkCertTest {
 protected:
  static Bytes Leaf(const CertSpec& spec = CertSpec{}) { return pki().Ek(spec); }
  static Result<EkCertInfo> VerifyLeaf(const Bytes& der, int64_t now = kNow) {
    return VerifyEkCertificate(pki().Store(), der, now);
  }
  // Accepted as sent, refused with one TBS bit flipped.
  static void ExpectAcceptedAndSignatureBound(const Bytes& der, const std::string& subject_text) {
    Result<EkCertInfo> info = VerifyLeaf(der);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->der, der);  // the bytes as received
    EXPECT_REASON(VerifyLeaf(FlipSubjectBit(der, subject_text)).status(),
                  kEkCertSignatureInvalid);
  }
};

// --- DER quirks ---------------------------------------------------------------

// Intel PTT: countryName as UTF8String (X.520 says PrintableString), here in
// the leaf's subject and issuer while the CA's own subject keeps it
// PrintableString: names still match (OpenSSL compares canonical forms).
TEST_F(VendorFormsTest, Utf8StringCountryName) {
  ossl::PkeyPtr ca_key = GenEc("P-256");
  ossl::X509Ptr ca = MakeCert(CaSpec("Test EK Intermediate"), ca_key.get(), pki().root.get(),
                              pki().root_key.get());
  // The CA's subject: C=US (PrintableString), CN=...
  ek_testing::X509NamePtr name(X509_NAME_new());
  X509_NAME_add_entry_by_txt(name.get(), "C", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("US"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name.get(), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("PTT EK CA"), -1, -1, 0);
  X509_set_subject_name(ca.get(), name.get());
  X509_sign(ca.get(), pki().root_key.get(), EVP_sha256());
  ossl::X509Ptr leaf = MakeCert(CertSpec{}, pki().ek_rsa_key.get(), ca.get(), ca_key.get());
  ek_testing::X509NamePtr leaf_name(X509_NAME_new());
  X509_NAME_add_entry_by_txt(leaf_name.get(), "C", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("US"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(leaf_name.get(), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("ptt-leaf"), -1, -1, 0);
  X509_set_subject_name(leaf.get(), leaf_name.get());
  X509_sign(leaf.get(), ca_key.get(), EVP_sha256());
  const Bytes printable = {0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, 'U', 'S'};
  const Bytes der = EditAndResign(
      Der(leaf.get()),
      [&](std::vector<Tlv>* tbs) {
        for (TbsField f : {kIssuer, kSubject}) {
          Bytes& n = (*tbs)[f].content;
          n[Find(n, printable) + 5] = 0x0c;  // PrintableString -> UTF8String
        }
      },
      ca_key.get());
  ASSERT_EQ(Find(der, {0x06, 0x03, 0x55, 0x04, 0x06, 0x0c, 0x02, 'U', 'S'}) > 0, true);
  EkTrustStore store;
  ASSERT_TRUE(store.AddRoot(Pem(ca.get())).ok());
  Result<EkCertInfo> info = VerifyEkCertificate(store, der, kNow);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->issuer, "CN=PTT EK CA,C=US");
  EXPECT_EQ(info->der, der);
  EXPECT_EQ(info->subject, "CN=ptt-leaf,C=US");
  EXPECT_REASON(VerifyEkCertificate(store, FlipSubjectBit(der, "ptt-leaf"), kNow).status(),
                kEkCertSignatureInvalid);
}

// Intel PTT: basicConstraints with the DEFAULT cA FALSE written out
// (30 03 01 01 00; DER omits a DEFAULT value).
TEST_F(VendorFormsTest, BasicConstraintsWithExplicitDefaultFalse) {
  CertSpec spec;
  spec.subject_cn = "ptt-bc";
  spec.basic_constraints = CertSpec::Bc::kAbsent;
  spec.extra.push_back({"2.5.29.19", true, {0x30, 0x03, 0x01, 0x01, 0x00}});
  const Bytes der = EditAndResign(Leaf(spec), [](std::vector<Tlv>*) {}, pki().int_key.get());
  ExpectAcceptedAndSignatureBound(der, "ptt-bc");
  // And still not a CA: the same with cA TRUE written is refused.
  CertSpec ca_spec = spec;
  ca_spec.extra[0].der = {0x30, 0x03, 0x01, 0x01, 0xff};
  EXPECT_REASON(VerifyLeaf(Leaf(ca_spec)).status(), kEkCertBadBasicConstraints);
}

// Intel PTT: an extension with critical=FALSE written out (a DEFAULT too).
TEST_F(VendorFormsTest, ExtensionWithExplicitCriticalFalse) {
  CertSpec spec;
  spec.subject_cn = "ptt-crit";
  spec.subject_key_id = true;
  const Bytes der = EditAndResign(
      Leaf(spec),
      [](std::vector<Tlv>* tbs) {
        std::vector<Tlv> wrapper = Children((*tbs)[kExtensions].content);
        std::vector<Tlv> exts = Children(wrapper.at(0).content);
        int edited = 0;
        for (Tlv& ext : exts) {
          std::vector<Tlv> parts = Children(ext.content);
          if (parts.size() != 2) continue;  // already has a critical field
          parts.insert(parts.begin() + 1, Tlv{0x01, {0x00}});
          ext.content = Join(parts);
          ++edited;
        }
        if (edited == 0) throw std::runtime_error("no non-critical extension");
        wrapper[0].content = Join(exts);
        (*tbs)[kExtensions].content = Join(wrapper);
      },
      pki().int_key.get());
  EXPECT_NE(Find(der, {0x01, 0x01, 0x00, 0x04}), 0u);  // BOOLEAN FALSE before extnValue
  ExpectAcceptedAndSignatureBound(der, "ptt-crit");
}

// Nuvoton: an issuer RDN that is a multi-valued SET in unsorted order (DER
// sorts SET OF by encoding), in the CA's subject and its certificates' issuer.
TEST_F(VendorFormsTest, UnsortedMultiValuedIssuerRdn) {
  ossl::PkeyPtr ca_key = GenEc("P-384");
  ek_testing::X509NamePtr name(X509_NAME_new());
  X509_NAME_add_entry_by_txt(name.get(), "C", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("TW"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name.get(), "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("Nuvoton Test"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name.get(), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("NTC TPM EK Test CA"), -1, -1,
                             -1);  // into the RDN of O
  ossl::X509Ptr ca = MakeCert(CaSpec("x"), ca_key.get(), pki().root.get(), pki().root_key.get());
  X509_set_subject_name(ca.get(), name.get());
  X509_sign(ca.get(), pki().root_key.get(), EVP_sha256());
  // Reverses the order inside every multi-valued RDN of a Name.
  auto unsort = [](Bytes* name_content) {
    std::vector<Tlv> rdns = Children(*name_content);
    bool changed = false;
    for (Tlv& rdn : rdns) {
      std::vector<Tlv> avas = Children(rdn.content);
      if (avas.size() < 2) continue;
      std::reverse(avas.begin(), avas.end());
      rdn.content = Join(avas);
      changed = true;
    }
    if (!changed) throw std::runtime_error("no multi-valued RDN");
    *name_content = Join(rdns);
  };
  const Bytes ca_der = EditAndResign(
      Der(ca.get()), [&](std::vector<Tlv>* tbs) { unsort(&(*tbs)[kSubject].content); },
      pki().root_key.get());
  ossl::X509Ptr leaf = MakeCert(CertSpec{}, pki().ek_rsa_key.get(), ca.get(), ca_key.get());
  const Bytes leaf_der = EditAndResign(
      Der(leaf.get()), [&](std::vector<Tlv>* tbs) { unsort(&(*tbs)[kIssuer].content); },
      ca_key.get());
  ASSERT_NE(ca_der, Der(ca.get()));

  for (const bool ca_as_anchor : {true, false}) {
    EkTrustStore store;
    ASSERT_TRUE(store.AddRoot(ca_as_anchor ? ca_der : Der(pki().root.get())).ok());
    if (!ca_as_anchor) {
      ASSERT_TRUE(store.AddIntermediate(ca_der).ok());
    }
    Result<EkCertInfo> info = VerifyEkCertificate(store, leaf_der, kNow);
    ASSERT_TRUE(info.ok()) << ca_as_anchor << ": " << info.status().ToString();
    EXPECT_EQ(info->der, leaf_der);
    EXPECT_REASON(VerifyEkCertificate(store, FlipSubjectBit(leaf_der, "unknown"), kNow).status(),
                  kEkCertSignatureInvalid);
  }
  // The CA's signature covers its unsorted subject as sent: a flipped bit in
  // it breaks the path.
  EkTrustStore store;
  ASSERT_TRUE(store.AddRoot(Der(pki().root.get())).ok());
  ASSERT_TRUE(store.AddIntermediate(FlipSubjectBit(ca_der, "Nuvoton Test")).ok());
  EXPECT_FALSE(VerifyEkCertificate(store, leaf_der, kNow).ok());
}

// --- signature algorithms of vendor CA chains --------------------------------

// Infineon and NationZ ECC CAs sign with ecdsa-with-SHA512, Nuvoton's are on
// P-384 and P-521: a P-521 root (SHA-512) -> P-384 intermediate (SHA-384) ->
// RSA and ECC EK certificates.
TEST_F(VendorFormsTest, EcdsaSha384AndSha512OnP384AndP521Cas) {
  ossl::PkeyPtr root_key = GenEc("P-521");
  ossl::PkeyPtr int_key = GenEc("P-384");
  CertSpec root_spec = CaSpec("P-521 Root");
  root_spec.md = EVP_sha512();
  ossl::X509Ptr root = MakeCert(root_spec, root_key.get(), nullptr, root_key.get());
  CertSpec int_spec = CaSpec("P-384 Intermediate");
  int_spec.md = EVP_sha512();
  ossl::X509Ptr intermediate = MakeCert(int_spec, int_key.get(), root.get(), root_key.get());
  EXPECT_EQ(X509_get_signature_nid(intermediate.get()), NID_ecdsa_with_SHA512);
  EkTrustStore store;
  ASSERT_TRUE(store.AddRoot(Pem(root.get())).ok());
  ASSERT_TRUE(store.AddIntermediate(Der(intermediate.get())).ok());
  EXPECT_EQ(store.Anchors()[0].key, "ECC P-521");

  for (const EVP_MD* md : {EVP_sha384(), EVP_sha512()}) {
    CertSpec spec;
    spec.md = md;
    const Bytes rsa_ek =
        Der(MakeCert(spec, pki().ek_rsa_key.get(), intermediate.get(), int_key.get()).get());
    Result<EkCertInfo> info = VerifyEkCertificate(store, rsa_ek, kNow);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_TRUE(info->relaxations_used.empty());
    spec.key_usage = "critical,keyAgreement";
    ossl::PkeyPtr p521 = GenEc("P-521");
    const Bytes ecc_ek = Der(MakeCert(spec, p521.get(), intermediate.get(), int_key.get()).get());
    EXPECT_TRUE(VerifyEkCertificate(store, ecc_ek, kNow).ok());
    Bytes flipped = rsa_ek;
    flipped[Find(flipped, {'u', 'n', 'k', 'n', 'o', 'w', 'n'})] ^= 0x01;
    EXPECT_REASON(VerifyEkCertificate(store, flipped, kNow).status(), kEkCertSignatureInvalid);
  }
}

// --- the 32-bit time_t edge -----------------------------------------------------

// A vendor root whose notAfter is 2038-01-19 03:14:07 UTC (2^31 - 1): valid
// before that second, expired from it on (OpenSSL counts notAfter itself as
// expired) with 64-bit time and no wrap, and then acceptable only with
// "expired-ca" on that anchor; the leaf stays valid.
TEST_F(VendorFormsTest, RootExpiringAtThe2038Edge) {
  constexpr int64_t kEdge = 2'147'483'647;  // 2038-01-19T03:14:07Z
  CertSpec root_spec = CaSpec("Root 2038");
  root_spec.not_after = kEdge;
  ossl::X509Ptr root = MakeCert(root_spec, pki().root_key.get(), nullptr, pki().root_key.get());
  CertSpec int_spec = CaSpec("Test EK Intermediate");
  int_spec.not_after = kEdge + 3650 * kDay;  // outlives its root, as vendors' do
  ossl::X509Ptr intermediate =
      MakeCert(int_spec, pki().int_key.get(), root.get(), pki().root_key.get());
  CertSpec leaf_spec;
  leaf_spec.not_after = kEdge + 3650 * kDay;
  const Bytes ek = Der(
      MakeCert(leaf_spec, pki().ek_rsa_key.get(), intermediate.get(), pki().int_key.get()).get());
  EkTrustStore store;
  ASSERT_TRUE(store.AddRoot(Der(root.get())).ok());
  ASSERT_TRUE(store.AddIntermediate(Der(intermediate.get())).ok());
  EXPECT_EQ(store.Anchors()[0].not_after, kEdge);

  EXPECT_TRUE(VerifyEkCertificate(store, ek, kEdge - 1).ok());
  EXPECT_REASON(VerifyEkCertificate(store, ek, kEdge).status(), kEkCertExpired);
  const Status after = VerifyEkCertificate(store, ek, kEdge + 1).status();
  EXPECT_REASON(after, kEkCertExpired);
  EXPECT_NE(after.message().find("Root 2038"), std::string::npos) << after.ToString();
  ASSERT_TRUE(store.AllowForAnchor(store.Anchors()[0].sha256, kEkRelaxExpiredCa).ok());
  Result<EkCertInfo> relaxed = VerifyEkCertificate(store, ek, kEdge + 1);
  ASSERT_TRUE(relaxed.ok()) << relaxed.status().ToString();
  EXPECT_EQ(relaxed->relaxations_used, std::vector<std::string>{kEkRelaxExpiredCa});
}

// Nuvoton: a serial with a leading zero byte. Where the zero is needed (the
// next byte has its top bit set, so the number stays positive) it is DER.
TEST_F(VendorFormsTest, SerialWithNeededLeadingZero) {
  CertSpec spec;
  spec.subject_cn = "nuvoton-serial";
  spec.serial = 0x80;  // DER: 02 02 00 80
  const Bytes der = EditAndResign(Leaf(spec), [](std::vector<Tlv>*) {}, pki().int_key.get());
  ExpectAcceptedAndSignatureBound(der, "nuvoton-serial");
  EXPECT_EQ(VerifyLeaf(der)->serial_hex, "80");
}

// Nuvoton and STMicro: zero bytes the number does not need (02 03 00 00 02):
// not DER, and OpenSSL 3.0's d2i_X509 refuses it (ASN1_R_ILLEGAL_PADDING).
// The certificate is decoded from a copy without those zeros, and its
// signature checked over the TBS as received (docs/ek-vendors.md).
TEST_F(VendorFormsTest, SerialWithPaddingZerosVerifiesOverTheReceivedTbs) {
  CertSpec spec;
  spec.subject_cn = "padded-serial";
  const Bytes der = EditAndResign(
      Leaf(spec),
      [](std::vector<Tlv>* tbs) {
        Bytes& serial = (*tbs)[kSerial].content;
        ASSERT_LT(serial.at(0), 0x80);
        serial.insert(serial.begin(), {0x00, 0x00});
      },
      pki().int_key.get());
  {
    const unsigned char* p = der.data();
    ossl::X509Ptr strict(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
    EXPECT_FALSE(strict) << "OpenSSL accepted a padded INTEGER";
    ERR_clear_error();
  }
  Result<EkCertInfo> parsed = ParseEkCertificate(der);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->serial_hex, "02");
  EXPECT_EQ(parsed->der, der);  // as received, not the copy
  ExpectAcceptedAndSignatureBound(der, "padded-serial");
  // A signature over the minimal copy's TBS (what OpenSSL itself would check)
  // does not do: only one byte string is the accepted certificate.
  const Bytes minimal = EditAndResign(
      der, [](std::vector<Tlv>* tbs) { (*tbs)[kSerial].content = {0x02}; }, pki().int_key.get());
  ASSERT_TRUE(VerifyLeaf(minimal).ok());
  Bytes swapped = der;
  std::copy(minimal.end() - 256, minimal.end(), swapped.end() - 256);  // RSA-2048 signature
  ASSERT_NE(swapped, der);
  EXPECT_REASON(VerifyLeaf(swapped).status(), kEkCertSignatureInvalid);
  // The key identity is the certificate's key, as for any other.
  Result<Bytes> id = EkKeyHashFromCertificate(der);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, *EkKeyHashFromCertificate(Leaf()));
}

// A CA certificate with such a serial is refused as an anchor, intermediate
// or presented intermediate: only the EK certificate's signature is checked
// over received bytes outside OpenSSL.
TEST_F(VendorFormsTest, CaWithPaddedSerialIsRefused) {
  const Bytes ca = EditAndResign(
      Der(pki().intermediate.get()),
      [](std::vector<Tlv>* tbs) {
        (*tbs)[kSerial].content.insert((*tbs)[kSerial].content.begin(), 0x00);
      },
      pki().root_key.get());
  EkTrustStore store;
  EXPECT_REASON(store.AddRoot(ca), kEkTrustStoreInvalid);
  EXPECT_REASON(store.AddIntermediate(ca), kEkTrustStoreInvalid);
  EkTrustStore roots;
  ASSERT_TRUE(roots.AddRoot(Der(pki().root.get())).ok());
  const std::vector<Bytes> presented = {ca};
  EXPECT_REASON(VerifyEkCertificate(roots, Leaf(), kNow, presented).status(), kEkCertMalformed);
}

}  // namespace
}  // namespace rackgate::attest
