// libFuzzer target: Ignition templates (core/ignition.h ParseTemplate), the
// JSON an operator uploads, parsed as both a public and an attested template;
// a template that parses is rendered with a value for every placeholder,
// serialized and converted to every supported spec version.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/ignition.h"

namespace {

void Exercise(std::string_view text, rackgate::core::ignition::TemplateKind kind) {
  using namespace rackgate::core::ignition;  // NOLINT
  rackgate::Result<Template> t = ParseTemplate(text, kind);
  if (!t.ok()) return;
  Values values;
  for (const std::string& name : t->placeholders) values.values[name] = "v-" + name;
  rackgate::Result<nlohmann::json> rendered = Render(*t, values);
  if (!rendered.ok()) return;
  (void)Serialize(*rendered);
  (void)Merge(*rendered, *rendered);
  for (int minor = kOldestSpec.minor; minor <= kNewestSpec.minor; ++minor) {
    (void)ConvertToVersion(*rendered, SpecVersion{3, minor, 0});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using rackgate::core::ignition::TemplateKind;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Exercise(text, TemplateKind::kPublic);
  Exercise(text, TemplateKind::kAttested);
  return 0;
}
