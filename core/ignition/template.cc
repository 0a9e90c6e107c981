// Parsing an operator's template: bounded JSON, then every check, in order.
#include "core/ignition.h"

#include <set>
#include <stdexcept>
#include <vector>

#include "base/json_depth.h"
#include "core/ignition/internal.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

struct ParseRefusal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses `text`, refusing nesting deeper than kMaxTemplateDepth (measured on
// the text before parsing, base/json_depth.h, so the depth is never built)
// and duplicate keys (nlohmann keeps the last one silently, so a second
// "storage" would hide the first).
Result<json> ParseBounded(std::string_view text) {
  if (JsonDepth(text) > static_cast<size_t>(kMaxTemplateDepth)) {
    return Status::InvalidArgument("template_invalid", "nested deeper than " + std::to_string(kMaxTemplateDepth));
  }
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto callback = [&keys](int, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second) {
          throw ParseRefusal("duplicate key " + parsed.dump());
        }
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  // Exceptions rather than allow_exceptions=false: the parse error's byte
  // offset is what lets the operator find the fault in a large template.
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    return Status::InvalidArgument("template_invalid",
                                   "not JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  } catch (const json::out_of_range& e) {
    // A number too large for a double (406): found by ignition_template_fuzz.
    return Status::InvalidArgument("template_invalid", std::string("not JSON: ") + e.what());
  } catch (const ParseRefusal& e) {
    return Status::InvalidArgument("template_invalid", e.what());
  }
}

}  // namespace

Result<Template> ParseTemplate(std::string_view json_text, TemplateKind kind) {
  if (json_text.size() > kMaxTemplateBytes) {
    return Status::InvalidArgument("template_invalid", "larger than 4 MiB");
  }
  Result<json> parsed = ParseBounded(json_text);
  if (!parsed.ok()) return parsed.status();
  Template t;
  t.kind = kind;
  t.config = std::move(parsed).value();
  const json& root = t.config;

  Status st = CheckStructure(root, &t.version);
  if (!st.ok()) return st;

  // An Ignition that reads exactly the declared version would refuse a field
  // from a later one; so would a conversion down to it.
  if (std::optional<TooNew> too_new = FindNewerThan(root, t.version)) {
    return Invalid(too_new->pointer, "needs spec " + FormatSpecVersion(too_new->since) +
                                         " but the template declares " +
                                         FormatSpecVersion(t.version));
  }

  Result<std::vector<std::string>> names = CheckPlaceholders(kind, &t.config);
  if (!names.ok()) return names.status();
  t.placeholders = std::move(names).value();

  // SECURITY: the public config goes to machines that have proven nothing;
  // what it carries is as good as published.
  if (kind == TemplateKind::kPublic) {
    st = CheckNoSecrets(root);
    if (!st.ok()) return st;
  }
  return t;
}

}  // namespace rackgate::core::ignition
