// Hashing by TPM algorithm id for attest/: the EVP_MD for a TPM_ALG_ID and
// one-shot digests. Internal.
#ifndef RACKGATE_ATTEST_DIGEST_H_
#define RACKGATE_ATTEST_DIGEST_H_

#if !defined(RACKGATE_ATTEST_INTERNAL)
#error "attest/digest.h is internal to attest/"
#endif

#include <openssl/evp.h>

#include <cstdint>
#include <initializer_list>
#include <span>

#include "attest/tpm.h"

namespace rackgate::attest {

// The fetched EVP_MD for sha1/sha256/sha384/sha512, or nullptr. BORROWED:
// fetched once per process and never freed.
const EVP_MD* EvpMd(uint16_t hash_alg);

// H_alg(part1 || part2 || ...). REQUIRES: EvpMd(hash_alg) != nullptr.
// Throws std::bad_alloc-like runtime_error only on OpenSSL resource failure.
Bytes Hash(uint16_t hash_alg, std::initializer_list<std::span<const uint8_t>> parts);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_DIGEST_H_
