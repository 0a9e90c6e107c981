// The Accept header (RFC 9110 §12.5.1, §5.6): parsing, and choosing the spec version.
#include "core/ignition.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "core/ignition/internal.h"

namespace rackgate::core::ignition {

using nlohmann::json;

namespace {

Status AcceptMalformed(const std::string& why) {
  return Status::InvalidArgument("accept_malformed", "Accept header: " + why);
}

bool IsTchar(char c) {
  if (IsAsciiAlnum(c)) return true;
  for (char t : std::string_view("!#$%&'*+-.^_`|~")) {
    if (c == t) return true;
  }
  return false;
}

bool IsOws(char c) { return c == ' ' || c == '\t'; }

// A token at *i, advancing past it; empty when there is none.
std::string_view ReadToken(std::string_view s, size_t* i) {
  size_t start = *i;
  while (*i < s.size() && IsTchar(s[*i])) ++*i;
  return s.substr(start, *i - start);
}

// A quoted-string at *i (which is at the opening quote), unescaped into *out.
bool ReadQuotedString(std::string_view s, size_t* i, std::string* out) {
  ++*i;
  while (*i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[*i]);
    if (c == '"') {
      ++*i;
      return true;
    }
    if (c == '\\') {
      if (s.size() - *i < 2) return false;
      unsigned char e = static_cast<unsigned char>(s[*i + 1]);
      if (!(e == '\t' || (e >= 0x20 && e != 0x7f))) return false;
      out->push_back(static_cast<char>(e));
      *i += 2;
      continue;
    }
    // qdtext: HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
    if (!(c == '\t' || (c >= 0x20 && c != 0x7f))) return false;
    out->push_back(static_cast<char>(c));
    ++*i;
  }
  return false;
}

// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths.
std::optional<int> ParseQvalue(std::string_view v) {
  if (v.empty() || (v[0] != '0' && v[0] != '1')) return std::nullopt;
  int q = (v[0] - '0') * 1000;
  if (v.size() == 1) return q;
  if (v[1] != '.' || v.size() > 5) return std::nullopt;
  int scale = 100;
  for (char c : v.substr(2)) {
    if (c < '0' || c > '9') return std::nullopt;
    q += (c - '0') * scale;
    scale /= 10;
  }
  if (q > 1000) return std::nullopt;
  return q;
}

struct MediaRange {
  std::string type;                    // lower case
  std::string subtype;                 // lower case
  std::optional<std::string> version;  // the `version` parameter, unquoted
  bool version_repeated = false;       // such a range matches nothing
  int q = 1000;                        // thousandths
};

Result<std::vector<MediaRange>> ParseAccept(std::string_view h) {
  if (h.size() > kMaxAcceptBytes) return AcceptMalformed("longer than 8 KiB");
  std::vector<MediaRange> out;
  const size_t n = h.size();
  size_t i = 0;
  while (true) {
    // Empty list elements are allowed (RFC 9110 §5.6.1.2).
    while (i < n && (IsOws(h[i]) || h[i] == ',')) ++i;
    if (i == n) break;
    if (out.size() == kMaxAcceptRanges) return AcceptMalformed("more than 64 media ranges");
    const size_t start = i;
    std::string_view type = ReadToken(h, &i);
    if (type.empty() || i == n || h[i] != '/') {
      return AcceptMalformed("expected type/subtype at offset " + std::to_string(start));
    }
    ++i;
    std::string_view subtype = ReadToken(h, &i);
    if (subtype.empty() || (type == "*" && subtype != "*")) {
      return AcceptMalformed("bad media range at offset " + std::to_string(start));
    }
    MediaRange r;
    r.type = AsciiLower(type);
    r.subtype = AsciiLower(subtype);
    bool weighted = false;
    int versions = 0;
    while (true) {
      size_t j = i;
      while (j < n && IsOws(h[j])) ++j;
      if (j == n || h[j] == ',') {
        i = j;
        break;
      }
      if (h[j] != ';')
        return AcceptMalformed("unexpected character at offset " + std::to_string(j));
      i = j + 1;
      while (i < n && IsOws(h[i])) ++i;
      if (i == n || h[i] == ',' || h[i] == ';') continue;  // `;` with no parameter
      const size_t param_start = i;
      std::string_view name = ReadToken(h, &i);
      if (name.empty() || i == n || h[i] != '=') {
        return AcceptMalformed("bad parameter at offset " + std::to_string(param_start));
      }
      ++i;
      std::string value;
      bool quoted = false;
      if (i < n && h[i] == '"') {
        if (!ReadQuotedString(h, &i, &value)) {
          return AcceptMalformed("bad quoted string at offset " + std::to_string(param_start));
        }
        quoted = true;
      } else {
        std::string_view token = ReadToken(h, &i);
        if (token.empty()) {
          return AcceptMalformed("bad parameter value at offset " + std::to_string(param_start));
        }
        value = token;
      }
      // The first q separates the range's parameters from extension
      // parameters, which we ignore (RFC 9110 §12.4.2).
      if (weighted) continue;
      std::string lname = AsciiLower(name);
      if (lname == "q") {
        std::optional<int> q = quoted ? std::nullopt : ParseQvalue(value);
        if (!q) return AcceptMalformed("bad q value at offset " + std::to_string(param_start));
        r.q = *q;
        weighted = true;
      } else if (lname == "version") {
        ++versions;
        r.version = std::move(value);
      }
    }
    r.version_repeated = versions > 1;
    out.push_back(std::move(r));
  }
  return out;
}

constexpr std::string_view kIgnitionSubtype = "vnd.coreos.ignition+json";

// How specifically `r` matches the config in spec version x (higher is more
// specific), or -1 when it does not match. Ranges without a usable version
// only match the config's own version. application/json is ranked with the
// ranges that name no version: it is the same bytes, so a client that refuses
// "version=3.3.0" with q=0 is not sent 3.3.0 because it also takes JSON.
int Match(const MediaRange& r, SpecVersion x, SpecVersion config) {
  const bool own = x == config;
  if (r.type == "*") return own ? 0 : -1;
  if (r.type != "application") return -1;
  if (r.subtype == "*") return own ? 1 : -1;
  if (r.subtype == "json") return own ? 2 : -1;
  if (r.subtype != kIgnitionSubtype || r.version_repeated) return -1;
  if (!r.version) return own ? 3 : -1;
  std::optional<VersionText> v = ParseVersionText(*r.version, /*allow_suffix=*/true);
  if (!v) return -1;
  if (!v->prerelease && v->version == x) return 5;
  std::optional<SpecVersion> mapped = NewestNotAbove(*v);
  return mapped && *mapped == x ? 4 : -1;
}

// The q of the most specific matching range (the highest q among equally
// specific ones), or nullopt when none matches.
template <typename Matcher>
std::optional<int> QualityOf(const std::vector<MediaRange>& ranges, Matcher match) {
  int best = -1;
  int q = 0;
  for (const MediaRange& r : ranges) {
    int m = match(r);
    if (m < 0) continue;
    if (m > best) {
      best = m;
      q = r.q;
    } else if (m == best) {
      q = std::max(q, r.q);
    }
  }
  if (best < 0) return std::nullopt;
  return q;
}

}  // namespace

Result<SpecVersion> Negotiate(std::optional<std::string_view> accept_header,
                              SpecVersion config_version) {
  if (!accept_header) return config_version;
  Result<std::vector<MediaRange>> ranges = ParseAccept(*accept_header);
  if (!ranges.ok()) return ranges.status();
  if (ranges->empty()) return config_version;

  std::optional<SpecVersion> best;
  int best_q = 0;
  auto consider = [&](SpecVersion v, std::optional<int> q) {
    if (!q || *q == 0) return;
    if (!best || *q > best_q || (*q == best_q && v > *best)) {
      best = v;
      best_q = *q;
    }
  };
  std::vector<SpecVersion> versions(std::begin(kSupported), std::end(kSupported));
  if (!IsSupported(config_version)) versions.push_back(config_version);
  for (SpecVersion x : versions) {
    consider(x,
             QualityOf(*ranges, [&](const MediaRange& r) { return Match(r, x, config_version); }));
  }
  if (!best) {
    return Status::Unsupported("ignition_version_unsupported",
                               "the client accepts no Ignition spec version rackgate serves "
                               "(3.0.0 to 3.3.0)");
  }
  return *best;
}

}  // namespace rackgate::core::ignition
