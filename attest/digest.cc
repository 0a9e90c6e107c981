// Hashing by TPM algorithm id.
#include "attest/digest.h"

#include <stdexcept>

#include "base/ossl.h"

namespace rackgate::attest {

namespace {

const EVP_MD* Fetch(const char* name) {
  const EVP_MD* md = EVP_MD_fetch(nullptr, name, nullptr);
  if (md == nullptr) throw std::runtime_error(std::string("EVP_MD_fetch failed: ") + name);
  return md;
}

}  // namespace

const EVP_MD* EvpMd(uint16_t hash_alg) {
  // Fetched once: an explicit fetch avoids OpenSSL 3's per-call implicit
  // lookup, which costs more than hashing a quote.
  static const EVP_MD* const sha1 = Fetch("SHA1");
  static const EVP_MD* const sha256 = Fetch("SHA256");
  static const EVP_MD* const sha384 = Fetch("SHA384");
  static const EVP_MD* const sha512 = Fetch("SHA512");
  switch (hash_alg) {
    case kAlgSha1: return sha1;
    case kAlgSha256: return sha256;
    case kAlgSha384: return sha384;
    case kAlgSha512: return sha512;
    default: return nullptr;
  }
}

Bytes Hash(uint16_t hash_alg, std::initializer_list<std::span<const uint8_t>> parts) {
  const EVP_MD* md = EvpMd(hash_alg);
  if (md == nullptr) throw std::logic_error("Hash: unsupported algorithm");
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex2(ctx.get(), md, nullptr) != 1) {
    throw std::runtime_error("EVP_DigestInit failed: " + ossl::DrainErrors());
  }
  for (auto p : parts) {
    if (EVP_DigestUpdate(ctx.get(), p.data(), p.size()) != 1) {
      throw std::runtime_error("EVP_DigestUpdate failed");
    }
  }
  Bytes out(EVP_MD_get_size(md));
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx.get(), out.data(), &n) != 1 || n != out.size()) {
    throw std::runtime_error("EVP_DigestFinal failed");
  }
  return out;
}

}  // namespace rackgate::attest
