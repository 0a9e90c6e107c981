// The `systemd-measure sign` document: a strict, bounded reader
// (wire/pcr_signature_json.h).
#include "wire/pcr_signature_json.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "attest/tpm.h"
#include "base/json_depth.h"
#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::wire {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxDepth = 4;  // {bank: [{pcrs: [..]}]}
constexpr uint64_t kMaxPcr = 23;
constexpr size_t kFingerprintBytes = 32;  // SHA-256
constexpr size_t kPolicyDigestBytes = 32;  // sha256 policy session

struct Malformed {
  std::string message;
};

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw Malformed{where + ": " + what};
}

attest::Bytes HexField(const json& entry, const char* name, size_t size, const std::string& where) {
  const std::string w = where + "." + name;
  if (!entry.contains(name)) Fail(where, std::string("missing \"") + name + "\"");
  const json& v = entry.at(name);
  if (!v.is_string()) Fail(w, "must be a string");
  auto bytes = hex::Decode(v.get<std::string>(), size);
  if (!bytes || bytes->size() != size) Fail(w, "must be " + std::to_string(2 * size) + " hex digits");
  return *std::move(bytes);
}

attest::PcrSignature ReadEntry(const json& entry, uint16_t bank, const std::string& where) {
  if (!entry.is_object()) Fail(where, "must be an object");
  attest::PcrSignature s;
  s.bank = bank;
  if (!entry.contains("pcrs")) Fail(where, "missing \"pcrs\"");
  const json& pcrs = entry.at("pcrs");
  if (!pcrs.is_array() || pcrs.empty() || pcrs.size() > kMaxPcr + 1) {
    Fail(where + ".pcrs", "must be a non-empty array of PCR indices");
  }
  std::set<uint32_t> seen;
  for (const json& pcr : pcrs) {
    if (!pcr.is_number_unsigned() || pcr.get<uint64_t>() > kMaxPcr) {
      Fail(where + ".pcrs", "PCR indices are integers 0.." + std::to_string(kMaxPcr));
    }
    const uint32_t index = pcr.get<uint32_t>();
    if (!seen.insert(index).second) Fail(where + ".pcrs", "names a PCR twice");
    s.pcrs.push_back(index);
  }
  s.key_fingerprint = HexField(entry, "pkfp", kFingerprintBytes, where);
  s.policy_digest = HexField(entry, "pol", kPolicyDigestBytes, where);
  if (!entry.contains("sig")) Fail(where, "missing \"sig\"");
  const json& sig = entry.at("sig");
  if (!sig.is_string()) Fail(where + ".sig", "must be a string");
  auto decoded = Base64Decode(sig.get<std::string>(), kMaxPcrSignatureBytes);
  if (!decoded || decoded->empty()) {
    Fail(where + ".sig", "must be base64 of 1.." + std::to_string(kMaxPcrSignatureBytes) + " bytes");
  }
  s.signature = *std::move(decoded);
  return s;
}

}  // namespace

Result<std::vector<attest::PcrSignature>> ParsePcrSignatureJson(std::string_view text) {
  try {
    if (text.size() > kMaxPcrSignatureSize) {
      Fail("pcr signature", "larger than " + std::to_string(kMaxPcrSignatureSize) + " bytes");
    }
    if (JsonDepth(text) > kMaxDepth) Fail("pcr signature", "nested too deeply");
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) Fail("pcr signature", "not valid JSON");
    if (!j.is_object()) Fail("pcr signature", "must be an object of banks");
    std::vector<attest::PcrSignature> out;
    for (const auto& bank : j.items()) {
      const std::string where = "pcr signature." + bank.key().substr(0, 16);
      const uint16_t alg = attest::HashAlgFromName(bank.key());
      if (alg == attest::kAlgNull) Fail(where, "unknown bank");
      if (!bank.value().is_array()) Fail(where, "must be an array of entries");
      for (size_t i = 0; i < bank.value().size(); ++i) {
        if (out.size() == kMaxPcrSignatureEntries) {
          Fail("pcr signature", "more than " + std::to_string(kMaxPcrSignatureEntries) + " entries");
        }
        out.push_back(ReadEntry(bank.value().at(i), alg, where + "[" + std::to_string(i) + "]"));
      }
    }
    return out;
  } catch (const Malformed& m) {
    return Status::InvalidArgument("pcr_signature_malformed", m.message);
  } catch (const json::exception& e) {
    // Every read is type-checked first; this is a bug guard, not a path.
    return Status::InvalidArgument("pcr_signature_malformed", std::string("pcr signature: ") + e.what());
  }
}

}  // namespace rackgate::wire
