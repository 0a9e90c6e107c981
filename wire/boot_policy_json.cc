// Boot policy and PCR values as JSON: the strict, bounded readers into
// attest's types, and the PCR-values writer.
#include "wire/boot_policy_json.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attest/pcr_signature.h"
#include "base/json_depth.h"
#include "wire/codec.h"
#include "base/hex.h"
#include "base/text.h"

namespace rackgate::wire {

namespace {

using json = nlohmann::json;
using attest::BootPolicy;
using attest::Bytes;
using attest::DigestSize;
using attest::HashAlgFromName;
using attest::HashAlgName;
using attest::KernelCmdlinePolicy;
using attest::kAlgNull;
using attest::kAlgSha1;
using attest::kAlgSha256;
using attest::kAlgSha384;
using attest::kAlgSha512;
using attest::PcrBank;
using attest::PcrSelection;
using attest::PcrValues;
using attest::PolicyDigest;

constexpr uint32_t kMaxPcr = 23;

// Thrown inside the parsers, turned into a Status at their boundary.
struct Malformed {
  std::string message;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw Malformed{where + ": " + what};
}

// Parses bounded JSON. SECURITY: nlohmann keeps the last of duplicate keys
// silently; {"authorities": {...}, "authorities": {}} would drop a rule, so a
// duplicate key refuses the document (found through the parser callback,
// which sees every key in order).
json ParseBounded(std::string_view text, const char* what) {
  if (text.size() > kMaxPolicySize) {
    Fail(what, "larger than " + std::to_string(kMaxPolicySize) + " bytes");
  }
  if (JsonDepth(text) > kMaxPolicyDepth) {
    Fail(what, "nested deeper than " + std::to_string(kMaxPolicyDepth));
  }
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string() &&
            !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json j = json::parse(text, cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) Fail(what, "not valid JSON");
  if (!duplicate.empty()) Fail(what, "duplicate key \"" + duplicate.substr(0, 64) + "\"");
  return j;
}

void OnlyKeys(const json& obj, const std::string& where, std::initializer_list<const char*> known) {
  for (const auto& item : obj.items()) {
    const std::string& k = item.key();
    if (std::none_of(known.begin(), known.end(), [&](const char* n) { return k == n; })) {
      // The key is the operator's own text; cut it so a message stays short.
      Fail(where, "unknown field \"" + k.substr(0, 64) + "\"");
    }
  }
}

const json& Object(const json& j, const std::string& where) {
  if (!j.is_object()) Fail(where, "must be an object");
  return j;
}

bool Bool(const json& j, const std::string& where) {
  if (!j.is_boolean()) Fail(where, "must be true or false");
  return j.get<bool>();
}

std::string String(const json& j, const std::string& where) {
  if (!j.is_string()) Fail(where, "must be a string");
  std::string s = j.get<std::string>();
  if (s.size() > kMaxPolicyStringSize) {
    Fail(where, "longer than " + std::to_string(kMaxPolicyStringSize) + " bytes");
  }
  return s;
}

uint16_t Bank(const std::string& name, const std::string& where) {
  const uint16_t alg = HashAlgFromName(name);
  if (alg == kAlgNull) Fail(where, "unknown bank \"" + name.substr(0, 16) + "\"");
  return alg;
}

uint32_t PcrIndex(const std::string& text, const std::string& where) {
  if (text.empty() || text.size() > 2 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (text.size() == 2 && text[0] == '0')) {
    Fail(where, "PCR index \"" + text.substr(0, 16) + "\" is not 0.." + std::to_string(kMaxPcr));
  }
  const uint32_t pcr = static_cast<uint32_t>(std::stoul(text));
  if (pcr > kMaxPcr) Fail(where, "PCR index " + text + " is above " + std::to_string(kMaxPcr));
  return pcr;
}

Bytes DigestValue(const std::string& hex, uint16_t alg, const std::string& where) {
  auto v = hex::Decode(hex, kMaxPolicyStringSize);
  if (!v) Fail(where, "not hex");
  if (v->size() != DigestSize(alg)) {
    Fail(where, std::to_string(v->size()) + " bytes, but " + HashAlgName(alg) + " has " +
                    std::to_string(DigestSize(alg)));
  }
  return *std::move(v);
}

// {"sha256": {"0": "<hex>", ...}, ...}
PcrValues ReadPcrValues(const json& j, const std::string& where) {
  PcrValues out;
  for (const auto& bank : Object(j, where).items()) {
    const std::string bw = where + "." + bank.key().substr(0, 16);
    const uint16_t alg = Bank(bank.key(), where);
    PcrBank& values = out[alg];
    for (const auto& pcr : Object(bank.value(), bw).items()) {
      const std::string pw = bw + "." + pcr.key().substr(0, 16);
      values[PcrIndex(pcr.key(), bw)] = DigestValue(String(pcr.value(), pw), alg, pw);
    }
  }
  return out;
}

// ["sha256:<hex>", "<hex>", ...]; a bare value names its bank by its length.
std::vector<PolicyDigest> ReadDigests(const json& j, const std::string& where) {
  if (!j.is_array()) Fail(where, "must be an array of digests");
  if (j.size() > kMaxPolicyDigests) {
    Fail(where, "more than " + std::to_string(kMaxPolicyDigests) + " digests");
  }
  std::vector<PolicyDigest> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const std::string s = String(j.at(i), w);
    PolicyDigest d;
    std::string hex;
    if (const size_t colon = s.find(':'); colon != std::string::npos) {
      d.alg = Bank(s.substr(0, colon), w);
      hex = s.substr(colon + 1);
    } else {
      for (uint16_t alg : {kAlgSha1, kAlgSha256, kAlgSha384, kAlgSha512}) {
        if (s.size() == 2 * DigestSize(alg)) d.alg = alg;
      }
      if (d.alg == kAlgNull) Fail(w, "a bare digest must be 40, 64, 96 or 128 hex digits");
      hex = s;
    }
    d.value = DigestValue(hex, d.alg, w);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> ReadStrings(const json& j, const std::string& where) {
  if (!j.is_array()) Fail(where, "must be an array of strings");
  if (j.size() > kMaxPolicyStrings) {
    Fail(where, "more than " + std::to_string(kMaxPolicyStrings) + " strings");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string s = String(j.at(i), where + "[" + std::to_string(i) + "]");
    // An empty substring is in every command line: as a required string it
    // checks nothing, as a forbidden one it refuses everything.
    if (s.empty()) Fail(where + "[" + std::to_string(i) + "]", "must not be empty");
    out.push_back(std::move(s));
  }
  return out;
}

// {"allowed": [...], "forbidden": [...]}
void ReadDigestRule(const json& j, const std::string& where,
                    std::optional<std::vector<PolicyDigest>>* allowed,
                    std::vector<PolicyDigest>* forbidden) {
  OnlyKeys(Object(j, where), where, {"allowed", "forbidden"});
  if (j.contains("allowed")) *allowed = ReadDigests(j.at("allowed"), where + ".allowed");
  if (j.contains("forbidden")) *forbidden = ReadDigests(j.at("forbidden"), where + ".forbidden");
}

// A PE section name as systemd-stub measures it: 2..8 printable ASCII
// characters, no space, the first a '.'.
bool IsUkiSectionName(const std::string& name) {
  return name.size() >= 2 && name.size() <= attest::kMaxUkiSectionNameChars && name[0] == '.' &&
         text::IsVisibleAscii(name);
}

// {"sections": {".linux": [digest], ...}}
attest::UkiPolicy ReadUki(const json& j) {
  OnlyKeys(Object(j, "uki"), "uki", {"sections"});
  if (!j.contains("sections")) Fail("uki", "missing \"sections\"");
  const json& sections = Object(j.at("sections"), "uki.sections");
  if (sections.empty()) Fail("uki.sections", "names no section");
  if (sections.size() > kMaxPolicyUkiSections) {
    Fail("uki.sections", "more than " + std::to_string(kMaxPolicyUkiSections) + " sections");
  }
  attest::UkiPolicy u;
  for (const auto& item : sections.items()) {
    const std::string w = "uki.sections." + item.key().substr(0, 16);
    if (!IsUkiSectionName(item.key())) {
      Fail(w, "a section name is 2 to 8 printable characters starting with '.'");
    }
    u.sections[item.key()] = ReadDigests(item.value(), w);
  }
  return u;
}

// ["sha256:<hex>" or "<hex>", ...]: SHA-256 values only (certificate
// fingerprints, dbx hashes). An empty list checks nothing, as an empty
// "forbidden" list elsewhere in the format (the writer writes both of db's).
std::vector<Bytes> ReadSha256List(const json& j, const std::string& where) {
  std::vector<Bytes> out;
  const std::vector<PolicyDigest> digests = ReadDigests(j, where);
  for (size_t i = 0; i < digests.size(); ++i) {
    if (digests[i].alg != kAlgSha256) {
      Fail(where + "[" + std::to_string(i) + "]", "must be a SHA-256 value (64 hex digits)");
    }
    out.push_back(digests[i].value);
  }
  return out;
}

// "db": {"required": [...], "forbidden": [...]} and "dbx": {"required": [...]}.
void ReadSecureBootDb(const json& j, BootPolicy* p) {
  attest::SecureBootDbPolicy db;
  if (j.contains("db")) {
    const json& d = j.at("db");
    OnlyKeys(Object(d, "db"), "db", {"required", "forbidden"});
    if (d.contains("required")) {
      db.db_required_certificates = ReadSha256List(d.at("required"), "db.required");
    }
    if (d.contains("forbidden")) {
      db.db_forbidden_certificates = ReadSha256List(d.at("forbidden"), "db.forbidden");
    }
    if (!d.contains("required") && !d.contains("forbidden")) {
      Fail("db", "sets no rule (required or forbidden)");
    }
  }
  if (j.contains("dbx")) {
    const json& d = j.at("dbx");
    OnlyKeys(Object(d, "dbx"), "dbx", {"required"});
    if (!d.contains("required")) Fail("dbx", "missing \"required\"");
    db.dbx_required_hashes = ReadSha256List(d.at("required"), "dbx.required");
  }
  if (j.contains("db") || j.contains("dbx")) p->secure_boot_db = std::move(db);
}

// "uki_signed": {"public_keys": ["-----BEGIN PUBLIC KEY-----...", ...]}
attest::SignedPcr11Policy ReadUkiSigned(const json& j) {
  OnlyKeys(Object(j, "uki_signed"), "uki_signed", {"public_keys"});
  if (!j.contains("public_keys")) Fail("uki_signed", "missing \"public_keys\"");
  const json& keys = j.at("public_keys");
  if (!keys.is_array()) Fail("uki_signed.public_keys", "must be an array of PEM public keys");
  // An empty list would trust nothing and fail every machine; refuse it at
  // load time, where the operator sees why.
  if (keys.empty()) Fail("uki_signed.public_keys", "lists no key");
  if (keys.size() > kMaxPolicyUkiKeys) {
    Fail("uki_signed.public_keys", "more than " + std::to_string(kMaxPolicyUkiKeys) + " keys");
  }
  attest::SignedPcr11Policy u;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string w = "uki_signed.public_keys[" + std::to_string(i) + "]";
    auto der = attest::PublicKeyDerFromPem(String(keys.at(i), w));
    if (!der.ok()) Fail(w, der.status().message());
    u.public_keys.push_back(*std::move(der));
  }
  return u;
}

BootPolicy ReadPolicy(const json& j) {
  OnlyKeys(Object(j, "policy"), "policy",
           {"version", "comment", "pcrs", "require_secure_boot", "require_separators",
            "boot_applications", "authorities", "boot_files", "kernel_cmdline", "uki", "tofu", "db", "dbx",
            "uki_signed"});
  if (!j.contains("version")) Fail("policy", "missing \"version\"");
  const json& version = j.at("version");
  if (!version.is_number_integer() || version.get<int64_t>() != kBootPolicyVersion) {
    Fail("version", "must be " + std::to_string(kBootPolicyVersion));
  }
  BootPolicy p;
  if (j.contains("comment")) (void)String(j.at("comment"), "comment");
  if (j.contains("pcrs")) p.pcrs = ReadPcrValues(j.at("pcrs"), "pcrs");
  if (j.contains("require_secure_boot")) {
    p.require_secure_boot = Bool(j.at("require_secure_boot"), "require_secure_boot");
  }
  if (j.contains("require_separators")) {
    p.require_separators = Bool(j.at("require_separators"), "require_separators");
  }
  if (j.contains("boot_applications")) {
    ReadDigestRule(j.at("boot_applications"), "boot_applications", &p.allowed_boot_applications,
                   &p.forbidden_boot_applications);
  }
  if (j.contains("authorities")) {
    ReadDigestRule(j.at("authorities"), "authorities", &p.allowed_authorities,
                   &p.forbidden_authorities);
  }
  if (j.contains("boot_files")) {
    ReadDigestRule(j.at("boot_files"), "boot_files", &p.allowed_boot_files, &p.forbidden_boot_files);
  }
  if (j.contains("kernel_cmdline")) {
    const json& k = j.at("kernel_cmdline");
    OnlyKeys(Object(k, "kernel_cmdline"), "kernel_cmdline", {"exact", "required", "forbidden"});
    KernelCmdlinePolicy kp;
    if (k.contains("exact")) kp.exact = String(k.at("exact"), "kernel_cmdline.exact");
    if (k.contains("required")) kp.required = ReadStrings(k.at("required"), "kernel_cmdline.required");
    if (k.contains("forbidden")) {
      kp.forbidden = ReadStrings(k.at("forbidden"), "kernel_cmdline.forbidden");
    }
    if (!kp.exact && kp.required.empty() && kp.forbidden.empty()) {
      Fail("kernel_cmdline", "sets no rule (exact, required or forbidden)");
    }
    p.kernel_cmdline = std::move(kp);
  }
  if (j.contains("uki")) p.uki = ReadUki(j.at("uki"));
  ReadSecureBootDb(j, &p);
  if (j.contains("uki_signed")) p.uki_signed = ReadUkiSigned(j.at("uki_signed"));
  if (j.contains("tofu")) {
    for (const auto& bank : Object(j.at("tofu"), "tofu").items()) {
      const std::string w = "tofu." + bank.key().substr(0, 16);
      PcrSelection sel;
      sel.hash_alg = Bank(bank.key(), "tofu");
      if (!bank.value().is_array()) Fail(w, "must be an array of PCR indices");
      std::set<uint32_t> pcrs;
      for (const json& pcr : bank.value()) {
        if (!pcr.is_number_unsigned() || pcr.get<uint64_t>() > kMaxPcr) {
          Fail(w, "PCR indices are integers 0.." + std::to_string(kMaxPcr));
        }
        pcrs.insert(pcr.get<uint32_t>());
      }
      sel.pcrs.assign(pcrs.begin(), pcrs.end());
      p.tofu.push_back(std::move(sel));
    }
  }
  return p;
}

}  // namespace

Result<BootPolicy> ParseBootPolicy(std::string_view text) {
  try {
    return ReadPolicy(ParseBounded(text, "policy"));
  } catch (const Malformed& m) {
    return Status::InvalidArgument("policy_malformed", m.message);
  } catch (const json::exception& e) {
    // Every read is type-checked first; this is a bug guard, not a path.
    return Status::InvalidArgument("policy_malformed", std::string("policy: ") + e.what());
  }
}

std::string FormatPcrValuesJson(const PcrValues& pcrs) {
  std::string out = "{";
  bool first_bank = true;
  for (auto bank = pcrs.rbegin(); bank != pcrs.rend(); ++bank) {
    if (!first_bank) out += ", ";
    first_bank = false;
    out += "\"" + HashAlgName(bank->first) + "\": {";
    bool first = true;
    for (const auto& [pcr, value] : bank->second) {
      if (!first) out += ", ";
      first = false;
      out += "\"" + std::to_string(pcr) + "\": \"" + hex::Encode(value) + "\"";
    }
    out += "}";
  }
  return out + "}";
}

Result<PcrValues> ParsePcrValuesJson(std::string_view text) {
  try {
    const json j = ParseBounded(text, "pcr values");
    if (!j.is_object() || !j.contains("pcrs")) Fail("pcr values", "no top-level \"pcrs\" object");
    return ReadPcrValues(j.at("pcrs"), "pcrs");
  } catch (const Malformed& m) {
    return Status::InvalidArgument("pcr_values_malformed", m.message);
  } catch (const json::exception& e) {
    return Status::InvalidArgument("pcr_values_malformed", std::string("pcr values: ") + e.what());
  }
}

}  // namespace rackgate::wire
