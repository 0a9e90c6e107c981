// The HTTP seam's values: header lookup, response helpers and the router.
#include "daemon/http.h"

#include <strings.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "wire/refusal.h"

namespace rackgate::daemon {

namespace {

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool IsParam(const std::string& segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

// "/a/b" -> {"a", "b"}; "/" -> {""}. REQUIRES: path starts with '/'.
std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (true) {
    const size_t slash = path.find('/', start);
    if (slash == std::string::npos) {
      out.push_back(path.substr(start));
      return out;
    }
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
}

std::string Join(const std::vector<std::string>& segments) {
  std::string out;
  for (const auto& s : segments) out += "/" + s;
  return out;
}

bool Matches(const std::vector<std::string>& pattern, const std::vector<std::string>& path) {
  if (pattern.size() != path.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (IsParam(pattern[i])) {
      if (path[i].empty()) return false;
    } else if (pattern[i] != path[i]) {
      return false;
    }
  }
  return true;
}

// True when pattern a is more specific than b: a literal where b has a
// parameter, at the first position where they differ in kind.
bool MoreSpecific(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const bool pa = IsParam(a[i]);
    const bool pb = IsParam(b[i]);
    if (pa != pb) return !pa;
  }
  return false;
}

}  // namespace

bool HeaderLess::operator()(const std::string& a, const std::string& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return AsciiLower(x) < AsciiLower(y);
  });
}

std::optional<std::string> Request::Header(const std::string& name) const {
  auto it = headers.find(name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Request::BearerToken() const {
  auto h = Header("Authorization");
  if (!h || h->size() <= 7 || strncasecmp(h->c_str(), "Bearer ", 7) != 0) return std::nullopt;
  return h->substr(7);
}

std::optional<std::string> Request::OptionalPathParam(const std::string& name) const {
  auto it = path_params.find(name);
  if (it == path_params.end()) return std::nullopt;
  return it->second;
}

Response Response::Error(int status, const std::string& reason, const std::string& message,
                         std::optional<int> retry_after_seconds) {
  Response r = Json(status, wire::EncodeRefusal({reason, message}));
  r.reason = reason;
  if (retry_after_seconds.has_value()) {
    r.headers.emplace_back("Retry-After", std::to_string(*retry_after_seconds));
  }
  return r;
}

Response Response::Json(int status, std::string json_text) {
  Response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(json_text);
  return r;
}

Response Response::Text(int status, std::string text, std::string content_type) {
  Response r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(text);
  return r;
}

Response Response::Shared(int status, std::shared_ptr<const std::string> bytes, std::string content_type) {
  Response r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.shared_body = std::move(bytes);
  return r;
}

void Router::Add(const std::string& method, const std::string& pattern, Handler handler) {
  if (method.empty() || pattern.empty() || pattern.front() != '/') {
    throw std::invalid_argument("bad route: " + method + " " + pattern);
  }
  std::vector<std::string> segments = Split(pattern);
  std::set<std::string> names;
  for (const auto& s : segments) {
    if (!IsParam(s)) {
      if (s.find_first_of("{}") != std::string::npos) {
        throw std::invalid_argument("bad route segment in " + pattern);
      }
      continue;
    }
    const std::string name = s.substr(1, s.size() - 2);
    if (name.empty() || name.find_first_of("{}") != std::string::npos ||
        !names.insert(name).second) {
      throw std::invalid_argument("bad or repeated parameter in " + pattern);
    }
  }
  for (const auto& r : routes_) {
    if (r.method == method && r.segments == segments) {
      throw std::invalid_argument("route added twice: " + method + " " + pattern);
    }
  }
  routes_.push_back(Route{method, std::move(segments), std::move(handler)});
}

Response Router::Dispatch(Request request) const { return Dispatch(std::move(request), nullptr); }

Response Router::Dispatch(Request request, std::string* route, std::map<std::string, std::string>* params) const {
  if (route != nullptr) *route = "unmatched";
  if (params != nullptr) params->clear();
  if (request.path.empty() || request.path.front() != '/') {
    return Response::Error(404, "not_found", "no such resource");
  }
  const std::vector<std::string> path = Split(request.path);

  // The most specific pattern that matches the path decides the resource.
  const std::vector<std::string>* best = nullptr;
  for (const auto& r : routes_) {
    if (!Matches(r.segments, path)) continue;
    if (best == nullptr || MoreSpecific(r.segments, *best)) best = &r.segments;
  }
  if (best == nullptr) return Response::Error(404, "not_found", "no such resource");
  // SECURITY: the one place a path's segments become parameters, so a
  // handler and the refusal log see the same values.
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& s = (*best)[i];
    if (IsParam(s)) request.path_params[s.substr(1, s.size() - 2)] = path[i];
  }
  if (params != nullptr) *params = request.path_params;

  const Route* exact = nullptr;
  const Route* get = nullptr;
  std::set<std::string> allow;
  for (const auto& r : routes_) {
    if (r.segments != *best) continue;
    allow.insert(r.method);
    if (r.method == "GET") {
      allow.insert("HEAD");
      get = &r;
    }
    if (r.method == request.method) exact = &r;
  }
  const Route* chosen = exact;
  if (chosen == nullptr && request.method == "HEAD") chosen = get;
  if (chosen == nullptr) {
    if (route != nullptr) *route = Join(*best);
    Response r = Response::Error(405, "method_not_allowed", "method not allowed");
    std::string value;
    for (const auto& m : allow) value += (value.empty() ? "" : ", ") + m;
    r.headers.emplace_back("Allow", value);
    return r;
  }

  if (route != nullptr) *route = chosen->method + " " + Join(chosen->segments);
  return chosen->handler(request);
}

}  // namespace rackgate::daemon
