// Boot policies and TOFU values parsed once: the stored JSON text of a
// machine's (or its pool's) policy and of its recorded TOFU PCR values is
// parsed on first use and kept by the SHA-256 of the text, so a rack that
// attests again does not re-parse the same policy on every challenge and
// evidence. A changed text is a new key; the old entry is simply unused.
#ifndef RACKGATE_CORE_POLICY_CACHE_H_
#define RACKGATE_CORE_POLICY_CACHE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "attest/boot_policy.h"
#include "base/status.h"

namespace rackgate::core {

class PolicyCache {
 public:
  // The policy the text states; nullptr for an empty text, "null" or "{}"
  // (no policy). The parser's Status (policy_malformed, ...) when the text
  // is unusable; a failure is not cached. Thread-safe.
  Result<std::shared_ptr<const attest::BootPolicy>> Policy(const std::string& text);
  // Recorded TOFU values ({"pcrs": {...}}); nullptr for an empty text or one
  // that does not parse (as before: an unusable record pins nothing).
  std::shared_ptr<const attest::PcrValues> TofuValues(const std::string& text);

 private:
  // Bounded: a fleet has few distinct policies, but every machine has its
  // own TOFU values; past the bound a map starts over rather than track age.
  static constexpr size_t kMaxEntries = 100000;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const attest::BootPolicy>> policies_;  // guarded by mu_
  std::map<std::string, std::shared_ptr<const attest::PcrValues>> tofu_;       // guarded by mu_
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_POLICY_CACHE_H_
