// ByteReader: a bounded cursor over untrusted bytes. Every read checks the
// remaining length first (by subtraction, never by addition) and returns false
// on a short read; after any false the reader's position is unspecified and the
// caller must abandon the parse. TPM structures are big-endian, TCG event logs
// little-endian: each read names its byte order.
#ifndef RACKGATE_BASE_BYTE_READER_H_
#define RACKGATE_BASE_BYTE_READER_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace rackgate {

class ByteReader {
 public:
  ByteReader() = default;
  explicit ByteReader(std::span<const uint8_t> data) : data_(data) {}

  size_t remaining() const { return data_.size(); }
  bool empty() const { return data_.empty(); }
  // The unread bytes. BORROWED: valid as long as the underlying buffer.
  std::span<const uint8_t> rest() const { return data_; }

  [[nodiscard]] bool ReadU8(uint8_t* out);
  [[nodiscard]] bool ReadU16BE(uint16_t* out);
  [[nodiscard]] bool ReadU32BE(uint32_t* out);
  [[nodiscard]] bool ReadU64BE(uint64_t* out);
  [[nodiscard]] bool ReadU16LE(uint16_t* out);
  [[nodiscard]] bool ReadU32LE(uint32_t* out);
  [[nodiscard]] bool ReadU64LE(uint64_t* out);

  // Takes the next n bytes as a sub-reader (or as a span). Fails, consuming
  // nothing, when fewer than n remain.
  [[nodiscard]] bool ReadBytes(size_t n, ByteReader* out);
  [[nodiscard]] bool ReadSpan(size_t n, std::span<const uint8_t>* out);
  [[nodiscard]] bool Skip(size_t n);

  // A TPM2B-style field: a big-endian u16 length, then that many bytes.
  [[nodiscard]] bool ReadU16BEPrefixed(ByteReader* out);
  // A little-endian u32 length, then that many bytes (TCG event log fields).
  [[nodiscard]] bool ReadU32LEPrefixed(ByteReader* out);

 private:
  std::span<const uint8_t> data_;
};

}  // namespace rackgate

#endif  // RACKGATE_BASE_BYTE_READER_H_
