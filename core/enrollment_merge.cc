// The merge of an operator's enrollment into the stored machine, and the
// changes in words.
#include "core/enrollment_merge.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

namespace rackgate::core {

namespace {

using nlohmann::json;
using storage::Address;
using storage::Enrollment;
using storage::Machine;

// A vars text as a JSON object; `stored` says whether it came from the
// database (then a broken one is corruption, not the caller's mistake).
Result<json> VarsObject(const std::string& text, bool stored) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (stored) return Status::Corruption("db_corrupt", "a machine's stored vars are not a JSON object");
    return Status::InvalidArgument("field_invalid", "vars must be a JSON object");
  }
  return j;
}

std::string AddressText(const Address& a) { return a.kind + "=" + a.value; }

// The machine as it will be (MergeEnrollment's first half).
Result<Enrollment> Resolve(const Machine* old, const Enrollment& in, const EnrollFields& f) {
  Enrollment d = in;
  if (!f.pool) d.pool = old ? old->pool : std::string();
  std::vector<Address> addresses;
  if (old && !(f.addresses && f.replace_addresses)) addresses = old->addresses;
  if (f.addresses) addresses.insert(addresses.end(), in.addresses.begin(), in.addresses.end());
  d.addresses = storage::NormalizeAddresses(std::move(addresses));
  json vars = json::object();
  if (old && !(f.vars && f.replace_vars)) {
    auto stored = VarsObject(old->vars_json, true);
    if (!stored.ok()) return stored.status();
    vars = std::move(stored).value();
  }
  if (f.vars) {
    auto given = VarsObject(in.vars_json, false);
    if (!given.ok()) return given.status();
    for (const auto& [k, v] : given->items()) vars[k] = v;
  }
  for (const auto& name : f.unset_vars) vars.erase(name);
  d.vars_json = vars.dump();
  if (!f.policy) d.policy_json = old ? old->policy_json : std::nullopt;
  return d;
}

// "vars +new ~changed -gone": names only, since a template value may be
// something an operator would not want in every terminal and log the answer
// reaches. "" when the sets are equal.
std::string VarsWords(const json& old_vars, const json& new_vars) {
  if (old_vars == new_vars) return "";
  std::string w = "vars";
  for (const auto& [k, v] : new_vars.items()) {
    if (!old_vars.contains(k)) {
      w += " +" + k;
    } else if (old_vars.at(k) != v) {
      w += " ~" + k;
    }
  }
  for (const auto& [k, v] : old_vars.items()) {
    if (!new_vars.contains(k)) w += " -" + k;
  }
  return w;
}

// The changes from `old` to `d` (MergeEnrollment's second half).
Status Diff(const Machine& old, const Enrollment& d, storage::MachineState state, storage::MergedEnrollment* out) {
  const auto add = [out](std::string words, const char* field) {
    out->changes.push_back(std::move(words));
    out->changed.push_back(field);
  };
  if (old.pool != d.pool) add("pool " + old.pool + " -> " + d.pool, "pool");
  if (old.addresses != d.addresses) {
    std::string w = "addresses";
    for (const auto& a : d.addresses) {
      if (std::find(old.addresses.begin(), old.addresses.end(), a) == old.addresses.end()) w += " +" + AddressText(a);
    }
    for (const auto& a : old.addresses) {
      if (std::find(d.addresses.begin(), d.addresses.end(), a) == d.addresses.end()) w += " -" + AddressText(a);
    }
    add(std::move(w), "addresses");
  }
  auto old_vars = VarsObject(old.vars_json, true);
  if (!old_vars.ok()) return old_vars.status();
  auto new_vars = VarsObject(d.vars_json, false);
  if (!new_vars.ok()) return new_vars.status();
  if (std::string w = VarsWords(*old_vars, *new_vars); !w.empty()) add(std::move(w), "vars");
  if (old.policy_json != d.policy_json) {
    add(!old.policy_json ? "policy set" : !d.policy_json ? "policy cleared" : "policy replaced", "policy");
  }
  if (d.ek_certificate && (old.ek_certificate != d.ek_certificate || old.tpm_manufacturer != d.tpm_manufacturer ||
                           old.tpm_model != d.tpm_model || old.tpm_version != d.tpm_version)) {
    add("ek_certificate updated", "ek_certificate");
  }
  if (state != old.state) {
    add("state " + std::string(storage::StateName(old.state)) + " -> " + std::string(storage::StateName(state)),
        "state");
  }
  return Status::Ok();
}

}  // namespace

Result<storage::MergedEnrollment> MergeEnrollment(const Enrollment& given, const EnrollFields& fields,
                                                  const Machine* stored, storage::MachineState state) {
  if (stored == nullptr && (!fields.pool || given.pool.empty())) {
    return Status::InvalidArgument("field_missing", "'" + given.hostname +
                                                        "' is not enrolled yet: a new machine needs a pool (--pool)");
  }
  auto resolved = Resolve(stored, given, fields);
  if (!resolved.ok()) return resolved.status();
  storage::MergedEnrollment out{std::move(resolved).value(), {}, {}};
  if (stored != nullptr) {
    if (Status s = Diff(*stored, out.enrollment, state, &out); !s.ok()) return s;
  }
  return out;
}

}  // namespace rackgate::core
