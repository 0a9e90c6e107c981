// Held kubelet certificates, the renewal proof, the first-boot stamp and
// the provisioning report.
#include "agent/renewal.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <stdexcept>

#include "agent/kubelet.h"
#include "attest/boot_facts.h"
#include "base/files.h"
#include "base/ossl.h"
#include "base/text.h"

namespace rackgate::agent {

namespace {

// A kubelet PEM file holds a certificate (chain) and an EC key: a few KiB.
constexpr size_t kMaxHeldFileBytes = 64 * 1024;

Status Invalid(std::string message) {
  return Status::InvalidArgument("certificate_invalid", std::move(message));
}

bool ToUnix(const ASN1_TIME* t, std::time_t* out) {
  struct tm tm = {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return false;
  *out = timegm(&tm);
  return true;
}

Bytes Sha256(std::span<const uint8_t> data) {
  Bytes d(SHA256_DIGEST_LENGTH);
  SHA256(data.data(), data.size(), d.data());
  return d;
}

// The subject's commonName when it has exactly one, else "".
std::string SubjectCommonName(X509* cert) {
  const X509_NAME* name = X509_get_subject_name(cert);
  const int at = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (at < 0 || X509_NAME_get_index_by_NID(name, NID_commonName, at) >= 0) return "";
  const ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at));
  if (value == nullptr) return "";
  const unsigned char* data = ASN1_STRING_get0_data(value);
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(ASN1_STRING_length(value)));
}

}  // namespace

Result<HeldCertificate> ReadHeldCertificate(const std::string& dir, const char* prefix) {
  return ReadHeldCertificateFile((std::filesystem::path(dir) / (std::string(prefix) + "-current.pem")).string());
}

Result<HeldCertificate> ReadHeldCertificateFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return Status::NotFound("certificate_missing", path + " does not exist");
  }
  auto data = ReadFile(path, kMaxHeldFileBytes);
  if (!data.ok()) return data.status();
  ossl::BioPtr bio(BIO_new_mem_buf(data->data(), static_cast<int>(data->size())));
  if (!bio) throw std::runtime_error("BIO_new_mem_buf failed");
  ossl::X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return Invalid(path + ": no certificate");
  HeldCertificate h;
  h.subject_cn = SubjectCommonName(cert.get());
  if (!ToUnix(X509_get0_notBefore(cert.get()), &h.not_before) ||
      !ToUnix(X509_get0_notAfter(cert.get()), &h.not_after)) {
    return Invalid(path + ": unreadable validity");
  }
  h.public_key = ossl::PkeyPtr(X509_get_pubkey(cert.get()));
  if (!h.public_key) return Invalid(path + ": unreadable public key");
  // Whatever follows the certificate: further certificates are skipped,
  // the first private key is the kubelet's.
  for (;;) {
    char* name = nullptr;
    char* header = nullptr;
    unsigned char* der = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &der, &len) != 1) break;
    const std::string n = name;
    OPENSSL_free(name);
    OPENSSL_free(header);
    if (n.find("PRIVATE KEY") != std::string::npos) {
      const unsigned char* p = der;
      h.private_key = ossl::PkeyPtr(d2i_AutoPrivateKey(nullptr, &p, len));
      OPENSSL_clear_free(der, static_cast<size_t>(len));
      if (!h.private_key) return Invalid(path + ": unreadable private key");
      break;
    }
    OPENSSL_free(der);
  }
  if (h.private_key && EVP_PKEY_eq(h.private_key.get(), h.public_key.get()) != 1) {
    return Invalid(path + ": the private key is not the certificate's");
  }
  ossl::BioPtr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509(out.get(), cert.get()) != 1) throw std::runtime_error("PEM_write_bio_X509 failed");
  char* p = nullptr;
  const long n = BIO_get_mem_data(out.get(), &p);
  h.certificate_pem.assign(p, static_cast<size_t>(n));
  return h;
}

CertificateAction DecideCertificate(std::time_t not_before, std::time_t not_after, std::time_t now,
                                    double renew_fraction) {
  if (!(renew_fraction > 0.0 && renew_fraction <= 1.0)) renew_fraction = 1.0 / 3.0;
  if (not_after <= not_before || now >= not_after) return CertificateAction::kRenew;
  const double validity = static_cast<double>(not_after - not_before);
  const double left = static_cast<double>(not_after - now);
  return left <= renew_fraction * validity ? CertificateAction::kRenew : CertificateAction::kKeep;
}

CertificatePlan PlanCertificate(const std::string& dir, const char* prefix, const std::string& expected_cn,
                                bool joined, std::time_t now, double renew_fraction,
                                const std::function<bool(const HeldCertificate&)>& key_matches) {
  CertificatePlan p;
  if (!joined) {
    p.why = "first";
    return p;
  }
  auto cert = ReadHeldCertificate(dir, prefix);
  if (!cert.ok()) {
    p.why = cert.status().reason();
    return p;
  }
  // SECURITY: a certificate is this machine's only when it names the
  // machine the appliance identified this boot (a disk moved from another
  // machine carries that machine's identity); another's is never kept, nor
  // presented for renewal.
  if (cert->subject_cn != expected_cn) {
    p.why = "other_machine";
    return p;
  }
  if (!key_matches(*cert)) {
    p.why = "key_mismatch";
    return p;
  }
  p.renew = DecideCertificate(cert->not_before, cert->not_after, now, renew_fraction) == CertificateAction::kRenew;
  p.why = p.renew ? (now >= cert->not_after ? "expired" : "due") : "valid";
  p.cert = std::move(cert).value();
  return p;
}

Result<std::vector<std::string>> RemoveCertificatesOfAnother(const std::string& dir, const char* prefix,
                                                             const std::string& expected_cn) {
  namespace fs = std::filesystem;
  const std::string head = std::string(prefix) + "-";
  const std::string current = head + "current.pem";
  std::vector<std::string> others;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return others;  // no directory: nothing of anyone's
  std::vector<fs::path> remove;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == current || name.size() <= head.size() + 4 || name.compare(0, head.size(), head) != 0 ||
        name.compare(name.size() - 4, 4, ".pem") != 0) {
      continue;
    }
    std::error_code sec;
    if (!it->is_regular_file(sec) || it->is_symlink(sec)) continue;
    auto held = ReadHeldCertificateFile(it->path().string());
    if (!held.ok() || held->subject_cn == expected_cn) continue;
    others.push_back(held->subject_cn.empty() ? "(no single CN)" : held->subject_cn);
    remove.push_back(it->path());
  }
  if (ec) return Status::IoError("io_failed", dir + ": " + ec.message());
  for (const auto& p : remove) {
    if (!fs::remove(p, ec) && ec) return Status::IoError("io_failed", p.string() + ": " + ec.message());
  }
  // The current link, once what it names is gone (or when it is a file of
  // another machine's itself).
  const fs::path link = fs::path(dir) / current;
  const fs::file_status st = fs::symlink_status(link, ec);
  if (fs::is_symlink(st) || fs::is_regular_file(st)) {
    bool drop = fs::is_symlink(st) && !fs::exists(link, ec);
    if (!drop) {
      auto held = ReadHeldCertificateFile(link.string());
      if (held.ok() && held->subject_cn != expected_cn) {
        others.push_back(held->subject_cn.empty() ? "(no single CN)" : held->subject_cn);
        drop = true;
      }
    }
    if (drop && !fs::remove(link, ec) && ec) return Status::IoError("io_failed", link.string() + ": " + ec.message());
  }
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  return others;
}

Bytes SpkiSha256(evp_pkey_st* key) {
  unsigned char* der = nullptr;
  const int n = i2d_PUBKEY(key, &der);
  if (n <= 0) throw std::runtime_error("i2d_PUBKEY failed");
  Bytes d = Sha256(std::span<const uint8_t>(der, static_cast<size_t>(n)));
  OPENSSL_free(der);
  return d;
}

Result<wire::RenewalProof> MakeRenewalProof(const HeldCertificate& current, std::span<const uint8_t> nonce,
                                            evp_pkey_st* new_key, const DigestSigner& current_signer) {
  const Bytes spki = SpkiSha256(new_key);
  const Bytes message = wire::RenewalSignedMessage(nonce, spki);
  auto sig = current_signer(Sha256(message));
  if (!sig.ok()) return sig.status();
  // What the appliance does: SHA-256 over the message, verified with the
  // current certificate's key. A proof that would be refused is not sent.
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, current.public_key.get()) != 1) {
    throw std::runtime_error("EVP_DigestVerifyInit failed");
  }
  if (EVP_DigestVerify(ctx.get(), sig->data(), sig->size(), message.data(), message.size()) != 1) {
    return Status::VerificationFailed("renewal_signature_invalid",
                                      "the current key's renewal signature does not verify against its certificate");
  }
  return wire::RenewalProof{current.certificate_pem, std::move(sig).value()};
}

std::string ConfigStampPath(const std::string& apply_root) {
  return (std::filesystem::path(apply_root) / (kConfigStampInRoot + 1)).string();
}

bool ConfigStampExists(const std::string& apply_root) {
  struct stat st;
  return ::lstat(ConfigStampPath(apply_root).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string ConfigStampText(const std::string& hostname, std::time_t now) {
  return "applied_at=" + std::to_string(static_cast<long long>(now)) + " hostname=" + hostname + "\n";
}

Status WriteConfigStamp(const std::string& apply_root, const std::string& hostname, std::time_t now) {
  const std::filesystem::path p(ConfigStampPath(apply_root));
  return WriteInDir(p.parent_path().string(), p.filename().string(), ConfigStampText(hostname, now), 0644);
}

Result<ConfigStamp> ReadConfigStamp(const std::string& root) {
  const std::string path = ConfigStampPath(root);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return Status::NotFound("config_stamp_missing", path + " does not exist");
  }
  auto data = ReadFile(path, 4096);
  if (!data.ok()) return Status::InvalidArgument("config_stamp_invalid", data.status().message());
  const std::string text(data->begin(), data->end());
  const std::string a = "applied_at=", h = " hostname=";
  const size_t sp = text.find(h);
  ConfigStamp stamp;
  if (text.compare(0, a.size(), a) != 0 || sp == std::string::npos || text.empty() || text.back() != '\n') {
    return Status::InvalidArgument("config_stamp_invalid", path + ": not applied_at=N hostname=NAME");
  }
  const std::string when = text.substr(a.size(), sp - a.size());
  stamp.hostname = text.substr(sp + h.size(), text.size() - 1 - sp - h.size());
  if (when.empty() || when.size() > 19 || when.find_first_not_of("0123456789") != std::string::npos ||
      stamp.hostname.empty() || stamp.hostname.find_first_of(" \n") != std::string::npos) {
    return Status::InvalidArgument("config_stamp_invalid", path + ": not applied_at=N hostname=NAME");
  }
  stamp.applied_at = static_cast<std::time_t>(std::stoll(when));
  return stamp;
}

Status CheckDiskConfig(const Result<ConfigStamp>& stamp, const std::string& hostname, const std::string& state) {
  const std::string reinstall =
      "reinstall the disk for " + hostname +
      ": wipe it and boot the machine through the agent's initramfs (rackgatectl pointer --kernel-args), "
      "whose config step fetches and applies its own config";
  // SECURITY: the disk's config is trusted as this machine's only when it
  // was fetched for the machine the appliance identified this boot. A disk
  // moved from another machine carries that machine's files and secrets.
  if (stamp.ok() && stamp->hostname != hostname) {
    return Status::VerificationFailed(
        "config_of_another_machine",
        "this disk's config was applied for " + text::PrintableAscii(stamp->hostname, 64) +
            "; the appliance identified this machine (its TPM) as " + hostname +
            ": put the disk back into " + text::PrintableAscii(stamp->hostname, 64) + ", or " + reinstall +
            " (after rackgatectl reset " + hostname + " if it had joined)");
  }
  // Only the appliance says a machine is provisioned; a stamp alone never does.
  if (state != "provisioned" && state != "joined") {
    return Status::VerificationFailed("config_not_provisioned",
                                      "the appliance has not provisioned " + hostname + " (state " + state +
                                          ": new, or reset since its config was applied), yet this disk holds a "
                                          "config: " + reinstall);
  }
  if (!stamp.ok()) {
    return Status::VerificationFailed("config_not_provisioned",
                                      "this disk's config stamp cannot say which machine its config is for (" +
                                          stamp.status().reason() + "): " + reinstall);
  }
  return Status::Ok();
}

wire::ProvisioningReport MakeReport(const std::string& step, int exit_status, const std::string& reason,
                                    const std::string& message, const std::vector<std::string>& done) {
  wire::ProvisioningReport r;
  r.outcome = exit_status == 0 ? "ok" : "failed";
  r.step = step;
  r.exit_status = exit_status;
  if (exit_status != 0) {
    // The wire's reason alphabet: [a-z0-9_], at most 64.
    for (char c : reason.substr(0, 64)) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      r.reason += ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') ? c : '_';
    }
    if (r.reason.empty()) r.reason = "failed";
    r.message = text::PrintableAscii(message, wire::kMaxReportMessage);
    if (r.message.size() > wire::kMaxReportMessage) r.message.resize(wire::kMaxReportMessage);
  }
  const size_t n = std::min(done.size(), wire::kMaxReportDone);
  r.done.assign(done.begin(), done.begin() + static_cast<long>(n));
  return r;
}

}  // namespace rackgate::agent
