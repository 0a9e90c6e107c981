// Bounded JSON for kube/.
#include "kube/untrusted.h"

namespace rackgate::kube {

std::optional<nlohmann::json> ParseJson(std::string_view text) {
  bool too_deep = false;
  // The callback sees every value with its depth as the parser reaches it;
  // refusing there stops a deep document before its tree is built.
  auto bound = [&too_deep](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > static_cast<int>(kMaxJsonDepth)) too_deep = true;
    return !too_deep;
  };
  nlohmann::json doc = nlohmann::json::parse(text.begin(), text.end(), bound, /*allow_exceptions=*/false);
  if (too_deep || doc.is_discarded()) return std::nullopt;
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
