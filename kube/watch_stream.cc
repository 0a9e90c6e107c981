// Splitting and reading a watch stream.
#include "kube/watch_stream.h"

#include <optional>

#include "base/text.h"
#include "kube/api_status.h"
#include "kube/csr_json.h"
#include "kube/untrusted.h"

namespace rackgate::kube {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxResourceVersionChars = 64;

Status BadEvent(std::string_view why) {
  return Status::Corruption("kube_response_invalid", "a watch event " + std::string(why));
}

// object.metadata.resourceVersion, when it is a short string.
std::string ResourceVersionOf(const json& object) {
  const auto meta = object.find("metadata");
  if (meta == object.end()) return "";
  std::optional<std::string> rv = StringField(*meta, "resourceVersion");
  if (!rv || rv->size() > kMaxResourceVersionChars) return "";
  return *rv;
}

std::optional<WatchEvent::Type> TypeOf(const std::string& type) {
  if (type == "ADDED") return WatchEvent::Type::kAdded;
  if (type == "MODIFIED") return WatchEvent::Type::kModified;
  if (type == "DELETED") return WatchEvent::Type::kDeleted;
  if (type == "BOOKMARK") return WatchEvent::Type::kBookmark;
  if (type == "ERROR") return WatchEvent::Type::kError;
  return std::nullopt;
}

}  // namespace

Status LineSplitter::Feed(std::string_view chunk, const std::function<bool(std::string_view)>& on_line) {
  while (!chunk.empty()) {
    const size_t nl = chunk.find('\n');
    const std::string_view piece = chunk.substr(0, nl);
    // Compare by subtraction: partial_ never exceeds max_line_.
    if (piece.size() > max_line_ - partial_.size()) {
      Status too_large = Status::Corruption("kube_event_too_large", "a watch event is larger than " +
                                                                         std::to_string(max_line_) + " bytes");
      partial_.clear();
      max_line_ = 0;
      return too_large;
    }
    if (nl == std::string_view::npos) {
      partial_.append(piece);
      return Status::Ok();
    }
    chunk.remove_prefix(nl + 1);
    std::string_view line = piece;
    if (!partial_.empty()) {
      partial_.append(piece);
      line = partial_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool go_on = line.empty() || on_line(line);
    partial_.clear();
    if (!go_on) return Status::Ok();
  }
  return Status::Ok();
}

Result<WatchEvent> ParseWatchEvent(std::string_view line) {
  std::optional<json> doc = ParseJson(line);
  if (!doc || !doc->is_object()) return BadEvent("is not a JSON object");
  const std::optional<std::string> type_name = StringField(*doc, "type");
  if (!type_name) return BadEvent("has no type");
  const std::optional<WatchEvent::Type> type = TypeOf(*type_name);
  if (!type) return BadEvent("has an unknown type " + text::PrintableAscii(*type_name, 32));
  const auto object = doc->find("object");
  if (object == doc->end() || !object->is_object()) return BadEvent("has no object");
  WatchEvent ev;
  ev.type = *type;
  if (ev.type == WatchEvent::Type::kError) {
    const auto code = object->find("code");
    if (code != object->end() && code->is_number_integer()) ev.error_code = code->get<int>();
    ev.error_reason = text::PrintableAscii(StringField(*object, "reason").value_or(""), 64);
    ev.error_message = text::PrintableAscii(StringField(*object, "message").value_or(""), 200);
    return ev;
  }
  ev.resource_version = ResourceVersionOf(*object);
  if (ev.type == WatchEvent::Type::kBookmark) {
    if (ev.resource_version.empty()) return BadEvent("(a bookmark) has no resourceVersion");
    return ev;
  }
  Result<Csr> csr = ParseCsr(*object);
  if (csr.ok()) {
    ev.object = std::move(*csr);
  } else {
    ev.object_status = csr.status();
  }
  return ev;
}

bool WatchStream::Feed(std::string_view chunk) {
  if (ended_) return false;
  Status s = splitter_.Feed(chunk, [this](std::string_view line) { return OnLine(line); });
  if (!s.ok()) {
    status_ = std::move(s);
    ended_ = true;
  }
  return !ended_;
}

bool WatchStream::OnLine(std::string_view line) {
  Result<WatchEvent> ev = ParseWatchEvent(line);
  if (!ev.ok()) {
    status_ = ev.status();
    ended_ = true;
    return false;
  }
  ++events_;
  if (ev->type == WatchEvent::Type::kError) {
    // The server ends the watch after an ERROR; a 410 ("Expired", "Gone")
    // means our resourceVersion is too old.
    status_ = FromApiStatus(ev->error_code, ev->error_reason, ev->error_message);
    ended_ = true;
    return false;
  }
  if (!on_event_(*ev)) {
    ended_by_handler_ = true;
    ended_ = true;
    return false;
  }
  return true;
}

}  // namespace rackgate::kube
