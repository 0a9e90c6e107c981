// Placeholders in templates: checking them at upload, substituting them at render.
#include "core/ignition.h"

#include <algorithm>
#include <set>

#include "core/ignition/internal.h"
#include "wire/data_url.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past Unicode are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

// A literal "{{" in a template, spelled as in Go templates.
constexpr std::string_view kLiteralOpen = "{{\"{{\"}}";
constexpr size_t kMaxPlaceholderName = 128;

enum class Scope { kUnknown, kAny, kAttestedOnly };

Scope ScopeOf(std::string_view name) {
  if (name == "pool" || name == "appliance.url" || name == "appliance.urls" || name == "appliance.ca_pem") {
    return Scope::kAny;
  }
  if (name == "hostname" || name == "ek_hash") return Scope::kAttestedOnly;
  constexpr std::string_view kMachine = "machine.";
  if (name.substr(0, kMachine.size()) == kMachine) {
    std::string_view var = name.substr(kMachine.size());
    if (var.empty() || var.size() > 63) return Scope::kUnknown;
    for (char c : var) {
      if (!IsAsciiAlnum(c) && c != '_' && c != '-') return Scope::kUnknown;
    }
    return Scope::kAttestedOnly;
  }
  for (std::string_view a : {"address.InternalIP", "address.ExternalIP", "address.InternalDNS",
                             "address.ExternalDNS", "address.Hostname"}) {
    if (name == a) return Scope::kAttestedOnly;
  }
  return Scope::kUnknown;
}

bool IsNameChar(char c) { return IsAsciiAlnum(c) || c == '.' || c == '_' || c == '-'; }

// Calls on_text for each run of literal text and on_name for each placeholder
// of `s`, in order. Fails (template_invalid, no pointer) on a `{{` that opens
// no well-formed placeholder, or with whatever a callback returns.
template <typename OnText, typename OnName>
Status Tokenize(std::string_view s, OnText on_text, OnName on_name) {
  size_t i = 0;
  while (i < s.size()) {
    size_t open = s.find("{{", i);
    if (open == std::string_view::npos) {
      on_text(s.substr(i));
      break;
    }
    on_text(s.substr(i, open - i));
    if (s.substr(open, kLiteralOpen.size()) == kLiteralOpen) {
      on_text("{{");
      i = open + kLiteralOpen.size();
      continue;
    }
    size_t close = s.find("}}", open + 2);
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("template_invalid",
                                     "'{{' without '}}' at offset " + std::to_string(open));
    }
    std::string_view name = s.substr(open + 2, close - open - 2);
    if (name.empty() || name.size() > kMaxPlaceholderName ||
        !std::all_of(name.begin(), name.end(), IsNameChar)) {
      return Status::InvalidArgument("template_invalid",
                                     "malformed placeholder at offset " + std::to_string(open) +
                                         " (write {{\"{{\"}} for a literal '{{')");
    }
    Status st = on_name(name);
    if (!st.ok()) return st;
    i = close + 2;
  }
  return Status::Ok();
}

// Walks every string value of a template. Without values it collects the
// placeholder names and checks them against the template's kind; with values
// it substitutes them in place and drops rackgate annotations. One walk for
// both, so that rendering substitutes exactly what validation accepted.
class Walker {
 public:
  Walker(TemplateKind kind, const Values* values) : kind_(kind), values_(values) {}

  Status Walk(json* node, const std::string& pointer) {
    if (node->is_string()) return Text(node, pointer);
    if (node->is_array()) {
      for (size_t i = 0; i < node->size(); ++i) {
        Status st = Walk(&(*node)[i], Child(pointer, i));
        if (!st.ok()) return st;
      }
      return Status::Ok();
    }
    if (!node->is_object()) return Status::Ok();
    const bool inline_source =
        IsResource(*node) && wire::IsDataUrl(node->at("source").get_ref<const std::string&>());
    for (auto& [key, value] : node->items()) {
      if (key == "rackgate") continue;  // rackgate's own, holds no placeholders
      Status st = inline_source && key == "source" ? InlineSource(node, Child(pointer, key))
                                                   : Walk(&value, Child(pointer, key));
      if (!st.ok()) return st;
    }
    if (values_ != nullptr) node->erase("rackgate");
    return Status::Ok();
  }

  const std::set<std::string>& names() const { return names_; }

 private:
  // Substitutes (or only checks) the placeholders of `in` into *out;
  // *count is how many there were.
  Status Expand(std::string_view in, const std::string& pointer, std::string* out, int* count) {
    *count = 0;
    Status st = Tokenize(
        in, [&](std::string_view text) { out->append(text); },
        [&](std::string_view name) -> Status {
          ++*count;
          const std::string key(name);
          if (values_ == nullptr) {
            Scope scope = ScopeOf(name);
            if (scope == Scope::kUnknown) {
              return Status::InvalidArgument("template_invalid",
                                             "unknown placeholder {{" + key + "}}");
            }
            // A public config reaches machines that have proven nothing, so
            // it cannot be specialised to one.
            if (scope == Scope::kAttestedOnly && kind_ == TemplateKind::kPublic) {
              return Status::InvalidArgument(
                  "template_invalid",
                  "placeholder {{" + key + "}} is per machine: only for attested templates");
            }
            names_.insert(key);
            return Status::Ok();
          }
          auto it = values_->values.find(key);
          if (it == values_->values.end()) {
            return Status::NotFound("template_value_missing",
                                    "no value for placeholder {{" + key + "}}");
          }
          out->append(it->second);
          return Status::Ok();
        });
    return st.Annotate(Where(pointer));
  }

  Status Text(json* node, const std::string& pointer) {
    std::string out;
    int count = 0;
    Status st = Expand(node->get_ref<const std::string&>(), pointer, &out, &count);
    if (!st.ok() || values_ == nullptr || count == 0) return st;
    // A value that is not UTF-8 cannot be a JSON string; caught here rather
    // than as an exception when the config is serialized.
    if (!IsValidUtf8(out)) {
      return Status::InvalidArgument("template_value_invalid",
                                     Where(pointer) + ": a substituted value is not UTF-8");
    }
    *node = std::move(out);
    return Status::Ok();
  }

  Status InlineSource(json* resource, const std::string& pointer) {
    json& source = resource->at("source");
    Result<wire::DataUrl> url =
        wire::DecodeDataUrl(source.get_ref<const std::string&>(), kMaxTemplateBytes);
    if (!url.ok()) {
      return Status::InvalidArgument("template_invalid",
                                     Where(pointer) + ": " + url.status().message());
    }
    if (url->media_type.find("{{") != std::string::npos) {
      return Status::InvalidArgument(
          "template_invalid", Where(pointer) + ": no placeholders in a data URL's media type");
    }
    if (IsCompressed(*resource)) return Status::Ok();
    std::string content;
    int count = 0;
    Status st = Expand(url->data, pointer, &content, &count);
    if (!st.ok() || count == 0) return st;
    if (values_ == nullptr) {
      if (resource->contains("verification") &&
          HasNonNullKey(resource->at("verification"), "hash")) {
        return Status::InvalidArgument("template_invalid",
                                       Where(pointer) +
                                           ": inline content with placeholders cannot carry a "
                                           "verification hash (it would never match)");
      }
      return Status::Ok();
    }
    url->data = std::move(content);
    source = wire::EncodeDataUrl(*url);
    return Status::Ok();
  }

  TemplateKind kind_;
  const Values* values_;  // BORROWED; nullptr: collect and check only
  std::set<std::string> names_;
};

}  // namespace

Result<std::vector<std::string>> CheckPlaceholders(TemplateKind kind, json* config) {
  Walker walker(kind, /*values=*/nullptr);
  Status st = walker.Walk(config, "");
  if (!st.ok()) return st;
  return std::vector<std::string>(walker.names().begin(), walker.names().end());
}

Result<json> Render(const Template& t, const Values& v) {
  json out = t.config;
  Walker walker(t.kind, &v);
  Status st = walker.Walk(&out, "");
  if (!st.ok()) return st;
  return out;
}

}  // namespace rackgate::core::ignition
