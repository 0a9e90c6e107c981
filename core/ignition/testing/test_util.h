// Helpers shared by the tests of core/ignition/: versions, template builders, placeholder values.
#ifndef RACKGATE_CORE_IGNITION_TESTING_TEST_UTIL_H_
#define RACKGATE_CORE_IGNITION_TESTING_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "core/ignition.h"
#include "wire/codec.h"

namespace rackgate::core::ignition {

using nlohmann::json;

inline constexpr SpecVersion k300{3, 0, 0};
inline constexpr SpecVersion k310{3, 1, 0};
inline constexpr SpecVersion k320{3, 2, 0};
inline constexpr SpecVersion k330{3, 3, 0};

inline std::string V(SpecVersion v) { return FormatSpecVersion(v); }

inline json Config(std::string_view text) { return json::parse(text); }

// The test's own decoder, so that a round trip does not trust the code under
// test twice.
inline std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

inline std::string B64(std::string_view s) {
  return wire::Base64Encode(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

// A template of the given version with `body` spliced in after "ignition".
inline std::string Tmpl(std::string_view body, std::string_view version = "3.3.0") {
  std::string out = R"({"ignition":{"version":")" + std::string(version) + "\"}";
  if (!body.empty()) out += "," + std::string(body);
  return out + "}";
}

inline std::string FileAt(std::string_view path, std::string_view extra = "") {
  std::string f = R"({"path":")" + std::string(path) + "\"";
  if (!extra.empty()) f += "," + std::string(extra);
  return Tmpl(R"("storage":{"files":[)" + f + "}]}");
}

struct Refusal {
  std::string name;
  std::string text;
  std::string reason;
  std::string in_message;  // the pointer or words the message must name
};

inline void ExpectRefused(const Refusal& r, TemplateKind kind) {
  Result<Template> t = ParseTemplate(r.text, kind);
  ASSERT_FALSE(t.ok()) << r.name << " was accepted";
  EXPECT_EQ(t.status().reason(), r.reason) << r.name << ": " << t.status().ToString();
  EXPECT_EQ(t.status().code(), Status::Code::kInvalidArgument) << r.name;
  EXPECT_NE(t.status().message().find(r.in_message), std::string::npos)
      << r.name << ": " << t.status().message();
}

inline Values PublicValues() {
  return Values{
      {{"pool", "workers"},
       {"appliance.url", "https://rackgate.lab:22623"},
       {"appliance.ca_pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}}};
}

inline Values AttestedValues() {
  Values v = PublicValues();
  v.values["hostname"] = "node-1.lab";
  v.values["machine.rack"] = "r 12/b?&=%";
  v.values["address.InternalIP"] = "10.0.0.7";
  v.values["ek_hash"] = "ab01";
  return v;
}

inline std::string SourceOf(const json& config, size_t file) {
  return config.at("storage").at("files").at(file).at("contents").at("source").get<std::string>();
}

}  // namespace rackgate::core::ignition

#endif  // RACKGATE_CORE_IGNITION_TESTING_TEST_UTIL_H_
