// The carried attestation's file: JSON, 0600, read once.
#include "agent/session.h"

#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/hex.h"
#include "wire/codec.h"

namespace rackgate::agent {

namespace {

using json = nlohmann::json;

constexpr int kSessionVersion = 1;
// A TPM2B_PUBLIC or TPM2B_PRIVATE is well under this.
constexpr size_t kMaxBlobBytes = 2048;
constexpr size_t kMaxNonceBytes = 64;

Status Malformed(const std::string& what) {
  return Status::InvalidArgument("session_malformed", "session file: " + what);
}

const char* AkAlgName(AkAlg a) { return a == AkAlg::kRsa ? "rsa" : "ecc"; }

}  // namespace

std::string EncodeSession(const CarriedSession& s) {
  const json doc = {
      {"version", kSessionVersion},
      {"token", json::parse(wire::EncodeToken(s.token))},
      {"expires_at", static_cast<long long>(s.expires_at)},
      {"machine", s.machine},
      {"ek", EkKindName(s.ek)},
      {"config_fetched", s.config_fetched},
      {"nonce", hex::Encode(s.nonce)},
      {"ak_alg", AkAlgName(s.ak_alg)},
      {"ak_public", wire::Base64Encode(s.ak.tpm2b_public)},
      {"ak_private", wire::Base64Encode(s.ak.tpm2b_private)},
  };
  return doc.dump();
}

Result<CarriedSession> DecodeSession(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Malformed("not a JSON object");
  auto str = [&](const char* key) -> const std::string* {
    return doc.contains(key) && doc.at(key).is_string() ? doc.at(key).get_ptr<const std::string*>() : nullptr;
  };
  if (!doc.contains("version") || !doc.at("version").is_number_integer() ||
      doc.at("version").get<long long>() != kSessionVersion) {
    return Malformed("version is not 1");
  }
  CarriedSession s;
  if (!doc.contains("token") || !doc.at("token").is_object()) return Malformed("no token");
  auto token = wire::DecodeToken(doc.at("token").dump());
  // The decoder's message names a field, never the token's value.
  if (!token.ok()) return Malformed("token: " + token.status().message());
  s.token = std::move(token).value();
  if (!doc.contains("expires_at") || !doc.at("expires_at").is_number_integer()) return Malformed("no expires_at");
  s.expires_at = static_cast<std::time_t>(doc.at("expires_at").get<long long>());
  const std::string* machine = str("machine");
  // It goes into every log line: the hex prefix of the EK's identity only.
  if (!machine || machine->empty() || machine->size() > 64 || !hex::IsLowerHex(*machine)) {
    return Malformed("machine is not a hex EK identity prefix");
  }
  s.machine = *machine;
  const std::string* ek = str("ek");
  auto kind = ek ? EkKindFromName(*ek) : std::nullopt;
  if (!kind) return Malformed("ek is not an EK kind");
  s.ek = *kind;
  if (!doc.contains("config_fetched") || !doc.at("config_fetched").is_boolean()) return Malformed("no config_fetched");
  s.config_fetched = doc.at("config_fetched").get<bool>();
  const std::string* nonce = str("nonce");
  auto nonce_bytes = nonce ? hex::Decode(*nonce, kMaxNonceBytes) : std::nullopt;
  if (!nonce_bytes || nonce_bytes->empty()) return Malformed("nonce is not hex");
  s.nonce = std::move(*nonce_bytes);
  const std::string* ak_alg = str("ak_alg");
  if (!ak_alg || (*ak_alg != "rsa" && *ak_alg != "ecc")) return Malformed("ak_alg is not rsa or ecc");
  s.ak_alg = *ak_alg == "rsa" ? AkAlg::kRsa : AkAlg::kEcc;
  for (auto [key, out] : {std::pair{"ak_public", &s.ak.tpm2b_public}, std::pair{"ak_private", &s.ak.tpm2b_private}}) {
    const std::string* b64 = str(key);
    auto bytes = b64 ? wire::Base64Decode(*b64, kMaxBlobBytes) : std::nullopt;
    if (!bytes || bytes->empty()) return Malformed(std::string(key) + " is not base64");
    *out = std::move(*bytes);
  }
  return s;
}

Status CheckSessionLife(const CarriedSession& s, std::time_t now) {
  const std::time_t left = s.expires_at - now;
  if (left < kMinSessionLifeSeconds) {
    return Status::InvalidArgument("session_expiring", "the carried token has " + std::to_string(left) +
                                                           "s left, under the " +
                                                           std::to_string(kMinSessionLifeSeconds) + "s a run needs");
  }
  return Status::Ok();
}

Status WriteSession(const std::string& path, const CarriedSession& s) {
  std::string text = EncodeSession(s);
  const Status st = WriteFileAtomic(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  OPENSSL_cleanse(text.data(), text.size());
  return st;
}

Result<CarriedSession> TakeSession(const std::string& path, std::time_t now) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return Status::NotFound("session_missing", path + ": no session file");
  }
  auto bytes = ReadFile(path, kMaxSessionBytes);
  // Removed whatever was read: a token is for one run, and a broken file
  // must not be tried again by the next.
  ::unlink(path.c_str());
  if (!bytes.ok()) return bytes.status();
  auto s = DecodeSession(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
  OPENSSL_cleanse(bytes->data(), bytes->size());
  if (!s.ok()) return s.status();
  if (Status life = CheckSessionLife(*s, now); !life.ok()) return life;
  return s;
}

}  // namespace rackgate::agent
