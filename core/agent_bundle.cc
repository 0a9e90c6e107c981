// The agent bundle: one bounded read per change of the file, its digest.
#include "core/agent_bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>
#include <span>
#include <utility>

#include "base/hex.h"
#include "base/ossl.h"
#include "core/secrets.h"

namespace rackgate::core {

namespace {

struct Fd {
  int fd = -1;
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status Unavailable(std::string message) { return Status::IoError("agent_bundle_unavailable", std::move(message)); }

int64_t Ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

// What the file must be to be served at all.
Status Servable(const std::string& path, const struct stat& st, size_t max_bytes) {
  if (!S_ISREG(st.st_mode)) return Unavailable(path + " is not a regular file");
  if (st.st_size <= 0) return Unavailable("the agent bundle " + path + " is empty");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Unavailable("the agent bundle " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  return Status::Ok();
}

// Reads `fd` to its end, bounded by max_bytes, handing each piece to
// `take`. An error message, or "" when the whole file was read.
template <typename Take>
std::string ReadPieces(int fd, const std::string& path, size_t max_bytes, Take take) {
  char buf[64 * 1024];
  size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "the agent bundle " + path + " cannot be read: " + std::strerror(errno);
    if (n == 0) return "";
    // Bounded whatever fstat said: the file may grow while it is read.
    if (static_cast<size_t>(n) > max_bytes - total) {
      return "the agent bundle " + path + " is larger than " + std::to_string(max_bytes) + " bytes";
    }
    total += static_cast<size_t>(n);
    take(buf, static_cast<size_t>(n));
  }
}

}  // namespace

AgentBundle::AgentBundle(std::string path, size_t max_bytes, std::function<int64_t()> wall_clock_ns)
    : path_(std::move(path)), max_bytes_(max_bytes), wall_clock_ns_(std::move(wall_clock_ns)) {}

int64_t AgentBundle::NowNs() const {
  if (wall_clock_ns_) return wall_clock_ns_();
  struct timespec t {};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return Ns(t);
}

uint64_t AgentBundle::Reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_;
}

Result<AgentBundleView> AgentBundle::Get() {
  if (path_.empty()) {
    return Status::NotFound("agent_bundle_not_configured", "this appliance serves no agent bundle (agent_bundle is \"\")");
  }
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return Unavailable("the agent bundle " + path_ + " is not installed: " + std::strerror(errno));
  }
  if (Status s = Servable(path_, st, max_bytes_); !s.ok()) return s;
  auto identity = [](const struct stat& s) {
    return Identity{static_cast<uint64_t>(s.st_dev), static_cast<uint64_t>(s.st_ino),
                    static_cast<uint64_t>(s.st_size), Ns(s.st_mtim), Ns(s.st_ctim)};
  };
  // One reader at a time: a boot storm after an upgrade reads the new file
  // once, the others wait for it and share it.
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_.bytes != nullptr && !cached_racy_ && cached_id_ == identity(st)) return cached_;

  // The identity cached is the one of the file descriptor read (fstat), so
  // a rename between the stat above and the open below cannot pair one
  // file's bytes with another's identity.
  Fd f;
  f.fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return Unavailable("the agent bundle " + path_ + " cannot be read: " + std::strerror(errno));
  struct stat opened {};
  if (::fstat(f.fd, &opened) != 0) {
    return Unavailable("the agent bundle " + path_ + " cannot be read: " + std::strerror(errno));
  }
  if (Status s = Servable(path_, opened, max_bytes_); !s.ok()) return s;
  const Identity id = identity(opened);
  // SECURITY (stale bytes): a write that this read does not see sets the
  // ctime at or after `started`; with coarse timestamps (a kernel tick, or a
  // filesystem's granularity) it can still carry the ctime fstat just gave.
  // Only a read that started well after the ctime proves that a later
  // change moves the ctime; a read closer than that is verified again on
  // the next call (git's "racily clean" entries, the same rule).
  const int64_t started = NowNs();
  if (cached_.bytes != nullptr) {
    // Verified by streaming it through SHA-256 first: the same bytes keep
    // the buffer in use, and a verification allocates nothing (a copy per
    // racy call, freed at once, stayed in malloc's per-thread arenas: up to
    // one bundle per handler thread).
    ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
    if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
    size_t total = 0;
    std::string error = ReadPieces(f.fd, path_, max_bytes_, [&](const char* p, size_t n) {
      EVP_DigestUpdate(ctx.get(), p, n);
      total += n;
    });
    if (!error.empty()) return Unavailable(std::move(error));
    if (total == 0) return Unavailable("the agent bundle " + path_ + " is empty");
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    EVP_DigestFinal_ex(ctx.get(), md, &md_len);
    ++reads_;
    if (hex::Encode(std::span<const uint8_t>(md, md_len)) == cached_.sha256_hex) {
      cached_id_ = id;
      cached_racy_ = started - id.ctime_ns < kAgentBundleRacyWindowNs;
      return cached_;
    }
    if (::lseek(f.fd, 0, SEEK_SET) != 0) {
      return Unavailable("the agent bundle " + path_ + " cannot be read: " + std::strerror(errno));
    }
  }
  std::string data;
  data.reserve(static_cast<size_t>(opened.st_size));
  std::string error = ReadPieces(f.fd, path_, max_bytes_, [&](const char* p, size_t n) { data.append(p, n); });
  if (!error.empty()) return Unavailable(std::move(error));
  if (data.empty()) return Unavailable("the agent bundle " + path_ + " is empty");
  ++reads_;
  // The digest is of the bytes held, whatever the file became meanwhile.
  std::string digest = Sha256Hex(data);
  cached_ = AgentBundleView{std::make_shared<const std::string>(std::move(data)), std::move(digest)};
  cached_id_ = id;
  cached_racy_ = started - id.ctime_ns < kAgentBundleRacyWindowNs;
  return cached_;
}

}  // namespace rackgate::core
