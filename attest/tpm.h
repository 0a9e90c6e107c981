// TPM 2.0 wire structures as libattest sees them: parsed from untrusted bytes
// with tss2-mu, checked for exact consumption, and reduced to the fields a
// verifier needs. Names follow the TCG spec's types so they can be grepped.
#ifndef RACKGATE_ATTEST_TPM_H_
#define RACKGATE_ATTEST_TPM_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace rackgate::attest {

using Bytes = std::vector<uint8_t>;

// TPM_ALG_ID values used here (TCG Algorithm Registry).
inline constexpr uint16_t kAlgRsa = 0x0001;
inline constexpr uint16_t kAlgSha1 = 0x0004;
inline constexpr uint16_t kAlgHmac = 0x0005;
inline constexpr uint16_t kAlgAes = 0x0006;
inline constexpr uint16_t kAlgKeyedHash = 0x0008;
inline constexpr uint16_t kAlgSha256 = 0x000B;
inline constexpr uint16_t kAlgSha384 = 0x000C;
inline constexpr uint16_t kAlgSha512 = 0x000D;
inline constexpr uint16_t kAlgNull = 0x0010;
inline constexpr uint16_t kAlgRsaSsa = 0x0014;
inline constexpr uint16_t kAlgRsaPss = 0x0016;
inline constexpr uint16_t kAlgOaep = 0x0017;
inline constexpr uint16_t kAlgEcdsa = 0x0018;
inline constexpr uint16_t kAlgEcdh = 0x0019;
inline constexpr uint16_t kAlgEcc = 0x0023;
inline constexpr uint16_t kAlgSymCipher = 0x0025;
inline constexpr uint16_t kAlgCfb = 0x0043;

// TPM_ECC_CURVE values.
inline constexpr uint16_t kEccNistP256 = 0x0003;
inline constexpr uint16_t kEccNistP384 = 0x0004;
inline constexpr uint16_t kEccNistP521 = 0x0005;

// TPMA_OBJECT bits.
inline constexpr uint32_t kAttrFixedTpm = 1u << 1;
inline constexpr uint32_t kAttrStClear = 1u << 2;
inline constexpr uint32_t kAttrFixedParent = 1u << 4;
inline constexpr uint32_t kAttrSensitiveDataOrigin = 1u << 5;
inline constexpr uint32_t kAttrUserWithAuth = 1u << 6;
inline constexpr uint32_t kAttrAdminWithPolicy = 1u << 7;
inline constexpr uint32_t kAttrNoDa = 1u << 10;
inline constexpr uint32_t kAttrEncryptedDuplication = 1u << 11;
inline constexpr uint32_t kAttrRestricted = 1u << 16;
inline constexpr uint32_t kAttrDecrypt = 1u << 17;
inline constexpr uint32_t kAttrSign = 1u << 18;

// Digest size in bytes of a TPM hash algorithm; 0 for one we do not know.
size_t DigestSize(uint16_t hash_alg);
// "sha256", ... ; "0x%04x" for others.
std::string HashAlgName(uint16_t hash_alg);
// The inverse of HashAlgName for sha1/sha256/sha384/sha512; kAlgNull otherwise.
uint16_t HashAlgFromName(std::string_view name);

// A TPMT_PUBLIC (from a TPM2B_PUBLIC) reduced to what verifiers use. The exact
// marshalled TPMT_PUBLIC bytes are kept: the object's name is computed over
// them, never over a re-marshalled copy.
struct TpmPublic {
  uint16_t type = kAlgNull;  // kAlgRsa or kAlgEcc (others are refused)
  uint16_t name_alg = kAlgNull;
  uint32_t attributes = 0;
  Bytes auth_policy;

  // parameters.*Detail.symmetric (storage keys such as the EK); kAlgNull when none.
  uint16_t symmetric_alg = kAlgNull;
  uint16_t symmetric_key_bits = 0;
  uint16_t symmetric_mode = kAlgNull;
  // parameters.*Detail.scheme; kAlgNull when the key leaves it to the caller.
  uint16_t scheme = kAlgNull;
  uint16_t scheme_hash = kAlgNull;

  // RSA: key size, exponent (0 on the wire is normalised to 65537), modulus.
  uint16_t rsa_key_bits = 0;
  uint32_t rsa_exponent = 0;
  Bytes rsa_modulus;

  // ECC: curve and the public point's coordinates as sent.
  uint16_t ecc_curve = 0;
  Bytes ecc_x;
  Bytes ecc_y;

  Bytes marshalled;  // the TPMT_PUBLIC exactly as received (TPM2B contents)
};

// Parses a TPM2B_PUBLIC (as `tpm2_createek -f tss` / `tpm2_createak -f tss`
// write). Fails with kInvalidArgument ("tpm2b_public_malformed") on a short or
// overlong buffer, a size prefix that disagrees with the contents, or trailing
// bytes, an RSA modulus whose length disagrees with keyBits; kUnsupported
// ("key_type_unsupported") for key types other than RSA and ECC or a name
// algorithm we cannot hash (sha1 parses; policies refuse it where it matters).
Result<TpmPublic> ParseTpm2bPublic(std::span<const uint8_t> data);

// The object name: nameAlg (big-endian u16) || H_nameAlg(marshalled TPMT_PUBLIC).
Bytes ObjectName(const TpmPublic& pub);

// PCR values by bank: hash algorithm -> PCR index -> value.
using PcrBank = std::map<uint32_t, Bytes>;
using PcrValues = std::map<uint16_t, PcrBank>;

// One bank's PCR selection (TPMS_PCR_SELECTION), as a sorted index list.
struct PcrSelection {
  uint16_t hash_alg = kAlgNull;
  std::vector<uint32_t> pcrs;
};

// "sha256:0,1,2+sha1:7" (the tpm2-tools form). kInvalidArgument on bad syntax,
// an unknown bank or an index above 23.
Result<std::vector<PcrSelection>> ParsePcrSelectionList(std::string_view text);
std::string FormatPcrSelectionList(const std::vector<PcrSelection>& sel);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_TPM_H_
