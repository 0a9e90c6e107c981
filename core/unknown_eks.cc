// Unknown EKs that knocked recently: a bounded LRU table in memory.
#include "core/unknown_eks.h"

#include <openssl/bio.h>
#include <openssl/x509.h>

#include <memory>

namespace rackgate::core {

namespace {

// RFC 2253 text of an X.509 name, cut at `max` bytes.
std::string NameText(const X509_NAME* name, size_t max) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  if (n <= 0 || data == nullptr) return "";
  std::string out(data, static_cast<size_t>(n));
  if (out.size() > max) out.resize(max);
  return out;
}

}  // namespace

UnknownEkTable::UnknownEkTable(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

void UnknownEkTable::Record(const std::string& ek_hash, const std::string& address, const std::string& reason,
                            std::optional<std::span<const uint8_t>> cert_der, int64_t now,
                            std::span<const uint8_t> ek_public) {
  std::string issuer, subject;
  if (cert_der && !cert_der->empty()) {
    const unsigned char* p = cert_der->data();
    std::unique_ptr<X509, decltype(&X509_free)> cert(d2i_X509(nullptr, &p, static_cast<long>(cert_der->size())),
                                                     &X509_free);
    if (cert) {
      issuer = NameText(X509_get_issuer_name(cert.get()), kMaxNameBytes);
      subject = NameText(X509_get_subject_name(cert.get()), kMaxNameBytes);
    }
  }
  std::lock_guard lock(mu_);
  auto it = index_.find(ek_hash);
  if (it == index_.end()) {
    if (entries_.size() >= capacity_) {
      index_.erase(entries_.back().ek_hash);
      entries_.pop_back();
    }
    entries_.push_front(UnknownEk{ek_hash, now, now, 0, "", "", "", "", {}});
    it = index_.emplace(ek_hash, entries_.begin()).first;
  } else {
    entries_.splice(entries_.begin(), entries_, it->second);
  }
  UnknownEk& e = *it->second;
  e.last_seen = now;
  ++e.count;
  e.address = address;
  e.reason = reason;
  if (!ek_public.empty() && ek_public.size() <= kMaxEkPublicBytes) e.ek_public.assign(ek_public.begin(), ek_public.end());
  if (!issuer.empty() || !subject.empty()) {
    e.cert_issuer = std::move(issuer);
    e.cert_subject = std::move(subject);
  }
}

std::vector<UnknownEk> UnknownEkTable::SeenSince(int64_t since) const {
  std::lock_guard lock(mu_);
  std::vector<UnknownEk> out;
  for (const auto& e : entries_) {
    if (e.last_seen >= since) out.push_back(e);
  }
  return out;
}

size_t UnknownEkTable::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace rackgate::core
