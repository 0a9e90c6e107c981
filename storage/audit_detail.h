// An audit row's detail, built field by field: the one builder of the
// detail JSON storage and the core services write (docs/audit.md).
#ifndef RACKGATE_STORAGE_AUDIT_DETAIL_H_
#define RACKGATE_STORAGE_AUDIT_DETAIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace rackgate::storage {

// The fields of one audit row's detail object: text, integer, boolean, null,
// a list of texts or a nested object. Setting a key again replaces its
// value. Never put a secret in it: the audit log is read by operators and
// kept forever.
class AuditDetail {
 public:
  AuditDetail& Text(std::string key, std::string value);
  AuditDetail& Int(std::string key, int64_t value);
  AuditDetail& Bool(std::string key, bool value);
  AuditDetail& Null(std::string key);
  AuditDetail& Texts(std::string key, std::vector<std::string> values);
  AuditDetail& Object(std::string key, AuditDetail value);

  // The text set for `key`; null when the key holds no text.
  const std::string* FindText(std::string_view key) const;

  // Compact JSON. SECURITY: the hash chain covers these bytes, so they
  // must never change for the same fields: the keys are written in byte
  // order whatever the order of the calls (nlohmann::json's object, which
  // every audit row has been written with), invalid UTF-8 is replaced by
  // U+FFFD rather than thrown on.
  std::string Json() const;

  using Value = std::variant<std::string, int64_t, bool, std::nullptr_t, std::vector<std::string>,
                             std::shared_ptr<const AuditDetail>>;
  struct Field {
    std::string key;
    Value value;
  };
  // In the order they were set (a key set again appears again).
  const std::vector<Field>& fields() const { return fields_; }

 private:
  AuditDetail& Set(std::string key, Value value);
  std::vector<Field> fields_;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_AUDIT_DETAIL_H_
