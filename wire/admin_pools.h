// The admin API's pool bodies (docs/operations.md, docs/ignition.md) as
// typed values with an encoder and a decoder: PUT /v1/admin/pools/{name},
// the pool it answers (and GET /v1/admin/pools[/{name}] lists), and
// POST /v1/admin/pools/{name}/token/rotate. rackgated and rackgatectl both
// go through these. JSON values the appliance keeps as documents (settings,
// boot policy, Ignition templates) travel as their compact JSON text.
#ifndef RACKGATE_WIRE_ADMIN_POOLS_H_
#define RACKGATE_WIRE_ADMIN_POOLS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// How the decoders fail: kInvalidArgument, reason bad_json (not a JSON
// object, or nested deeper than kMaxAdminJsonDepth) or field_invalid (a
// wrong type), the message naming the field. Requests keep to the fields
// they name (others are ignored, as the appliance always did); answers
// ignore unknown fields.
inline constexpr size_t kMaxAdminJsonDepth = 64;

// One template of a pool put: "public" or "attested" (any other name is
// carried as given: the appliance refuses it, template_unknown), and its
// config's JSON text, nullopt to remove the template.
struct PoolTemplateText {
  std::string which;
  std::optional<std::string> config_json;
  bool operator==(const PoolTemplateText&) const = default;
};

// PUT /v1/admin/pools/{name}: every field optional; an absent field keeps
// the pool's.
struct PoolPutRequest {
  std::optional<std::string> settings_json;  // a JSON object's text
  std::optional<bool> token_required;
  bool boot_policy_given = false;
  std::optional<std::string> boot_policy_json;  // with boot_policy_given: nullopt clears it
  std::vector<PoolTemplateText> templates;
  bool operator==(const PoolPutRequest&) const = default;
};
std::string EncodePoolPutRequest(const PoolPutRequest& r);
Result<PoolPutRequest> DecodePoolPutRequest(std::string_view body);

// A provisioning token as a pool shows it: by age, never by value or hash.
struct PoolTokenView {
  int64_t created_at = 0;
  bool current = false;
  std::optional<int64_t> valid_until;  // a previous token's end of grace
  bool operator==(const PoolTokenView&) const = default;
};

// A pool as the admin API answers it.
struct PoolView {
  std::string name;
  std::string settings_json = "{}";
  bool token_required = false;
  std::string boot_policy_mode;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  std::optional<std::string> boot_policy_json;  // as shown (core::PolicyForDisplay)
  std::optional<std::string> public_template_json;
  std::optional<std::string> attested_template_json;
  std::vector<PoolTokenView> provisioning_tokens;
  // Only in the answer of the put that made the pool's first token: the
  // token itself, shown once.
  std::optional<std::string> provisioning_token;
  bool operator==(const PoolView&) const = default;
};
std::string EncodePoolView(const PoolView& p);
Result<PoolView> DecodePoolView(std::string_view body);

// GET /v1/admin/pools: {"pools": [...]}.
std::string EncodePoolList(const std::vector<PoolView>& pools);
Result<std::vector<PoolView>> DecodePoolList(std::string_view body);

// POST /v1/admin/pools/{name}/token/rotate. The grace period is required
// (field_missing when absent, field_invalid when not an integer); its range
// is the core's to check.
struct TokenRotateRequest {
  int64_t grace_seconds = 0;
  bool operator==(const TokenRotateRequest&) const = default;
};
std::string EncodeTokenRotateRequest(const TokenRotateRequest& r);
Result<TokenRotateRequest> DecodeTokenRotateRequest(std::string_view body);

struct TokenRotation {
  std::string pool;
  std::string provisioning_token;  // "" is left out (a copy that must not show it)
  std::optional<int64_t> previous_valid_until;  // absent when the grace was 0
  bool operator==(const TokenRotation&) const = default;
};
std::string EncodeTokenRotation(const TokenRotation& t);
Result<TokenRotation> DecodeTokenRotation(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_POOLS_H_
