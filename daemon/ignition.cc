// Ignition spec 3.x configs: Accept negotiation, conversion, template
// validation, rendering and merging.
#include "daemon/ignition.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <utility>

#include "wire/codec.h"

namespace rackgate::daemon::ignition {

namespace {

using nlohmann::json;

constexpr SpecVersion kSupported[] = {{3, 0, 0}, {3, 1, 0}, {3, 2, 0}, {3, 3, 0}};

bool IsAsciiAlnum(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (AsciiLower(s[i]) != AsciiLower(prefix[i])) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Versions

// One decimal component: no sign, no leading zero, at most 6 digits (so no
// overflow and no second spelling of the same number).
bool ParseComponent(std::string_view s, int* out) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

struct VersionText {
  SpecVersion version;
  bool prerelease = false;  // "3.4.0-experimental": below 3.4.0, above 3.3.x
};

// "X.Y.Z", or with allow_suffix also "X.Y.Z-suffix" (a semver pre-release of
// [0-9A-Za-z.-], as Ignition spells "3.4.0-experimental").
std::optional<VersionText> ParseVersionText(std::string_view s, bool allow_suffix) {
  VersionText out;
  if (size_t dash = s.find('-'); dash != std::string_view::npos) {
    std::string_view suffix = s.substr(dash + 1);
    if (!allow_suffix || suffix.empty() || suffix.size() > 64) return std::nullopt;
    for (char c : suffix) {
      if (!IsAsciiAlnum(c) && c != '.' && c != '-') return std::nullopt;
    }
    out.prerelease = true;
    s = s.substr(0, dash);
  }
  size_t d1 = s.find('.');
  if (d1 == std::string_view::npos) return std::nullopt;
  size_t d2 = s.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return std::nullopt;
  // The third component cannot hold another '.': ParseComponent refuses it.
  if (!ParseComponent(s.substr(0, d1), &out.version.major) ||
      !ParseComponent(s.substr(d1 + 1, d2 - d1 - 1), &out.version.minor) ||
      !ParseComponent(s.substr(d2 + 1), &out.version.patch)) {
    return std::nullopt;
  }
  return out;
}

// The newest supported version a client reading up to `v` also reads. A
// client is only assumed to read older minors of its own major.
std::optional<SpecVersion> NewestNotAbove(const VersionText& v) {
  if (v.version.major != kNewestSpec.major) return std::nullopt;
  std::optional<SpecVersion> best;
  for (SpecVersion s : kSupported) {  // ascending
    if (v.prerelease ? s < v.version : s <= v.version) best = s;
  }
  return best;
}

// ---------------------------------------------------------------------------
// Accept (RFC 9110 §12.5.1, §5.6)

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

// ---------------------------------------------------------------------------
// JSON pointers (RFC 6901) for messages

std::string Child(const std::string& pointer, std::string_view key) {
  std::string out = pointer + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Child(const std::string& pointer, size_t index) {
  return pointer + "/" + std::to_string(index);
}

std::string Where(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

// ---------------------------------------------------------------------------
// Fields added by 3.x minors
//
// Checked against Ignition's JSON schemas config/v3_{0,1,2,3}/schema/
// ignition.json (coreos/ignition a5d574a8, every property path of each
// version diffed against the previous one) and docs/migrating-configs.md
// ("From Version 3.x.0 to 3.y.0") for changes of allowed values. Notes:
// wipePartitionEntry is already in 3.0.0; boot_device is Butane sugar, not an
// Ignition field; 3.3.0's only other change is the filesystem format "none".

enum class Need {
  kPresent,     // the field exists (with any value, null included)
  kSha256Hash,  // a verification hash of type sha256 (3.1.0)
  kGsSource,    // a gs:// source URL (3.2.0)
  kFormatNone,  // filesystem format "none" (3.3.0)
};

struct Addition {
  SpecVersion since;
  std::string_view path;  // dotted; "name[]" steps into every element of an array
  Need need;
};

constexpr Addition kAdditions[] = {
    {{3, 1, 0}, "ignition.proxy", Need::kPresent},
    {{3, 1, 0}, "ignition.config.merge[].compression", Need::kPresent},
    {{3, 1, 0}, "ignition.config.merge[].httpHeaders", Need::kPresent},
    {{3, 1, 0}, "ignition.config.replace.compression", Need::kPresent},
    {{3, 1, 0}, "ignition.config.replace.httpHeaders", Need::kPresent},
    {{3, 1, 0}, "ignition.security.tls.certificateAuthorities[].compression", Need::kPresent},
    {{3, 1, 0}, "ignition.security.tls.certificateAuthorities[].httpHeaders", Need::kPresent},
    {{3, 1, 0}, "storage.files[].contents.httpHeaders", Need::kPresent},
    {{3, 1, 0}, "storage.files[].append[].httpHeaders", Need::kPresent},
    {{3, 1, 0}, "storage.filesystems[].mountOptions", Need::kPresent},
    {{3, 1, 0}, "ignition.config.merge[].verification.hash", Need::kSha256Hash},
    {{3, 1, 0}, "ignition.config.replace.verification.hash", Need::kSha256Hash},
    {{3, 1, 0},
     "ignition.security.tls.certificateAuthorities[].verification.hash",
     Need::kSha256Hash},
    {{3, 1, 0}, "storage.files[].contents.verification.hash", Need::kSha256Hash},
    {{3, 1, 0}, "storage.files[].append[].verification.hash", Need::kSha256Hash},
    {{3, 2, 0}, "storage.luks", Need::kPresent},
    {{3, 2, 0}, "storage.disks[].partitions[].resize", Need::kPresent},
    {{3, 2, 0}, "passwd.users[].shouldExist", Need::kPresent},
    {{3, 2, 0}, "passwd.groups[].shouldExist", Need::kPresent},
    {{3, 2, 0}, "ignition.config.merge[].source", Need::kGsSource},
    {{3, 2, 0}, "ignition.config.replace.source", Need::kGsSource},
    {{3, 2, 0}, "ignition.security.tls.certificateAuthorities[].source", Need::kGsSource},
    {{3, 2, 0}, "storage.files[].contents.source", Need::kGsSource},
    {{3, 2, 0}, "storage.files[].append[].source", Need::kGsSource},
    {{3, 3, 0}, "kernelArguments", Need::kPresent},
    {{3, 3, 0}, "storage.filesystems[].format", Need::kFormatNone},
};

bool Satisfies(const json& v, Need need) {
  auto starts = [&](std::string_view prefix) {
    return v.is_string() && StartsWithNoCase(v.get_ref<const std::string&>(), prefix);
  };
  switch (need) {
    case Need::kPresent:
      return true;
    case Need::kSha256Hash:
      return starts("sha256-");
    case Need::kGsSource:
      return starts("gs://");
    case Need::kFormatNone:
      return v.is_string() && v.get_ref<const std::string&>() == "none";
  }
  return false;
}

// The pointer of the first value at `path` under `node` that satisfies
// `need`, if any.
std::optional<std::string> FindAt(const json& node, std::string_view path, Need need,
                                  const std::string& pointer) {
  if (!node.is_object()) return std::nullopt;
  size_t dot = path.find('.');
  std::string_view step = path.substr(0, dot);
  std::string_view rest = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  const bool each = step.size() > 2 && step.substr(step.size() - 2) == "[]";
  if (each) step.remove_suffix(2);
  const std::string key(step);
  if (!node.contains(key)) return std::nullopt;
  const json& v = node.at(key);
  const std::string here = Child(pointer, key);
  if (!each) {
    if (rest.empty()) return Satisfies(v, need) ? std::optional(here) : std::nullopt;
    return FindAt(v, rest, need, here);
  }
  if (!v.is_array()) return std::nullopt;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v.at(i);
    std::optional<std::string> hit =
        rest.empty() ? (Satisfies(e, need) ? std::optional(Child(here, i)) : std::nullopt)
                     : FindAt(e, rest, need, Child(here, i));
    if (hit) return hit;
  }
  return std::nullopt;
}

struct TooNew {
  std::string pointer;
  SpecVersion since;
};

std::optional<TooNew> FindNewerThan(const json& config, SpecVersion version) {
  for (const Addition& a : kAdditions) {
    if (a.since <= version) continue;
    if (std::optional<std::string> p = FindAt(config, a.path, a.need, "")) {
      return TooNew{*p, a.since};
    }
  }
  return std::nullopt;
}

std::optional<SpecVersion> ConfigVersion(const json& config) {
  if (!config.is_object() || !config.contains("ignition")) return std::nullopt;
  const json& ign = config.at("ignition");
  if (!ign.is_object() || !ign.contains("version") || !ign.at("version").is_string()) {
    return std::nullopt;
  }
  std::optional<VersionText> v =
      ParseVersionText(ign.at("version").get_ref<const std::string&>(), /*allow_suffix=*/false);
  if (!v) return std::nullopt;
  return v->version;
}

// ---------------------------------------------------------------------------
// data: URLs (RFC 2397)

struct DataUrl {
  std::string header;  // media type and parameters, verbatim, without ";base64"
  bool base64 = false;
  std::string content;  // decoded bytes
};

bool IsDataUrl(std::string_view s) { return StartsWithNoCase(s, "data:"); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// REQUIRES: IsDataUrl(url). On failure, the reason in words.
std::optional<DataUrl> DecodeDataUrl(std::string_view url, std::string* why) {
  std::string_view rest = url.substr(5);
  size_t comma = rest.find(',');
  if (comma == std::string_view::npos) {
    *why = "data URL without a comma";
    return std::nullopt;
  }
  DataUrl out;
  std::string_view header = rest.substr(0, comma);
  std::string_view data = rest.substr(comma + 1);
  constexpr std::string_view kBase64 = ";base64";
  if (header.size() >= kBase64.size() &&
      AsciiLower(header.substr(header.size() - kBase64.size())) == kBase64) {
    out.base64 = true;
    header.remove_suffix(kBase64.size());
  }
  out.header = std::string(header);
  if (out.base64) {
    std::optional<std::vector<uint8_t>> bytes = wire::Base64Decode(data, kMaxTemplateBytes);
    if (!bytes) {
      *why = "data URL is not canonical base64";
      return std::nullopt;
    }
    out.content.assign(bytes->begin(), bytes->end());
    return out;
  }
  out.content.reserve(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != '%') {
      out.content.push_back(data[i]);
      continue;
    }
    int hi = data.size() - i > 2 ? HexValue(data[i + 1]) : -1;
    int lo = hi >= 0 ? HexValue(data[i + 2]) : -1;
    if (lo < 0) {
      *why = "data URL has a bad percent escape at offset " + std::to_string(5 + comma + 1 + i);
      return std::nullopt;
    }
    out.content.push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return out;
}

// Percent-encodes all but RFC 3986 unreserved characters: every data URL
// parser decodes that the same way, whatever it thinks of reserved ones.
std::string EncodeDataUrl(const DataUrl& d) {
  std::string out = "data:" + d.header + (d.base64 ? ";base64," : ",");
  if (d.base64) {
    out += wire::Base64Encode(
        std::span(reinterpret_cast<const uint8_t*>(d.content.data()), d.content.size()));
    return out;
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : d.content) {
    if (IsAsciiAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      auto b = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 0xf];
    }
  }
  return out;
}

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

// ---------------------------------------------------------------------------
// Placeholders

// A literal "{{" in a template, spelled as in Go templates.
constexpr std::string_view kLiteralOpen = "{{\"{{\"}}";
constexpr size_t kMaxPlaceholderName = 128;

enum class Scope { kUnknown, kAny, kAttestedOnly };

Scope ScopeOf(std::string_view name) {
  if (name == "pool" || name == "appliance.url" || name == "appliance.ca_pem") return Scope::kAny;
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

bool HasNonNullKey(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && !obj.at(key).is_null();
}

// An object that fetches something: it has a string "source".
bool IsResource(const json& obj) {
  return obj.is_object() && obj.contains("source") && obj.at("source").is_string();
}

// Inline content we cannot look into (gzip): neither placeholders nor secrets
// are searched in it.
bool IsCompressed(const json& resource) {
  return HasNonNullKey(resource, "compression") && resource.at("compression").is_string() &&
         !resource.at("compression").get_ref<const std::string&>().empty();
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
        IsResource(*node) && IsDataUrl(node->at("source").get_ref<const std::string&>());
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
    std::string why;
    std::optional<DataUrl> url = DecodeDataUrl(source.get_ref<const std::string&>(), &why);
    if (!url) return Status::InvalidArgument("template_invalid", Where(pointer) + ": " + why);
    if (url->header.find("{{") != std::string::npos) {
      return Status::InvalidArgument(
          "template_invalid", Where(pointer) + ": no placeholders in a data URL's media type");
    }
    if (IsCompressed(*resource)) return Status::Ok();
    std::string content;
    int count = 0;
    Status st = Expand(url->content, pointer, &content, &count);
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
    url->content = std::move(content);
    source = EncodeDataUrl(*url);
    return Status::Ok();
  }

  TemplateKind kind_;
  const Values* values_;  // BORROWED; nullptr: collect and check only
  std::set<std::string> names_;
};

// ---------------------------------------------------------------------------
// Template structure

Status Invalid(const std::string& pointer, const std::string& why) {
  return Status::InvalidArgument("template_invalid", Where(pointer) + ": " + why);
}

// Unknown keys are refused: Ignition only warns about them, so a typo such as
// "overwirte" would otherwise pass silently.
Status CheckKeys(const json& obj, const std::string& pointer,
                 std::initializer_list<std::string_view> allowed) {
  if (!obj.is_object()) return Invalid(pointer, "expected an object");
  for (const auto& [key, value] : obj.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      return Invalid(Child(pointer, key), "unknown key");
    }
  }
  return Status::Ok();
}

// Optional fields may be absent or null, as in Ignition's schemas.
bool Absent(const json& obj, const char* key) {
  return !obj.contains(key) || obj.at(key).is_null();
}

Status OptString(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key) || obj.at(key).is_string()) return Status::Ok();
  return Invalid(Child(pointer, key), "expected a string");
}

Status ReqString(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key)) return Invalid(Child(pointer, key), "required");
  return OptString(obj, key, pointer);
}

Status OptBool(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key) || obj.at(key).is_boolean()) return Status::Ok();
  return Invalid(Child(pointer, key), "expected true or false");
}

Status OptInt(const json& obj, const char* key, const std::string& pointer, int64_t lo,
              int64_t hi) {
  if (Absent(obj, key)) return Status::Ok();
  const json& v = obj.at(key);
  bool ok = false;
  if (v.is_number_unsigned()) {
    ok = v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
         (lo <= 0 || v.get<uint64_t>() >= static_cast<uint64_t>(lo));
  } else if (v.is_number_integer()) {
    ok = v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  }
  if (ok) return Status::Ok();
  return Invalid(Child(pointer, key),
                 "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
}

Status OptStrings(const json& obj, const char* key, const std::string& pointer) {
  if (Absent(obj, key)) return Status::Ok();
  const json& v = obj.at(key);
  if (!v.is_array()) return Invalid(Child(pointer, key), "expected a list of strings");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v.at(i).is_string()) return Invalid(Child(Child(pointer, key), i), "expected a string");
  }
  return Status::Ok();
}

// Calls check(element, pointer) for each element of the optional list of
// objects obj[key].
template <typename Check>
Status ForEachObject(const json& obj, const char* key, const std::string& pointer, Check check) {
  if (Absent(obj, key)) return Status::Ok();
  const json& v = obj.at(key);
  const std::string here = Child(pointer, key);
  if (!v.is_array()) return Invalid(here, "expected a list");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v.at(i).is_object()) return Invalid(Child(here, i), "expected an object");
    Status st = check(v.at(i), Child(here, i));
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

constexpr int64_t kMaxId = 4294967295;  // uid_t / gid_t

Status CheckResource(const json& r, const std::string& p, bool source_required) {
  Status st = CheckKeys(r, p, {"compression", "httpHeaders", "source", "verification"});
  if (st.ok()) st = source_required ? ReqString(r, "source", p) : OptString(r, "source", p);
  if (st.ok()) st = OptString(r, "compression", p);
  if (st.ok()) {
    st = ForEachObject(r, "httpHeaders", p, [](const json& h, const std::string& hp) {
      Status s = CheckKeys(h, hp, {"name", "value"});
      if (s.ok()) s = ReqString(h, "name", hp);
      if (s.ok()) s = OptString(h, "value", hp);
      return s;
    });
  }
  if (st.ok() && !Absent(r, "verification")) {
    const std::string vp = Child(p, "verification");
    st = CheckKeys(r.at("verification"), vp, {"hash"});
    if (st.ok()) st = OptString(r.at("verification"), "hash", vp);
  }
  return st;
}

Status CheckOptResource(const json& obj, const char* key, const std::string& p, bool required) {
  if (Absent(obj, key)) return Status::Ok();
  return CheckResource(obj.at(key), Child(p, key), required);
}

Status CheckIgnition(const json& ign, const std::string& p, SpecVersion* version) {
  Status st = CheckKeys(ign, p, {"config", "proxy", "security", "timeouts", "version"});
  if (!st.ok()) return st;
  if (Absent(ign, "version")) return Invalid(Child(p, "version"), "required");
  if (!ign.at("version").is_string()) return Invalid(Child(p, "version"), "expected a string");
  const std::string& text = ign.at("version").get_ref<const std::string&>();
  std::optional<VersionText> v = ParseVersionText(text, /*allow_suffix=*/true);
  if (!v || v->prerelease || !IsSupported(v->version)) {
    return Status::InvalidArgument("template_version_unsupported",
                                   "/ignition/version: rackgate serves spec 3.0.0 to 3.3.0");
  }
  *version = v->version;
  if (!Absent(ign, "config")) {
    const json& c = ign.at("config");
    const std::string cp = Child(p, "config");
    st = CheckKeys(c, cp, {"merge", "replace"});
    if (st.ok()) {
      st = ForEachObject(c, "merge", cp, [](const json& r, const std::string& rp) {
        return CheckResource(r, rp, /*source_required=*/true);
      });
    }
    if (st.ok()) st = CheckOptResource(c, "replace", cp, /*required=*/false);
    if (!st.ok()) return st;
  }
  if (!Absent(ign, "proxy")) {
    const json& x = ign.at("proxy");
    const std::string xp = Child(p, "proxy");
    st = CheckKeys(x, xp, {"httpProxy", "httpsProxy", "noProxy"});
    if (st.ok()) st = OptString(x, "httpProxy", xp);
    if (st.ok()) st = OptString(x, "httpsProxy", xp);
    if (st.ok()) st = OptStrings(x, "noProxy", xp);
    if (!st.ok()) return st;
  }
  if (!Absent(ign, "security")) {
    const json& s = ign.at("security");
    const std::string sp = Child(p, "security");
    st = CheckKeys(s, sp, {"tls"});
    if (st.ok() && !Absent(s, "tls")) {
      const std::string tp = Child(sp, "tls");
      st = CheckKeys(s.at("tls"), tp, {"certificateAuthorities"});
      if (st.ok()) {
        st = ForEachObject(s.at("tls"), "certificateAuthorities", tp,
                           [](const json& r, const std::string& rp) {
                             return CheckResource(r, rp, /*source_required=*/true);
                           });
      }
    }
    if (!st.ok()) return st;
  }
  if (!Absent(ign, "timeouts")) {
    const json& t = ign.at("timeouts");
    const std::string tp = Child(p, "timeouts");
    st = CheckKeys(t, tp, {"httpResponseHeaders", "httpTotal"});
    if (st.ok()) st = OptInt(t, "httpResponseHeaders", tp, 0, INT32_MAX);
    if (st.ok()) st = OptInt(t, "httpTotal", tp, 0, INT32_MAX);
  }
  return st;
}

// Lexically cleaned absolute path (as Go's path.Clean): so that
// "/etc//kubernetes/./admin.conf" is matched and deduplicated as
// "/etc/kubernetes/admin.conf".
std::string CleanPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(i, slash - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = slash + 1;
  }
  std::string out;
  for (std::string_view part : parts) {
    out += '/';
    out += part;
  }
  return out.empty() ? "/" : out;
}

Status CheckOwner(const json& node, const char* key, const std::string& p) {
  if (Absent(node, key)) return Status::Ok();
  const std::string op = Child(p, key);
  Status st = CheckKeys(node.at(key), op, {"id", "name"});
  if (st.ok()) st = OptInt(node.at(key), "id", op, 0, kMaxId);
  if (st.ok()) st = OptString(node.at(key), "name", op);
  return st;
}

// What files, directories and links share: path, overwrite, user, group.
// Paths must be absolute and unique across the three lists (Ignition refuses
// duplicates too).
Status CheckNode(const json& n, const std::string& p, std::map<std::string, std::string>* paths) {
  Status st = ReqString(n, "path", p);
  if (!st.ok()) return st;
  const std::string& path = n.at("path").get_ref<const std::string&>();
  if (path.empty() || path[0] != '/') return Invalid(Child(p, "path"), "must be absolute");
  auto [it, inserted] = paths->emplace(CleanPath(path), p);
  if (!inserted) return Invalid(Child(p, "path"), "same path as " + it->second);
  st = OptBool(n, "overwrite", p);
  if (st.ok()) st = CheckOwner(n, "user", p);
  if (st.ok()) st = CheckOwner(n, "group", p);
  return st;
}

Status CheckStorage(const json& s, const std::string& p) {
  Status st =
      CheckKeys(s, p, {"directories", "disks", "files", "filesystems", "links", "luks", "raid"});
  if (!st.ok()) return st;
  std::map<std::string, std::string> paths;  // cleaned path -> pointer of its node
  st = ForEachObject(s, "files", p, [&](const json& f, const std::string& fp) {
    Status fs = CheckKeys(
        f, fp, {"append", "contents", "group", "mode", "overwrite", "path", "rackgate", "user"});
    if (fs.ok()) fs = CheckNode(f, fp, &paths);
    if (fs.ok()) fs = OptInt(f, "mode", fp, 0, 07777);
    if (fs.ok()) fs = CheckOptResource(f, "contents", fp, /*required=*/false);
    if (fs.ok()) {
      fs = ForEachObject(f, "append", fp, [](const json& r, const std::string& rp) {
        return CheckResource(r, rp, /*source_required=*/false);
      });
    }
    if (fs.ok() && f.contains("rackgate")) {
      const std::string rp = Child(fp, "rackgate");
      fs = CheckKeys(f.at("rackgate"), rp, {"secret"});
      if (fs.ok()) fs = OptBool(f.at("rackgate"), "secret", rp);
    }
    return fs;
  });
  if (!st.ok()) return st;
  st = ForEachObject(s, "directories", p, [&](const json& d, const std::string& dp) {
    Status ds = CheckKeys(d, dp, {"group", "mode", "overwrite", "path", "user"});
    if (ds.ok()) ds = CheckNode(d, dp, &paths);
    if (ds.ok()) ds = OptInt(d, "mode", dp, 0, 07777);
    return ds;
  });
  if (!st.ok()) return st;
  st = ForEachObject(s, "links", p, [&](const json& l, const std::string& lp) {
    Status ls = CheckKeys(l, lp, {"group", "hard", "overwrite", "path", "target", "user"});
    if (ls.ok()) ls = CheckNode(l, lp, &paths);
    if (ls.ok()) ls = ReqString(l, "target", lp);
    if (ls.ok()) ls = OptBool(l, "hard", lp);
    return ls;
  });
  if (!st.ok()) return st;
  // Disks, RAID and filesystems are left to ignition-validate; a LUKS key
  // file is a resource, so its source is walked for placeholders and secrets.
  auto any = [](const json&, const std::string&) { return Status::Ok(); };
  for (const char* key : {"disks", "filesystems", "raid"}) {
    st = ForEachObject(s, key, p, any);
    if (!st.ok()) return st;
  }
  return ForEachObject(s, "luks", p, [](const json& l, const std::string& lp) {
    return CheckOptResource(l, "keyFile", lp, /*required=*/false);
  });
}

Status CheckSystemd(const json& s, const std::string& p) {
  Status st = CheckKeys(s, p, {"units"});
  if (!st.ok()) return st;
  return ForEachObject(s, "units", p, [](const json& u, const std::string& up) {
    Status us = CheckKeys(u, up, {"contents", "dropins", "enabled", "mask", "name"});
    if (us.ok()) us = ReqString(u, "name", up);
    if (us.ok()) us = OptBool(u, "enabled", up);
    if (us.ok()) us = OptBool(u, "mask", up);
    if (us.ok()) us = OptString(u, "contents", up);
    if (us.ok()) {
      us = ForEachObject(u, "dropins", up, [](const json& d, const std::string& dp) {
        Status ds = CheckKeys(d, dp, {"contents", "name"});
        if (ds.ok()) ds = ReqString(d, "name", dp);
        if (ds.ok()) ds = OptString(d, "contents", dp);
        return ds;
      });
    }
    return us;
  });
}

Status CheckPasswd(const json& s, const std::string& p) {
  Status st = CheckKeys(s, p, {"groups", "users"});
  if (!st.ok()) return st;
  st = ForEachObject(s, "users", p, [](const json& u, const std::string& up) {
    Status us = CheckKeys(u, up,
                          {"gecos", "groups", "homeDir", "name", "noCreateHome", "noLogInit",
                           "noUserGroup", "passwordHash", "primaryGroup", "shell", "shouldExist",
                           "sshAuthorizedKeys", "system", "uid"});
    if (us.ok()) us = ReqString(u, "name", up);
    for (const char* key : {"gecos", "homeDir", "passwordHash", "primaryGroup", "shell"}) {
      if (us.ok()) us = OptString(u, key, up);
    }
    for (const char* key : {"noCreateHome", "noLogInit", "noUserGroup", "shouldExist", "system"}) {
      if (us.ok()) us = OptBool(u, key, up);
    }
    if (us.ok()) us = OptStrings(u, "groups", up);
    if (us.ok()) us = OptStrings(u, "sshAuthorizedKeys", up);
    if (us.ok()) us = OptInt(u, "uid", up, 0, kMaxId);
    return us;
  });
  if (!st.ok()) return st;
  return ForEachObject(s, "groups", p, [](const json& g, const std::string& gp) {
    Status gs = CheckKeys(g, gp, {"gid", "name", "passwordHash", "shouldExist", "system"});
    if (gs.ok()) gs = ReqString(g, "name", gp);
    if (gs.ok()) gs = OptString(g, "passwordHash", gp);
    if (gs.ok()) gs = OptBool(g, "shouldExist", gp);
    if (gs.ok()) gs = OptBool(g, "system", gp);
    if (gs.ok()) gs = OptInt(g, "gid", gp, 0, kMaxId);
    return gs;
  });
}

Status CheckKernelArguments(const json& k, const std::string& p) {
  Status st = CheckKeys(k, p, {"shouldExist", "shouldNotExist"});
  if (st.ok()) st = OptStrings(k, "shouldExist", p);
  if (st.ok()) st = OptStrings(k, "shouldNotExist", p);
  return st;
}

// ---------------------------------------------------------------------------
// Secrets in public templates

Status SecretInPublic(const std::string& pointer, const std::string& why) {
  return Status::InvalidArgument("template_secret_in_public",
                                 Where(pointer) + ": " + why +
                                     "; a public config is served to unattested machines, move "
                                     "this to the attested template");
}

// Credential paths a public template may not write (files and links), matched
// case-insensitively against the cleaned path with fnmatch(3) without
// FNM_PATHNAME, so `*` also spans `/`. The list errs towards refusing: a
// false positive costs the operator a move to the attested template, a false
// negative hands a credential to anyone who can reach the port.
struct CredentialPath {
  const char* glob;
  const char* what;
};

constexpr CredentialPath kCredentialPaths[] = {
    // kubeconfigs: OpenShift's /etc/kubernetes/kubeconfig and
    // /var/lib/kubelet/kubeconfig, kubeadm's /etc/kubernetes/{admin,kubelet,
    // bootstrap-kubelet,...}.conf
    {"*kubeconfig*", "a kubeconfig"},
    {"/etc/kubernetes/*.conf", "a kubeconfig"},
    // pull secrets and registry credentials (containers-auth.json(5), docker,
    // the kubelet's config.json)
    {"*pull-secret*", "a pull secret"},
    {"*/auth.json", "container registry credentials"},
    {"*/.docker/config.json", "container registry credentials"},
    {"/var/lib/kubelet/config.json", "container registry credentials"},
    // private keys: TLS keys, SSH host keys (ssh_host_*_key), user SSH keys
    // (their .pub halves stay allowed), PKCS#12 bundles
    {"*.key", "a private key"},
    {"*-key.pem", "a private key"},
    {"*_key", "a private key"},
    {"*/id_rsa", "an SSH private key"},
    {"*/id_dsa", "an SSH private key"},
    {"*/id_ecdsa", "an SSH private key"},
    {"*/id_ecdsa_sk", "an SSH private key"},
    {"*/id_ed25519", "an SSH private key"},
    {"*/id_ed25519_sk", "an SSH private key"},
    {"*.p12", "a PKCS#12 bundle"},
    {"*.pfx", "a PKCS#12 bundle"},
    // bootstrap tokens, service account tokens, provisioning tokens
    {"*token*", "a token"},
};

const char* CredentialPathKind(const std::string& cleaned) {
  for (const CredentialPath& c : kCredentialPaths) {
    if (fnmatch(c.glob, cleaned.c_str(), FNM_CASEFOLD) == 0) return c.what;
  }
  return nullptr;
}

// A URL carrying userinfo ("https://user:password@host/") names a credential.
bool UrlHasUserinfo(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return false;
  std::string_view rest = url.substr(scheme + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  return authority.find('@') != std::string_view::npos;
}

constexpr std::string_view kPrivateKeyMarker = "PRIVATE KEY-----";

bool HoldsPrivateKey(std::string_view s) {
  return s.find(kPrivateKeyMarker) != std::string_view::npos;
}

// Every string value and every resource, anywhere in the template.
Status CheckNoSecretsIn(const json& node, const std::string& p) {
  if (node.is_string()) {
    if (HoldsPrivateKey(node.get_ref<const std::string&>())) {
      return SecretInPublic(p, "holds a PEM private key");
    }
    return Status::Ok();
  }
  if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) {
      Status st = CheckNoSecretsIn(node.at(i), Child(p, i));
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  if (!node.is_object()) return Status::Ok();
  if (IsResource(node)) {
    const std::string& source = node.at("source").get_ref<const std::string&>();
    const std::string sp = Child(p, "source");
    if (IsDataUrl(source)) {
      // Cannot be searched for a private key, so it cannot be shown safe.
      if (IsCompressed(node))
        return SecretInPublic(sp, "compressed inline content cannot be checked");
      std::string why;
      std::optional<DataUrl> url = DecodeDataUrl(source, &why);
      if (url && HoldsPrivateKey(url->content))
        return SecretInPublic(sp, "holds a PEM private key");
    } else if (UrlHasUserinfo(source)) {
      return SecretInPublic(sp, "the URL carries credentials");
    }
    if (node.contains("httpHeaders") && node.at("httpHeaders").is_array()) {
      const json& headers = node.at("httpHeaders");
      for (size_t i = 0; i < headers.size(); ++i) {
        const json& h = headers.at(i);
        if (!h.is_object() || !h.contains("name") || !h.at("name").is_string()) continue;
        std::string name = AsciiLower(h.at("name").get_ref<const std::string&>());
        if (name == "authorization" || name == "proxy-authorization" || name == "cookie") {
          return SecretInPublic(
              Child(Child(Child(p, "httpHeaders"), i), "name"),
              "the " + h.at("name").get<std::string>() + " header is a credential");
        }
      }
    }
  }
  for (const auto& [key, value] : node.items()) {
    Status st = CheckNoSecretsIn(value, Child(p, key));
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status CheckNoSecrets(const json& root) {
  if (root.contains("storage")) {
    const json& s = root.at("storage");
    for (const char* list : {"files", "links"}) {
      if (Absent(s, list)) continue;
      const json& nodes = s.at(list);
      for (size_t i = 0; i < nodes.size(); ++i) {
        const json& n = nodes.at(i);
        const std::string np = Child(Child("/storage", list), i);
        if (n.contains("rackgate") && n.at("rackgate").is_object() &&
            n.at("rackgate").contains("secret") && n.at("rackgate").at("secret") == true) {
          return SecretInPublic(np, "the file is marked secret");
        }
        const std::string cleaned = CleanPath(n.at("path").get_ref<const std::string&>());
        if (const char* what = CredentialPathKind(cleaned)) {
          return SecretInPublic(Child(np, "path"),
                                "\"" + cleaned + "\" is where " + what + " lives");
        }
      }
    }
    if (!Absent(s, "luks")) {
      const json& luks = s.at("luks");
      for (size_t i = 0; i < luks.size(); ++i) {
        const json& l = luks.at(i);
        if (!Absent(l, "keyFile") && !Absent(l.at("keyFile"), "source") &&
            IsDataUrl(l.at("keyFile").at("source").get_ref<const std::string&>())) {
          return SecretInPublic(Child(Child(Child("/storage/luks", i), "keyFile"), "source"),
                                "an inline LUKS key file is a disk key");
        }
      }
    }
  }
  if (root.contains("passwd")) {
    const json& pw = root.at("passwd");
    for (const char* list : {"users", "groups"}) {
      if (Absent(pw, list)) continue;
      const json& entries = pw.at(list);
      for (size_t i = 0; i < entries.size(); ++i) {
        if (!Absent(entries.at(i), "passwordHash")) {
          return SecretInPublic(Child(Child(Child("/passwd", list), i), "passwordHash"),
                                "a password hash can be cracked offline");
        }
      }
    }
  }
  if (root.contains("ignition") && !Absent(root.at("ignition"), "proxy")) {
    const json& proxy = root.at("ignition").at("proxy");
    for (const char* key : {"httpProxy", "httpsProxy"}) {
      if (!Absent(proxy, key) && UrlHasUserinfo(proxy.at(key).get_ref<const std::string&>())) {
        return SecretInPublic(Child("/ignition/proxy", key), "the URL carries credentials");
      }
    }
  }
  return CheckNoSecretsIn(root, "");
}

// ---------------------------------------------------------------------------
// JSON parsing with bounds

struct ParseRefusal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses `text`, refusing nesting deeper than kMaxTemplateDepth (checked as
// the parser goes, before the depth is built) and duplicate keys (nlohmann
// keeps the last one silently, so a second "storage" would hide the first).
Result<json> ParseBounded(std::string_view text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto callback = [&keys](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxTemplateDepth) {
          throw ParseRefusal("nested deeper than " + std::to_string(kMaxTemplateDepth));
        }
        if (event == json::parse_event_t::object_start) keys.emplace_back();
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
  } catch (const ParseRefusal& e) {
    return Status::InvalidArgument("template_invalid", e.what());
  }
}

// ---------------------------------------------------------------------------
// Merge

// Lists whose entries Ignition identifies by a key; an overlay entry replaces
// the base entry with the same key.
struct KeyedList {
  std::string_view pointer;
  const char* key;
};

constexpr KeyedList kKeyedLists[] = {
    {"/storage/files", "path"},
    {"/storage/directories", "path"},
    {"/storage/links", "path"},
    {"/storage/disks", "device"},
    {"/storage/filesystems", "device"},
    {"/storage/raid", "name"},
    {"/storage/luks", "name"},
    {"/systemd/units", "name"},
    {"/passwd/users", "name"},
    {"/passwd/groups", "name"},
    {"/ignition/security/tls/certificateAuthorities", "source"},
    {"/ignition/config/merge", "source"},
};

const char* ListKey(const std::string& pointer) {
  for (const KeyedList& k : kKeyedLists) {
    if (k.pointer == pointer) return k.key;
  }
  return nullptr;
}

std::optional<std::string> EntryKey(const json& entry, const char* key) {
  if (!entry.is_object() || !entry.contains(key) || !entry.at(key).is_string()) {
    return std::nullopt;
  }
  const std::string& v = entry.at(key).get_ref<const std::string&>();
  return std::string_view(key) == "path" ? CleanPath(v) : v;
}

json MergeKeyed(const json& base, const json& overlay, const char* key) {
  std::map<std::string, size_t> by_key;  // overlay entry per key (the first)
  for (size_t i = 0; i < overlay.size(); ++i) {
    if (std::optional<std::string> k = EntryKey(overlay.at(i), key)) by_key.emplace(*k, i);
  }
  std::vector<bool> used(overlay.size(), false);
  json out = json::array();
  for (const json& e : base) {
    std::optional<std::string> k = EntryKey(e, key);
    auto it = k ? by_key.find(*k) : by_key.end();
    if (it == by_key.end()) {
      out.push_back(e);
    } else if (!used[it->second]) {
      out.push_back(overlay.at(it->second));
      used[it->second] = true;
    }
  }
  for (size_t i = 0; i < overlay.size(); ++i) {
    if (!used[i]) out.push_back(overlay.at(i));
  }
  return out;
}

json MergeValue(const json& base, const json& overlay, const std::string& pointer) {
  if (overlay.is_null()) return base;
  if (base.is_object() && overlay.is_object()) {
    json out = base;
    for (const auto& [key, value] : overlay.items()) {
      out[key] = out.contains(key) ? MergeValue(out.at(key), value, Child(pointer, key)) : value;
    }
    return out;
  }
  if (base.is_array() && overlay.is_array()) {
    if (const char* key = ListKey(pointer)) return MergeKeyed(base, overlay, key);
    // Ignition refuses duplicate list entries, so equal ones are not repeated.
    json out = base;
    for (const json& e : overlay) {
      if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(e);
    }
    return out;
  }
  return overlay;
}

// Cleaned paths of the overlay's nodes of every kind but `except`.
std::set<std::string> OverlayNodePaths(const json& overlay, std::string_view except) {
  std::set<std::string> out;
  if (!overlay.contains("storage") || !overlay.at("storage").is_object()) return out;
  const json& s = overlay.at("storage");
  for (const char* list : {"files", "directories", "links"}) {
    if (list == except || !s.contains(list) || !s.at(list).is_array()) continue;
    for (const json& n : s.at(list)) {
      if (std::optional<std::string> k = EntryKey(n, "path")) out.insert(*k);
    }
  }
  return out;
}

// Removes from base's kernel argument list `list` what the overlay puts in
// `opposite`: the overlay's word wins, and Ignition refuses an argument that
// is both required and forbidden.
void DropOpposedKernelArguments(json* merged, const json& overlay, const char* list,
                                const char* opposite) {
  if (!merged->contains("kernelArguments") || !overlay.contains("kernelArguments")) return;
  json& mine = (*merged)["kernelArguments"];
  const json& theirs = overlay.at("kernelArguments");
  if (!mine.is_object() || !theirs.is_object() || !mine.contains(list) ||
      !mine.at(list).is_array() || !theirs.contains(opposite) || !theirs.at(opposite).is_array()) {
    return;
  }
  json kept = json::array();
  for (const json& arg : mine.at(list)) {
    const json& forbidden = theirs.at(opposite);
    if (std::find(forbidden.begin(), forbidden.end(), arg) == forbidden.end()) kept.push_back(arg);
  }
  mine[list] = std::move(kept);
}

}  // namespace

// ---------------------------------------------------------------------------
// Public functions

bool IsSupported(SpecVersion v) {
  return std::find(std::begin(kSupported), std::end(kSupported), v) != std::end(kSupported);
}

Result<SpecVersion> ParseSpecVersion(std::string_view text) {
  std::optional<VersionText> v = ParseVersionText(text, /*allow_suffix=*/false);
  if (!v) {
    return Status::InvalidArgument("ignition_version_invalid",
                                   "not a spec version of the form X.Y.Z");
  }
  return v->version;
}

std::string FormatSpecVersion(SpecVersion v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
}

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

Result<json> ConvertToVersion(const json& config, SpecVersion target) {
  if (!IsSupported(target)) {
    return Status::Unsupported("ignition_version_unsupported",
                               "cannot convert to spec " + FormatSpecVersion(target));
  }
  std::optional<SpecVersion> current = ConfigVersion(config);
  if (!current) {
    return Status::InvalidArgument("ignition_config_invalid",
                                   "config has no readable /ignition/version");
  }
  if (target < *current) {
    if (std::optional<TooNew> t = FindNewerThan(config, target)) {
      return Status::Unsupported("ignition_config_too_new",
                                 t->pointer + " needs spec " + FormatSpecVersion(t->since) +
                                     ", the client reads at most " + FormatSpecVersion(target));
    }
  }
  json out = config;
  out["ignition"]["version"] = FormatSpecVersion(target);
  return out;
}

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

  Status st = CheckKeys(root, "", {"ignition", "kernelArguments", "passwd", "storage", "systemd"});
  if (!st.ok()) return st;
  if (Absent(root, "ignition")) return Invalid("/ignition", "required");
  st = CheckIgnition(root.at("ignition"), "/ignition", &t.version);
  if (st.ok() && !Absent(root, "storage")) st = CheckStorage(root.at("storage"), "/storage");
  if (st.ok() && !Absent(root, "systemd")) st = CheckSystemd(root.at("systemd"), "/systemd");
  if (st.ok() && !Absent(root, "passwd")) st = CheckPasswd(root.at("passwd"), "/passwd");
  if (st.ok() && !Absent(root, "kernelArguments")) {
    st = CheckKernelArguments(root.at("kernelArguments"), "/kernelArguments");
  }
  if (!st.ok()) return st;

  // An Ignition that reads exactly the declared version would refuse a field
  // from a later one; so would a conversion down to it.
  if (std::optional<TooNew> too_new = FindNewerThan(root, t.version)) {
    return Invalid(too_new->pointer, "needs spec " + FormatSpecVersion(too_new->since) +
                                         " but the template declares " +
                                         FormatSpecVersion(t.version));
  }

  Walker walker(kind, /*values=*/nullptr);
  st = walker.Walk(&t.config, "");
  if (!st.ok()) return st;
  t.placeholders.assign(walker.names().begin(), walker.names().end());

  // SECURITY: the public config goes to machines that have proven nothing;
  // what it carries is as good as published.
  if (kind == TemplateKind::kPublic) {
    st = CheckNoSecrets(root);
    if (!st.ok()) return st;
  }
  return t;
}

Result<json> Render(const Template& t, const Values& v) {
  json out = t.config;
  Walker walker(t.kind, &v);
  Status st = walker.Walk(&out, "");
  if (!st.ok()) return st;
  return out;
}

json Merge(const json& base, const json& overlay) {
  if (!base.is_object() || !overlay.is_object()) return overlay;
  // A node path the overlay sets replaces the base's node at that path even
  // when it is of another kind (a file over a directory): Ignition refuses
  // two nodes at one path. Same-kind entries are replaced in place below.
  json trimmed = base;
  if (trimmed.contains("storage") && trimmed.at("storage").is_object()) {
    json& s = trimmed["storage"];
    for (const char* list : {"files", "directories", "links"}) {
      if (!s.contains(list) || !s.at(list).is_array()) continue;
      std::set<std::string> taken = OverlayNodePaths(overlay, list);
      json kept = json::array();
      for (const json& n : s.at(list)) {
        std::optional<std::string> k = EntryKey(n, "path");
        if (!k || taken.count(*k) == 0) kept.push_back(n);
      }
      s[list] = std::move(kept);
    }
  }
  json out = MergeValue(trimmed, overlay, "");
  DropOpposedKernelArguments(&out, overlay, "shouldExist", "shouldNotExist");
  DropOpposedKernelArguments(&out, overlay, "shouldNotExist", "shouldExist");

  std::optional<SpecVersion> a = ConfigVersion(base);
  std::optional<SpecVersion> b = ConfigVersion(overlay);
  if (a && b && out.contains("ignition") && out.at("ignition").is_object()) {
    out["ignition"]["version"] = FormatSpecVersion(std::max(*a, *b));
  }
  return out;
}

std::string Serialize(const json& config) { return config.dump(); }

}  // namespace rackgate::daemon::ignition
