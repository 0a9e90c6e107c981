// An audit row's detail as JSON.
#include "storage/audit_detail.h"

#include <type_traits>
#include <utility>

#include "storage/audit.h"

namespace rackgate::storage {

AuditDetail& AuditDetail::Set(std::string key, Value value) {
  fields_.push_back({std::move(key), std::move(value)});
  return *this;
}

AuditDetail& AuditDetail::Text(std::string key, std::string value) { return Set(std::move(key), std::move(value)); }
AuditDetail& AuditDetail::Int(std::string key, int64_t value) { return Set(std::move(key), value); }
AuditDetail& AuditDetail::Bool(std::string key, bool value) { return Set(std::move(key), value); }
AuditDetail& AuditDetail::Null(std::string key) { return Set(std::move(key), nullptr); }
AuditDetail& AuditDetail::Texts(std::string key, std::vector<std::string> values) {
  return Set(std::move(key), std::move(values));
}
AuditDetail& AuditDetail::Object(std::string key, AuditDetail value) {
  return Set(std::move(key), std::make_shared<const AuditDetail>(std::move(value)));
}

const std::string* AuditDetail::FindText(std::string_view key) const {
  for (auto it = fields_.rbegin(); it != fields_.rend(); ++it) {
    if (it->key == key) return std::get_if<std::string>(&it->value);
  }
  return nullptr;
}

json DetailJson(const AuditDetail& detail) {
  json out = json::object();
  for (const auto& [key, value] : detail.fields()) {
    std::visit(
        [&out, &key = key](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::shared_ptr<const AuditDetail>>) {
            out[key] = DetailJson(*v);
          } else {
            out[key] = v;
          }
        },
        value);
  }
  return out;
}

std::string AuditDetail::Json() const { return Dump(DetailJson(*this)); }

}  // namespace rackgate::storage
