#include "agent/renewal.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/kubelet.h"

namespace rackgate::agent {
namespace {

namespace fs = std::filesystem;

constexpr std::time_t kT0 = 1704067200;  // 2024-01-01T00:00:00Z

constexpr char kCn[] = "system:node:n1";

// A self-signed certificate for `key`, valid [not_before, not_after],
// issued to `cn`.
std::string CertificatePem(evp_pkey_st* key, std::time_t not_before, std::time_t not_after,
                           const char* cn = kCn) {
  ossl::X509Ptr x(X509_new());
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 7);
  X509_time_adj_ex(X509_getm_notBefore(x.get()), 0, 0, &not_before);
  X509_time_adj_ex(X509_getm_notAfter(x.get()), 0, 0, &not_after);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  X509_set_pubkey(x.get(), key);
  EXPECT_GT(X509_sign(x.get(), key, EVP_sha256()), 0);
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x.get());
  char* p = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &p);
  return std::string(p, static_cast<size_t>(n));
}

// The current certificate as the agent holds it (ReadHeldCertificate).
HeldCertificate Held(const std::string& pem) {
  HeldCertificate h;
  h.certificate_pem = pem;
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  ossl::X509Ptr x(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  EXPECT_NE(x, nullptr);
  h.public_key = ossl::PkeyPtr(X509_get_pubkey(x.get()));
  return h;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rackgate-renewal-test.XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(DecideCertificate, KeepsUntilTheLastThirdThenRenews) {
  const std::time_t nb = kT0, na = kT0 + 3000;
  EXPECT_EQ(DecideCertificate(nb, na, nb, 1.0 / 3), CertificateAction::kKeep);
  EXPECT_EQ(DecideCertificate(nb, na, nb + 1999, 1.0 / 3), CertificateAction::kKeep);
  EXPECT_EQ(DecideCertificate(nb, na, nb + 2000, 1.0 / 3), CertificateAction::kRenew);  // exactly a third left
  EXPECT_EQ(DecideCertificate(nb, na, na - 1, 1.0 / 3), CertificateAction::kRenew);
  EXPECT_EQ(DecideCertificate(nb, na, na, 1.0 / 3), CertificateAction::kRenew);          // expired
  EXPECT_EQ(DecideCertificate(nb, na, na + 86400, 1.0 / 3), CertificateAction::kRenew);  // long expired
  // The pool's fraction: a half.
  EXPECT_EQ(DecideCertificate(nb, na, nb + 1400, 0.5), CertificateAction::kKeep);
  EXPECT_EQ(DecideCertificate(nb, na, nb + 1500, 0.5), CertificateAction::kRenew);
  // Fraction 1: due at once.
  EXPECT_EQ(DecideCertificate(nb, na, nb, 1.0), CertificateAction::kRenew);
  // Nonsense fractions fall back to a third.
  EXPECT_EQ(DecideCertificate(nb, na, nb + 1500, 0.0), CertificateAction::kKeep);
  EXPECT_EQ(DecideCertificate(nb, na, nb + 1500, -1.0), CertificateAction::kKeep);
  EXPECT_EQ(DecideCertificate(nb, na, nb + 2100, 7.0), CertificateAction::kRenew);
  // An empty validity is always due.
  EXPECT_EQ(DecideCertificate(nb, nb, nb - 10, 1.0 / 3), CertificateAction::kRenew);
}

TEST(ReadHeldCertificate, ReadsWhatWriteKubeletPairWrote) {
  TempDir d;
  PkeyPtr key = GenerateP256Key();
  const std::string cert = CertificatePem(key.get(), kT0, kT0 + 3600);
  auto path = WriteKubeletPair(d.path().string(), kClientPrefix, cert, PrivateKeyPem(key.get()), kT0);
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  auto held = ReadHeldCertificate(d.path().string(), kClientPrefix);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->certificate_pem, cert);
  EXPECT_EQ(held->not_before, kT0);
  EXPECT_EQ(held->not_after, kT0 + 3600);
  ASSERT_NE(held->private_key, nullptr);
  EXPECT_EQ(EVP_PKEY_eq(held->private_key.get(), key.get()), 1);
  EXPECT_EQ(EVP_PKEY_eq(held->public_key.get(), key.get()), 1);
}

TEST(ReadHeldCertificate, CertificateOnlyHasNoPrivateKey) {
  TempDir d;
  PkeyPtr key = GenerateP256Key();
  ASSERT_TRUE(WriteKubeletPair(d.path().string(), kClientPrefix, CertificatePem(key.get(), kT0, kT0 + 60),
                               std::nullopt, kT0).ok());
  auto held = ReadHeldCertificate(d.path().string(), kClientPrefix);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(held->private_key, nullptr);
}

TEST(ReadHeldCertificate, MissingMismatchedAndGarbage) {
  TempDir d;
  auto missing = ReadHeldCertificate(d.path().string(), kServerPrefix);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.status().reason(), "certificate_missing");

  PkeyPtr key = GenerateP256Key();
  PkeyPtr other = GenerateP256Key();
  ASSERT_TRUE(WriteKubeletPair(d.path().string(), kServerPrefix, CertificatePem(key.get(), kT0, kT0 + 60),
                               PrivateKeyPem(other.get()), kT0).ok());
  auto mismatched = ReadHeldCertificate(d.path().string(), kServerPrefix);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().reason(), "certificate_invalid");

  ASSERT_TRUE(WriteKubeletPair(d.path().string(), kClientPrefix, "not a pem\n", std::nullopt, kT0 + 1).ok());
  auto garbage = ReadHeldCertificate(d.path().string(), kClientPrefix);
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().reason(), "certificate_invalid");
}

TEST(PlanCertificate, KeepRenewOrFirstForCertificatesOnDisk) {
  TempDir d;
  const std::string dir = d.path().string();
  auto any_key = [](const HeldCertificate&) { return true; };
  PkeyPtr key = GenerateP256Key();
  // Valid [kT0, kT0 + 3000]: kept until 2000 s in, renewed after.
  ASSERT_TRUE(WriteKubeletPair(dir, kClientPrefix, CertificatePem(key.get(), kT0, kT0 + 3000),
                               PrivateKeyPem(key.get()), kT0).ok());
  auto keep = PlanCertificate(dir, kClientPrefix, kCn, true, kT0 + 100, 1.0 / 3, any_key);
  ASSERT_TRUE(keep.cert.has_value());
  EXPECT_FALSE(keep.renew);
  EXPECT_EQ(keep.why, "valid");
  auto due = PlanCertificate(dir, kClientPrefix, kCn, true, kT0 + 2500, 1.0 / 3, any_key);
  ASSERT_TRUE(due.cert.has_value());
  EXPECT_TRUE(due.renew);
  EXPECT_EQ(due.why, "due");
  EXPECT_EQ(EVP_PKEY_eq(due.cert->private_key.get(), key.get()), 1);
  auto expired = PlanCertificate(dir, kClientPrefix, kCn, true, kT0 + 4000, 1.0 / 3, any_key);
  EXPECT_TRUE(expired.renew);
  EXPECT_EQ(expired.why, "expired");
  // The pool's fraction decides: a half left at 1600 s in is due.
  EXPECT_TRUE(PlanCertificate(dir, kClientPrefix, kCn, true, kT0 + 1600, 0.5, any_key).renew);
  EXPECT_FALSE(PlanCertificate(dir, kClientPrefix, kCn, true, kT0 + 1600, 1.0 / 3, any_key).renew);
  // Not joined (new, or reset by an operator): a first certificate, whatever is on disk.
  auto fresh = PlanCertificate(dir, kClientPrefix, kCn, false, kT0 + 100, 1.0 / 3, any_key);
  EXPECT_FALSE(fresh.cert.has_value());
  EXPECT_EQ(fresh.why, "first");
  // A key elsewhere (the TPM's) that is not the certificate's.
  auto mismatch = PlanCertificate(dir, kClientPrefix, kCn, true, kT0 + 100, 1.0 / 3,
                                  [](const HeldCertificate&) { return false; });
  EXPECT_FALSE(mismatch.cert.has_value());
  EXPECT_EQ(mismatch.why, "key_mismatch");
  // A wiped disk: nothing to keep.
  auto wiped = PlanCertificate(dir, kServerPrefix, kCn, true, kT0 + 100, 1.0 / 3, any_key);
  EXPECT_FALSE(wiped.cert.has_value());
  EXPECT_EQ(wiped.why, "certificate_missing");
}

// Issue 40, item 9: a disk moved into another machine. The certificate
// names vm-a; the appliance identified this boot as vm-b.
TEST(PlanCertificate, Issue40ACertificateOfAnotherMachineIsNeverKept) {
  TempDir d;
  const std::string dir = d.path().string();
  auto any_key = [](const HeldCertificate&) { return true; };
  PkeyPtr key = GenerateP256Key();
  ASSERT_TRUE(WriteKubeletPair(dir, kClientPrefix, CertificatePem(key.get(), kT0, kT0 + 3000, "system:node:vm-a"),
                               PrivateKeyPem(key.get()), kT0).ok());
  auto held = ReadHeldCertificate(dir, kClientPrefix);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->subject_cn, "system:node:vm-a");
  // Valid, not due, its key beside it: still not vm-b's.
  auto other = PlanCertificate(dir, kClientPrefix, "system:node:vm-b", true, kT0 + 100, 1.0 / 3, any_key);
  EXPECT_FALSE(other.cert.has_value());
  EXPECT_FALSE(other.renew);
  EXPECT_EQ(other.why, "other_machine");
  // The machine it was issued to keeps it.
  auto mine = PlanCertificate(dir, kClientPrefix, "system:node:vm-a", true, kT0 + 100, 1.0 / 3, any_key);
  ASSERT_TRUE(mine.cert.has_value());
  EXPECT_EQ(mine.why, "valid");
  // A name that only starts the same is another machine's.
  EXPECT_EQ(PlanCertificate(dir, kClientPrefix, "system:node:vm-", true, kT0 + 100, 1.0 / 3, any_key).why,
            "other_machine");
}

TEST(RemoveCertificatesOfAnother, Issue40RemovesAnotherMachinesPairsAndTheCurrentLink) {
  TempDir d;
  const std::string dir = d.path().string();
  PkeyPtr key = GenerateP256Key();
  // vm-a's older and current pairs, as kubelet keeps them.
  ASSERT_TRUE(WriteKubeletPair(dir, kClientPrefix, CertificatePem(key.get(), kT0, kT0 + 60, "system:node:vm-a"),
                               PrivateKeyPem(key.get()), kT0).ok());
  ASSERT_TRUE(WriteKubeletPair(dir, kClientPrefix, CertificatePem(key.get(), kT0, kT0 + 90, "system:node:vm-a"),
                               PrivateKeyPem(key.get()), kT0 + 10).ok());
  ASSERT_TRUE(WriteKubeletPair(dir, kServerPrefix, CertificatePem(key.get(), kT0, kT0 + 60, "system:node:vm-b"),
                               PrivateKeyPem(key.get()), kT0).ok());
  auto removed = RemoveCertificatesOfAnother(dir, kClientPrefix, "system:node:vm-b");
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, std::vector<std::string>{"system:node:vm-a"});
  size_t client_files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("kubelet-client", 0) == 0) ++client_files;
  }
  EXPECT_EQ(client_files, 0u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(d.path() / "kubelet-client-current.pem")));
  // The serving pair names vm-b: this machine's, kept.
  auto kept = RemoveCertificatesOfAnother(dir, kServerPrefix, "system:node:vm-b");
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->empty());
  EXPECT_TRUE(ReadHeldCertificate(dir, kServerPrefix).ok());
  // No directory (a wiped disk): nothing of anyone's.
  auto none = RemoveCertificatesOfAnother((d.path() / "absent").string(), kClientPrefix, "system:node:vm-b");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(RemoveCertificatesOfAnother, Issue40ACurrentFileOfAnotherIsRemovedThisMachinesOlderPairKept) {
  TempDir d;
  const std::string dir = d.path().string();
  PkeyPtr key = GenerateP256Key();
  ASSERT_TRUE(WriteKubeletPair(dir, kClientPrefix, CertificatePem(key.get(), kT0, kT0 + 60, "system:node:vm-b"),
                               PrivateKeyPem(key.get()), kT0).ok());
  // A plain file (no link) named -current.pem, of vm-a's.
  fs::remove(d.path() / "kubelet-client-current.pem");
  std::ofstream(d.path() / "kubelet-client-current.pem")
      << CertificatePem(key.get(), kT0, kT0 + 60, "system:node:vm-a") << PrivateKeyPem(key.get());
  auto removed = RemoveCertificatesOfAnother(dir, kClientPrefix, "system:node:vm-b");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, std::vector<std::string>{"system:node:vm-a"});
  EXPECT_FALSE(fs::exists(d.path() / "kubelet-client-current.pem"));
  EXPECT_TRUE(fs::exists(d.path() / "kubelet-client-2024-01-01-00-00-00.pem"));
}

TEST(ConfigStamp, Issue40ReadBackWithTheMachineItWasFor) {
  TempDir d;
  const std::string root = d.path().string();
  auto missing = ReadConfigStamp(root);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), "config_stamp_missing");
  ASSERT_TRUE(WriteConfigStamp(root, "vm-a", kT0).ok());
  auto stamp = ReadConfigStamp(root);
  ASSERT_TRUE(stamp.ok()) << stamp.status().ToString();
  EXPECT_EQ(stamp->hostname, "vm-a");
  EXPECT_EQ(stamp->applied_at, kT0);
  for (const char* bad : {"", "applied_at=1 hostname=\n", "applied_at=x hostname=a\n", "hostname=a\n",
                          "applied_at=1 hostname=a", "applied_at=1 hostname=a b\n"}) {
    std::ofstream(ConfigStampPath(root), std::ios::trunc) << bad;
    EXPECT_EQ(ReadConfigStamp(root).status().reason(), "config_stamp_invalid") << bad;
  }
}

// Issue 40, item 9: the disk's config stands for this machine only when its
// stamp names the machine the appliance identified, and the appliance has
// provisioned it.
TEST(CheckDiskConfig, Issue40EveryOutcome) {
  const ConfigStamp a{kT0, "vm-a"};
  EXPECT_TRUE(CheckDiskConfig(a, "vm-a", "joined").ok());
  EXPECT_TRUE(CheckDiskConfig(a, "vm-a", "provisioned").ok());
  // A disk moved between machines, whatever the appliance says of this one.
  for (const char* state : {"joined", "provisioned", "attested", "enrolled"}) {
    const Status s = CheckDiskConfig(a, "vm-b", state);
    EXPECT_EQ(s.reason(), "config_of_another_machine") << state;
    EXPECT_EQ(s.code(), Status::Code::kVerificationFailed);
    EXPECT_NE(s.message().find("vm-a"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("rackgatectl reset vm-b"), std::string::npos) << s.message();
  }
  // Never provisioned (new, or reset): the stamp does not make it so.
  for (const char* state : {"attested", "enrolled", ""}) {
    const Status s = CheckDiskConfig(a, "vm-a", state);
    EXPECT_EQ(s.reason(), "config_not_provisioned") << state;
    EXPECT_NE(s.message().find("reinstall the disk"), std::string::npos) << s.message();
  }
  // No stamp, or one that says nothing: whose config it is cannot be told.
  EXPECT_EQ(CheckDiskConfig(Status::NotFound("config_stamp_missing", "x"), "vm-a", "joined").reason(),
            "config_not_provisioned");
  EXPECT_EQ(CheckDiskConfig(Status::InvalidArgument("config_stamp_invalid", "x"), "vm-a", "joined").reason(),
            "config_not_provisioned");
}

// What the appliance does with the proof: SHA-256 over the signed message,
// ECDSA verified with the current certificate's key.
bool Verifies(evp_pkey_st* current_public, const Bytes& message, const Bytes& signature) {
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, current_public) != 1) return false;
  return EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(), message.size()) == 1;
}

TEST(RenewalProof, VerifiesWithOpenSslForThisNonceAndThisNewKeyOnly) {
  PkeyPtr current = GenerateP256Key();
  PkeyPtr fresh = GenerateP256Key();
  PkeyPtr stranger = GenerateP256Key();
  const std::string cert = CertificatePem(current.get(), kT0, kT0 + 60);
  const Bytes nonce(32, 0x5a);
  auto proof = MakeRenewalProof(Held(cert), nonce, fresh.get(), SoftwareSigner(current.get()));
  ASSERT_TRUE(proof.ok()) << proof.status().ToString();
  EXPECT_EQ(proof->certificate_pem, cert);
  EXPECT_TRUE(Verifies(current.get(), wire::RenewalSignedMessage(nonce, SpkiSha256(fresh.get())), proof->signature));
  // Not for another key, not for another nonce, not by another key.
  EXPECT_FALSE(
      Verifies(current.get(), wire::RenewalSignedMessage(nonce, SpkiSha256(stranger.get())), proof->signature));
  EXPECT_FALSE(Verifies(current.get(), wire::RenewalSignedMessage(Bytes(32, 0x5b), SpkiSha256(fresh.get())),
                        proof->signature));
  EXPECT_FALSE(
      Verifies(stranger.get(), wire::RenewalSignedMessage(nonce, SpkiSha256(fresh.get())), proof->signature));
  // The request carries it and decodes to the same.
  wire::CsrRequest req;
  req.signer = "kubernetes.io/kube-apiserver-client-kubelet";
  req.csr_pem = "x";
  req.renewal = *proof;
  auto back = wire::DecodeCsrRequest(wire::EncodeCsrRequest(req));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->renewal, req.renewal);
}

TEST(RenewalProof, SignerFailureIsPassedOn) {
  PkeyPtr current = GenerateP256Key();
  PkeyPtr fresh = GenerateP256Key();
  auto proof = MakeRenewalProof(Held(CertificatePem(current.get(), kT0, kT0 + 60)), Bytes(16, 1), fresh.get(),
                                [](std::span<const uint8_t>) -> Result<Bytes> {
                                  return Status::TpmError("tpm_failed", "no");
                                });
  ASSERT_FALSE(proof.ok());
  EXPECT_EQ(proof.status().reason(), "tpm_failed");
}

TEST(RenewalProof, ASignatureByAnotherKeyIsNotSent) {
  PkeyPtr current = GenerateP256Key();
  PkeyPtr other = GenerateP256Key();
  PkeyPtr fresh = GenerateP256Key();
  auto proof = MakeRenewalProof(Held(CertificatePem(current.get(), kT0, kT0 + 60)), Bytes(16, 1), fresh.get(),
                                SoftwareSigner(other.get()));
  ASSERT_FALSE(proof.ok());
  EXPECT_EQ(proof.status().code(), Status::Code::kVerificationFailed);
  EXPECT_EQ(proof.status().reason(), "renewal_signature_invalid");
}

TEST(SpkiSha256, DiffersPerKeyAndIsStable) {
  PkeyPtr a = GenerateP256Key();
  PkeyPtr b = GenerateP256Key();
  EXPECT_EQ(SpkiSha256(a.get()).size(), 32u);
  EXPECT_EQ(SpkiSha256(a.get()), SpkiSha256(a.get()));
  EXPECT_NE(SpkiSha256(a.get()), SpkiSha256(b.get()));
}

TEST(ConfigStamp, UnderTheApplyRoot) {
  TempDir d;
  const std::string root = d.path().string();
  EXPECT_EQ(ConfigStampPath(root), (d.path() / "var/lib/rackgate-agent/config-applied").string());
  EXPECT_FALSE(ConfigStampExists(root));
  ASSERT_TRUE(WriteConfigStamp(root, "node-1", kT0).ok());
  EXPECT_TRUE(ConfigStampExists(root));
  std::ifstream in(ConfigStampPath(root));
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "applied_at=1704067200 hostname=node-1\n");
  // A directory where the stamp would be is no stamp.
  TempDir e;
  fs::create_directories(ConfigStampPath(e.path().string()));
  EXPECT_FALSE(ConfigStampExists(e.path().string()));
}

TEST(Report, OkRunAndItsDoneList) {
  const auto r = MakeReport("csr", 0, "", "", {"config_kept", "client_certificate_kept"});
  EXPECT_EQ(r.outcome, "ok");
  EXPECT_EQ(r.step, "csr");
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.done, (std::vector<std::string>{"config_kept", "client_certificate_kept"}));
  auto back = wire::DecodeProvisioningReport(wire::EncodeProvisioningReport(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

TEST(Report, FailedRunDecodesOnTheApplianceSide) {
  std::vector<std::string> done(40, "config_kept");
  const auto r = MakeReport("csr", 3, "Renewal-Not-Due!", std::string(2000, 'x') + "\n\x1b[31m", done);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.reason, "renewal_not_due_");  // only [a-z0-9_] goes on the wire
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_LE(r.message.size(), wire::kMaxReportMessage);
  EXPECT_EQ(r.done.size(), wire::kMaxReportDone);
  auto back = wire::DecodeProvisioningReport(wire::EncodeProvisioningReport(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  const auto plain = MakeReport("config", 6, "io_failed", "mkdir /x: denied", {});
  EXPECT_EQ(plain.reason, "io_failed");
  EXPECT_EQ(plain.message, "mkdir /x: denied");
}

}  // namespace
}  // namespace rackgate::agent
