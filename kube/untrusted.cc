// Bounded JSON for kube/.
#include "kube/untrusted.h"

#include "base/json_depth.h"

namespace rackgate::kube {

std::optional<nlohmann::json> ParseJson(std::string_view text) {
  // Measured on the text first, so a deep document never builds its tree.
  if (JsonDepth(text) > kMaxJsonDepth) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return std::nullopt;
  return doc;
}

std::optional<std::string> StringField(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::string DumpJson(const nlohmann::json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rackgate::kube
#include "base/text.h"
