// Pool administration (docs/operations.md, docs/ignition.md): putting a pool
// (settings, token requirement, boot policy and templates, all checked
// before anything is stored, then stored in one transaction), a template put
// or removed on its own, a provisioning token rotated, and the pools as the
// admin API shows them. The service owns the config cache's invalidation
// after each change. The admin API calls these; they decide, the handlers
// only decode and encode.
//
// Thread safety: as the store's and the Ignition service's; no state of its
// own.
#ifndef RACKGATE_CORE_POOL_SERVICE_H_
#define RACKGATE_CORE_POOL_SERVICE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "storage/store.h"
#include "wire/admin_pools.h"

namespace rackgate::core {

class IgnitionService;

// The longest grace a rotated token's predecessor may keep.
inline constexpr int64_t kMaxTokenGraceSeconds = 30 * 86400;

// A pool put: the pool as stored, and whether the put made it.
struct PoolPut {
  wire::PoolView pool;  // with the first provisioning token when this put made it
  bool created = false;
};

class PoolService {
 public:
  using Clock = std::function<int64_t()>;
  // BORROWED: store and ignition outlive the service.
  PoolService(storage::InventoryStore* store, IgnitionService* ignition, Clock clock);

  // PUT /v1/admin/pools/{name}. Refusals, before anything is stored:
  // settings_invalid (the settings), a boot policy parser's reason (the
  // policy), template_unknown (a template named other than public or
  // attested), a template check's reason (kInvalidArgument) or
  // validator_failed (kIoError: the validator could not run); all
  // kInvalidArgument otherwise, their message naming the part. Then the
  // store's refusals. A pool that requires a token and has none gets one,
  // shown only in this answer.
  Result<PoolPut> Put(const std::string& name, const wire::PoolPutRequest& request, const storage::Actor& actor);

  // PUT (text) or DELETE (nullopt) /v1/admin/pools/{name}/templates/{which}:
  // template_unknown (kNotFound: no such template) for a `which` other than
  // public or attested; the template check's refusals as Put's; the store's
  // (pool_unknown).
  Result<wire::PoolView> SetTemplate(const std::string& pool, const std::string& which,
                                     const std::optional<std::string_view>& text, const storage::Actor& actor);

  // A new provisioning token; the previous one stays valid `grace_seconds`
  // (0 to kMaxTokenGraceSeconds, else field_invalid). The store's refusals
  // (pool_unknown, or a pool that takes no token).
  Result<wire::TokenRotation> RotateToken(const std::string& pool, int64_t grace_seconds,
                                          const storage::Actor& actor);

  // Every pool, or only `only` (pool_unknown, kNotFound, when there is no
  // such pool).
  Result<std::vector<wire::PoolView>> List(const std::optional<std::string>& only);

 private:
  // The pool as shown, with its valid tokens (by age).
  wire::PoolView View(const storage::Pool& pool);

  storage::InventoryStore* store_;
  IgnitionService* ignition_;
  Clock clock_;
};

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_POOL_SERVICE_H_
