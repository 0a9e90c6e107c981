// eventlog-replay benchmark: MB/s of ParseEventLog + Replay over the real
// logs in testdata/eventlogs, against raw SHA-256 throughput over the
// same bytes measured in the same run.
//
// The ceiling: one SHA-256 pass over each log's bytes (one EVP_Digest call
// per log, on a buffer of that log's size). Replay hashes each event's digest
// once per bank (PCR := H(PCR || digest)), which is roughly as much hashing
// as reading the log once, plus parsing and copying; so hashing the log once
// is the fair thing a replayer cannot beat by much. Rounds are interleaved so
// both sides see the same machine load; the best round of each is compared.
// Last line: `eventlog-replay: rate=R MB/s ceiling=C MB/s ratio=X`.
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/boot_facts.h"
#include "attest/eventlog.h"

namespace {

using rackgate::attest::Bytes;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::vector<Bytes> LoadLogs(const fs::path& dir, size_t* events) {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".bin") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Bytes> logs;
  *events = 0;
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    Bytes b(std::istreambuf_iterator<char>(in), {});
    auto log = rackgate::attest::ParseEventLog(b);
    if (!log.ok()) throw std::runtime_error(p.string() + ": " + log.status().ToString());
    *events += log->events.size();
    logs.push_back(std::move(b));
  }
  return logs;
}

// Seconds for `reps` passes of f over every log.
template <typename F>
double Time(int reps, const std::vector<Bytes>& logs, F&& f) {
  const auto start = Clock::now();
  for (int r = 0; r < reps; ++r) {
    for (const Bytes& log : logs) {
      if (!f(log)) throw std::runtime_error("a log failed during the benchmark");
    }
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3.0;
  std::string dir;
  if (const char* env = std::getenv("RACKGATE_TESTDATA_DIR")) {
    dir = (fs::path(env) / "eventlogs").string();
  }
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else if (argv[i][0] != '-') {
      dir = argv[i];
    } else {
      std::printf("Usage: eventlog-replay [DIR] [--seconds S]\n"
                  "MB/s of ParseEventLog+Replay over DIR/*.bin (default\n"
                  "$RACKGATE_TESTDATA_DIR/eventlogs) against one SHA-256 pass over the\n"
                  "same bytes, interleaved in rounds; the best round of each is compared.\n");
      return std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "eventlog-replay: no log directory (pass DIR or set RACKGATE_TESTDATA_DIR)\n");
    return 2;
  }
  size_t events = 0;
  const std::vector<Bytes> logs = LoadLogs(dir, &events);
  size_t bytes = 0;
  for (const Bytes& l : logs) bytes += l.size();
  if (logs.empty()) {
    std::fprintf(stderr, "eventlog-replay: no .bin logs in %s\n", dir.c_str());
    return 2;
  }

  EVP_MD* sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);  // fetched once, as Replay's are
  if (sha256 == nullptr) return 1;
  auto ceiling = [&](const Bytes& log) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    return EVP_Digest(log.data(), log.size(), out, &n, sha256, nullptr) == 1;
  };
  auto ours = [](const Bytes& log) {
    auto parsed = rackgate::attest::ParseEventLog(log);
    return parsed.ok() && rackgate::attest::Replay(*parsed).ok();
  };
  auto with_facts = [](const Bytes& log) {
    auto parsed = rackgate::attest::ParseEventLog(log);
    if (!parsed.ok() || !rackgate::attest::Replay(*parsed).ok()) return false;
    (void)rackgate::attest::ExtractBootFacts(*parsed);
    return true;
  };

  // Calibrate a round of our side to ~50 ms, then interleave.
  const double probe = Time(5, logs, ours) / 5;
  const int reps = std::max(1, static_cast<int>(0.05 / probe));
  const int rounds = std::max(4, static_cast<int>(seconds / 0.15));
  double best_ours = 1e30, best_ceiling = 1e30, best_facts = 1e30;
  for (int r = 0; r < rounds; ++r) {
    best_ceiling = std::min(best_ceiling, Time(reps, logs, ceiling));
    best_ours = std::min(best_ours, Time(reps, logs, ours));
    best_facts = std::min(best_facts, Time(reps, logs, with_facts));
  }
  EVP_MD_free(sha256);

  const double mb = static_cast<double>(bytes) * reps / 1e6;
  std::printf("logs=%zu bytes=%zu events=%zu rounds=%d passes_per_round=%d\n", logs.size(), bytes,
              events, rounds, reps);
  std::printf("ceiling: one SHA-256 pass over each log's bytes (one EVP_Digest per log, same "
              "sizes); replay hashes each event digest once per bank\n");
  std::printf("info: parse+replay+boot facts rate=%.1f MB/s\n", mb / best_facts);
  std::printf("eventlog-replay: rate=%.1f MB/s ceiling=%.1f MB/s ratio=%.3f\n", mb / best_ours,
              mb / best_ceiling, best_ceiling / best_ours);
  return 0;
}
