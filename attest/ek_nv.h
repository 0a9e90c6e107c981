// EK certificates in the forms TPMs store them in NV (TCG EK Credential
// Profile §2.2.1; TCG PC Client Implementation Specification §7.3.2): the
// DER alone, the DER followed by the index's padding, the DER behind the PC
// Client stored-certificate header, and chains of DER back to back. See
// docs/ek-vendors.md, "How certificates sit in NV".
#ifndef RACKGATE_ATTEST_EK_NV_H_
#define RACKGATE_ATTEST_EK_NV_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// The TCG PC Client stored-certificate header: tag 0x1001, certType 0 (a full
// certificate), a big-endian u16 size, then (inside that size) optionally the
// full-certificate tag 0x1002, then the DER.
inline constexpr uint8_t kNvStoredCertHeader[] = {0x10, 0x01, 0x00};
inline constexpr uint8_t kNvFullCertTag[] = {0x10, 0x02};

// The DER certificate inside `nv`, as read whole from an EK certificate index
// (`tpm2_nvread`), or as an operator's file holds it: the DER's own outer
// length decides where it ends. Accepted around it: the stored-certificate
// header, and after it padding (every remaining byte the same value:
// 0xFF as an unwritten index reads, 0x00, or a vendor's fill).
// Fails with kInvalidArgument ("ek_cert_malformed") when no DER SEQUENCE
// starts where one must, its length runs past the input or the header's size,
// or anything but padding follows it. The DER itself is not parsed here.
// SECURITY: only padding may follow, so that two inputs carrying different
// meaningful bytes never reduce to the same accepted certificate.
Result<Bytes> EkCertificateDerFromNv(std::span<const uint8_t> nv);

// The DER certificates at the start of `data`, back to back (an EK chain
// index, as Intel PTT fills 0x01c00100 on); stops at the first byte that
// does not start one (padding) or after `max` certificates. Only the outer
// DER lengths are read; each certificate is parsed later by its user.
std::vector<Bytes> SplitDerCertificates(std::span<const uint8_t> data, size_t max);

// A certificate whose serialNumber INTEGER starts with zero bytes its value
// does not need (Nuvoton and STMicro EK certificates; not DER, and OpenSSL
// 3.0's d2i_X509 refuses it): the same bytes with those zeros removed and the
// two enclosing lengths (TBSCertificate, Certificate) re-encoded. For parsing
// only: a signature must be checked over `TbsCertificateOf(der)` of the
// bytes as received, never over this. nullopt when `der` is not one DER
// Certificate SEQUENCE whose serial has such padding.
std::optional<Bytes> CertificateWithMinimalSerial(std::span<const uint8_t> der);
// The TBSCertificate (tag, length, contents) inside one DER Certificate, as
// its bytes stand; nullopt when `der` is not one.
std::optional<Bytes> TbsCertificateOf(std::span<const uint8_t> der);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_EK_NV_H_
