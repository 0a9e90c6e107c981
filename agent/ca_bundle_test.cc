// The CA bundle of an evidence answer: refused unless every block is a CA
// certificate; the agent's CA file replaced atomically only when it differs.
#include "agent/ca_bundle.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/ossl.h"

namespace rackgate::agent {
namespace {

// A self-signed certificate as PEM: a CA (CA:TRUE) or a leaf.
std::string Certificate(bool ca, const std::string& cn) {
  ossl::PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  ossl::X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key.get());
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  ossl::ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE"));
  X509_add_ext(cert.get(), ext.get(), -1);
  X509_sign(cert.get(), key.get(), EVP_sha256());
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert.get());
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

class CaFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ca_bundle_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/ca.pem";
    std::ofstream(path_) << old_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Text() const {
    std::ifstream f(path_);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  }
  ino_t Inode() const {
    struct stat st;
    EXPECT_EQ(::stat(path_.c_str(), &st), 0);
    return st.st_ino;
  }
  const std::string old_ = Certificate(true, "old CA");
  const std::string next_ = Certificate(true, "next CA");
  std::string dir_, path_;
};

TEST_F(CaFile, ABundleOfCasReplacesTheFileAtomically) {
  const std::string bundle = old_ + next_;
  auto r = UpdateCaFile(path_, bundle);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, CaFileUpdate::kReplaced);
  EXPECT_EQ(Text(), bundle);
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
}

TEST_F(CaFile, AnUnchangedBundleIsNotRewritten) {
  const ino_t before = Inode();
  auto r = UpdateCaFile(path_, old_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, CaFileUpdate::kUnchanged);
  EXPECT_EQ(Inode(), before);  // a rewrite renames a new inode in
}

TEST_F(CaFile, ABadBundleIsRefusedAndChangesNothing) {
  const std::string leaf = Certificate(false, "a leaf");
  ossl::PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const std::string key_pem(data, static_cast<size_t>(BIO_get_mem_data(bio.get(), &data)));
  // A line of base64 less: the DER's lengths no longer add up.
  std::string broken = next_;
  const size_t line = broken.find('\n', broken.find('\n') + 1) + 1;
  broken.erase(line, broken.find('\n', line) + 1 - line);
  std::string nine;
  for (int i = 0; i < 9; ++i) nine += old_;
  for (const std::string& bad : {old_ + leaf, next_ + key_pem, broken, std::string("no pem"), std::string(), nine}) {
    auto r = UpdateCaFile(path_, bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), "ca_bundle_invalid") << r.status().ToString();
    EXPECT_EQ(Text(), old_);
  }
  EXPECT_TRUE(ValidateCaBundle(old_ + next_).ok());
}

TEST_F(CaFile, AFileThatCannotBeWrittenIsAnIoError) {
  auto r = UpdateCaFile(dir_ + "/missing-dir/ca.pem", next_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "file_unwritable");
}

}  // namespace
}  // namespace rackgate::agent
