// How an operator's enrollment merges into the machine already enrolled
// under its hostname (docs/inventory.md; docs/protocol.md, "Enroll"): which
// fields are given, what is kept, and the changes in words. The store calls
// the merge inside its write transaction (storage::EnrollMerge), so the read
// of the stored machine, the merge and the write are one.
#ifndef RACKGATE_CORE_ENROLLMENT_MERGE_H_
#define RACKGATE_CORE_ENROLLMENT_MERGE_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "storage/types.h"

namespace rackgate::core {

// Which of an Enrollment's fields the caller gives. What is not given is kept
// from the machine enrolled under the hostname (a new machine starts with
// none). The defaults give everything and replace everything: an import
// row's declarative desired state.
struct EnrollFields {
  bool pool = true;                // e.pool replaces (a new machine needs one)
  bool addresses = true;           // e.addresses are given ...
  bool replace_addresses = true;   // ... and replace the list; false: added to it
  bool vars = true;                // e.vars_json (an object of strings) is given ...
  bool replace_vars = true;        // ... and replaces the set; false: merged by name
  std::vector<std::string> unset_vars;  // names removed (after the merge)
  bool policy = true;              // e.policy_json replaces (nullopt: cleared)
};

// The machine as it will be: `given`'s fields where `fields` gives them,
// `stored`'s elsewhere (nullptr: no machine has the hostname yet), its
// addresses sorted and its vars a compact JSON object; and, against `stored`
// in `state` (what the store's rules make of it), the changes in words
// ("pool a -> b", "addresses +InternalIP=10.0.0.6 -InternalIP=10.0.0.5",
// "vars +rack ~role -old" (names only: values stay out of answers and logs),
// "policy set", "policy cleared", "policy replaced", "ek_certificate
// updated", "state pending -> enrolled") with the changed fields' names.
// Refusals: field_missing (a new machine without a pool), field_invalid
// (the given vars are not a JSON object), db_corrupt (kCorruption: the
// stored vars are not one).
Result<storage::MergedEnrollment> MergeEnrollment(const storage::Enrollment& given, const EnrollFields& fields,
                                                  const storage::Machine* stored, storage::MachineState state);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_ENROLLMENT_MERGE_H_
