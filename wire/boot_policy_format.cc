// The boot policy's writer: a typed BootPolicy as the JSON document
// ParseBootPolicy reads (docs/policy.md), in one stable form so that two
// policies that say the same thing are the same text.
#include "wire/boot_policy_json.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::wire {

namespace {

// Insertion order is the document's order.
using ojson = nlohmann::ordered_json;
using attest::Bytes;
using attest::HashAlgName;
using attest::PolicyDigest;

constexpr size_t kPemLineChars = 64;

std::string DigestText(uint16_t alg, const Bytes& value) {
  return HashAlgName(alg) + ":" + hex::Encode(value);
}

// A set of strings as a sorted JSON array.
ojson SortedArray(const std::set<std::string>& items) {
  ojson a = ojson::array();
  for (const std::string& s : items) a.push_back(s);
  return a;
}

ojson Digests(const std::vector<PolicyDigest>& list) {
  std::set<std::string> items;
  for (const PolicyDigest& d : list) items.insert(DigestText(d.alg, d.value));
  return SortedArray(items);
}

ojson Sha256List(const std::vector<Bytes>& list) {
  std::set<std::string> items;
  for (const Bytes& b : list) items.insert(DigestText(attest::kAlgSha256, b));
  return SortedArray(items);
}

// DER SubjectPublicKeyInfo as PEM ("-----BEGIN PUBLIC KEY-----", base64 in
// lines of 64 characters), as `openssl pkey -pubout` writes it.
std::string Pem(const Bytes& der) {
  const std::string b64 = Base64Encode(der);
  std::string out = "-----BEGIN PUBLIC KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += kPemLineChars) {
    out += b64.substr(i, kPemLineChars) + "\n";
  }
  return out + "-----END PUBLIC KEY-----\n";
}

// {"allowed": [...], "forbidden": [...]}, or null when the rule checks
// nothing.
ojson DigestRule(const std::optional<std::vector<PolicyDigest>>& allowed,
                 const std::vector<PolicyDigest>& forbidden) {
  if (!allowed && forbidden.empty()) return nullptr;
  ojson r = ojson::object();
  if (allowed) r["allowed"] = Digests(*allowed);
  if (!forbidden.empty()) r["forbidden"] = Digests(forbidden);
  return r;
}

}  // namespace

std::string FormatBootPolicyJson(const attest::BootPolicy& p) {
  ojson doc = ojson::object();
  doc["version"] = kBootPolicyVersion;
  ojson pcrs = ojson::object();
  for (auto bank = p.pcrs.rbegin(); bank != p.pcrs.rend(); ++bank) {
    if (bank->second.empty()) continue;
    ojson values = ojson::object();
    for (const auto& [pcr, value] : bank->second) values[std::to_string(pcr)] = hex::Encode(value);
    pcrs[HashAlgName(bank->first)] = std::move(values);
  }
  if (!pcrs.empty()) doc["pcrs"] = std::move(pcrs);
  if (p.require_secure_boot) doc["require_secure_boot"] = true;
  if (p.require_separators) doc["require_separators"] = true;
  if (ojson r = DigestRule(p.allowed_boot_applications, p.forbidden_boot_applications);
      !r.is_null()) {
    doc["boot_applications"] = std::move(r);
  }
  if (ojson r = DigestRule(p.allowed_authorities, p.forbidden_authorities); !r.is_null()) {
    doc["authorities"] = std::move(r);
  }
  if (ojson r = DigestRule(p.allowed_boot_files, p.forbidden_boot_files); !r.is_null()) {
    doc["boot_files"] = std::move(r);
  }
  if (p.kernel_cmdline) {
    // Written as it is, even when it sets nothing (which the parser
    // refuses): the writer never turns a rule into no rule.
    const attest::KernelCmdlinePolicy& k = *p.kernel_cmdline;
    ojson r = ojson::object();
    if (k.exact) r["exact"] = *k.exact;
    if (!k.required.empty()) r["required"] = SortedArray(std::set<std::string>(k.required.begin(), k.required.end()));
    if (!k.forbidden.empty()) {
      r["forbidden"] = SortedArray(std::set<std::string>(k.forbidden.begin(), k.forbidden.end()));
    }
    doc["kernel_cmdline"] = std::move(r);
  }
  if (p.uki) {
    ojson sections = ojson::object();
    for (const auto& [name, digests] : p.uki->sections) sections[name] = Digests(digests);
    doc["uki"] = ojson{{"sections", std::move(sections)}};
  }
  if (p.secure_boot_db) {
    const attest::SecureBootDbPolicy& s = *p.secure_boot_db;
    const bool db = !s.db_required_certificates.empty() || !s.db_forbidden_certificates.empty();
    const bool dbx = !s.dbx_required_hashes.empty();
    // A set rule with all three lists empty is still written, as "db" with
    // its two (empty) lists, so that it is not silently dropped.
    if (db || !dbx) {
      doc["db"] = ojson{{"required", Sha256List(s.db_required_certificates)},
                        {"forbidden", Sha256List(s.db_forbidden_certificates)}};
    }
    if (dbx) doc["dbx"] = ojson{{"required", Sha256List(s.dbx_required_hashes)}};
  }
  if (p.uki_signed) {
    std::set<std::string> keys;
    for (const Bytes& der : p.uki_signed->public_keys) keys.insert(Pem(der));
    doc["uki_signed"] = ojson{{"public_keys", SortedArray(keys)}};
  }
  std::map<uint16_t, std::set<uint32_t>> tofu;
  for (const attest::PcrSelection& sel : p.tofu) {
    tofu[sel.hash_alg].insert(sel.pcrs.begin(), sel.pcrs.end());
  }
  if (!tofu.empty()) {
    ojson t = ojson::object();
    for (auto bank = tofu.rbegin(); bank != tofu.rend(); ++bank) {
      t[HashAlgName(bank->first)] = ojson(std::vector<uint32_t>(bank->second.begin(),
                                                                bank->second.end()));
    }
    doc["tofu"] = std::move(t);
  }
  // A command line that is not UTF-8 cannot be JSON; its bytes are replaced
  // (U+FFFD) rather than throw. Such a rule then matches no machine, which
  // fails closed.
  return doc.dump(2, ' ', /*ensure_ascii=*/false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace rackgate::wire
