// The reason registry, built from wire/reasons.def.
#include "wire/reasons.h"

#include <array>
#include <unordered_map>

namespace rackgate::wire {

namespace {

using enum ReasonAudience;
using enum ReasonRetry;

constexpr ReasonInfo kRows[] = {
#define REASON(name, code, machine, admin, retry, audience, meaning) \
  {#name, Status::Code::code, machine, admin, retry, audience, meaning},
#include "wire/reasons.def"
#undef REASON
};

}  // namespace

std::span<const ReasonInfo> Reasons() { return kRows; }

const ReasonInfo* FindReason(std::string_view name) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string_view, const ReasonInfo*>;
    for (const ReasonInfo& row : kRows) m->emplace(row.name, &row);
    return m;
  }();
  auto it = index->find(name);
  return it == index->end() ? nullptr : it->second;
}

}  // namespace rackgate::wire
