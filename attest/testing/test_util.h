// Helpers shared by attest/ unit tests: reading fixtures and hex.
#ifndef RACKGATE_ATTEST_TESTING_TEST_UTIL_H_
#define RACKGATE_ATTEST_TESTING_TEST_UTIL_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace rackgate::testing {

// The project's source root: $RACKGATE_SOURCE_DIR (meson sets it for every
// test), else the working directory.
inline std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("RACKGATE_SOURCE_DIR");
  return root ? std::string(root) + "/" + relative : relative;
}

// Reads a file named relative to the project's source root.
inline std::vector<uint8_t> ReadFixture(const std::string& relative) {
  const std::string path = SourcePath(relative);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open fixture " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The directory of the real event logs: $RACKGATE_TESTDATA_DIR/eventlogs
// (meson sets it to the project's testdata/), else testdata/eventlogs under
// the source root.
inline std::string EventLogDir() {
  if (const char* env = std::getenv("RACKGATE_TESTDATA_DIR")) return std::string(env) + "/eventlogs";
  return SourcePath("testdata/eventlogs");
}

inline std::string EventLogPath(const std::string& name) { return EventLogDir() + "/" + name; }

// Reads one of the real event logs by file name.
inline std::vector<uint8_t> ReadEventLog(const std::string& name) {
  const std::string path = EventLogPath(name);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open event log " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

inline std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// One DER TLV: `tag`, the definite length (short form, or 0x81/0x82 for up
// to 65535 bytes), then `content`. For tests that put DER together byte by
// byte so that each breaks one thing.
inline std::vector<uint8_t> DerTlv(uint8_t tag, const std::vector<uint8_t>& content) {
  std::vector<uint8_t> out{tag};
  const size_t n = content.size();
  if (n < 0x80) {
    out.push_back(static_cast<uint8_t>(n));
  } else if (n < 0x100) {
    out.insert(out.end(), {0x81, static_cast<uint8_t>(n)});
  } else {
    out.insert(out.end(), {0x82, static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)});
  }
  out.insert(out.end(), content.begin(), content.end());
  return out;
}

}  // namespace rackgate::testing

#endif  // RACKGATE_ATTEST_TESTING_TEST_UTIL_H_
