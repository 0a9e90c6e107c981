// ByteReader: bounded reads over untrusted bytes.
#include "base/byte_reader.h"

namespace rackgate {

namespace {

template <typename T>
bool ReadBE(std::span<const uint8_t>* data, T* out) {
  if (data->size() < sizeof(T)) return false;
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>((v << 8) | (*data)[i]);
  *out = v;
  *data = data->subspan(sizeof(T));
  return true;
}

template <typename T>
bool ReadLE(std::span<const uint8_t>* data, T* out) {
  if (data->size() < sizeof(T)) return false;
  T v = 0;
  for (size_t i = sizeof(T); i > 0; --i) v = static_cast<T>((v << 8) | (*data)[i - 1]);
  *out = v;
  *data = data->subspan(sizeof(T));
  return true;
}

}  // namespace

bool ByteReader::ReadU8(uint8_t* out) { return ReadBE(&data_, out); }
bool ByteReader::ReadU16BE(uint16_t* out) { return ReadBE(&data_, out); }
bool ByteReader::ReadU32BE(uint32_t* out) { return ReadBE(&data_, out); }
bool ByteReader::ReadU64BE(uint64_t* out) { return ReadBE(&data_, out); }
bool ByteReader::ReadU16LE(uint16_t* out) { return ReadLE(&data_, out); }
bool ByteReader::ReadU32LE(uint32_t* out) { return ReadLE(&data_, out); }
bool ByteReader::ReadU64LE(uint64_t* out) { return ReadLE(&data_, out); }

bool ByteReader::ReadSpan(size_t n, std::span<const uint8_t>* out) {
  if (data_.size() < n) return false;
  *out = data_.first(n);
  data_ = data_.subspan(n);
  return true;
}

bool ByteReader::ReadBytes(size_t n, ByteReader* out) {
  std::span<const uint8_t> s;
  if (!ReadSpan(n, &s)) return false;
  *out = ByteReader(s);
  return true;
}

bool ByteReader::Skip(size_t n) {
  std::span<const uint8_t> s;
  return ReadSpan(n, &s);
}

bool ByteReader::ReadU16BEPrefixed(ByteReader* out) {
  uint16_t n;
  return ReadU16BE(&n) && ReadBytes(n, out);
}

bool ByteReader::ReadU32LEPrefixed(ByteReader* out) {
  uint32_t n;
  return ReadU32LE(&n) && ReadBytes(n, out);
}

}  // namespace rackgate
