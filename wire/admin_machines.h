// The admin API's machine bodies (docs/operations.md, docs/inventory.md,
// docs/lifecycle.md) as typed values with an encoder and a decoder:
// POST/GET /v1/admin/machines, POST /v1/admin/import, GET, DELETE and the
// approve, revoke, reset and rename POSTs of /v1/admin/machines/{hostname}.
// rackgated and rackgatectl both go through these. Decoding fails as
// wire/admin_pools.h says; JSON values the appliance keeps as documents
// (vars, boot policy) travel as their compact JSON text, checked by the core.
#ifndef RACKGATE_WIRE_ADMIN_MACHINES_H_
#define RACKGATE_WIRE_ADMIN_MACHINES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::wire {

// A Kubernetes NodeAddress: {"kind": ..., "value": ...}.
struct AddressView {
  std::string kind;
  std::string value;
  bool operator==(const AddressView&) const = default;
};

// A machine's last provisioning report (docs/trust.md).
struct MachineReportView {
  int64_t at = 0;
  std::string outcome;  // ok or failed
  std::string step;
  std::string reason;
  std::string message;
  int64_t exit_status = 0;
  std::vector<std::string> done;
  bool operator==(const MachineReportView&) const = default;
};

// A machine's newest good attestation: the baseline of its TPM's counters.
struct MachineAttestationView {
  int64_t at = 0;
  uint64_t reset_count = 0;
  uint64_t restart_count = 0;
  uint64_t clock = 0;
  bool operator==(const MachineAttestationView&) const = default;
};

// A machine as the admin API answers it.
struct MachineView {
  std::string hostname;
  std::string pool;
  std::string state;
  std::string ek_hash;  // hex
  bool has_ek_certificate = false;
  std::string tpm_manufacturer;
  std::string tpm_model;
  std::string tpm_version;
  std::vector<AddressView> addresses;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  bool has_policy = false;
  std::string vars_json = "{}";  // a JSON object's text
  std::optional<int64_t> last_attested_at;  // absent when never
  std::optional<int64_t> client_cert_issued_at;
  // Trust (docs/trust.md): "" is null, "never attested, no verdict yet".
  std::string trust;
  std::string trust_reason;
  std::optional<int64_t> trust_changed_at;  // null when never judged
  // GET /v1/admin/machines and .../{hostname} only (with_last_report): the
  // last provisioning report, null when none.
  bool with_last_report = false;
  std::optional<MachineReportView> last_report;
  // GET .../{hostname} only, when the machine ever attested.
  std::optional<MachineAttestationView> last_attestation;
  // DELETE .../{hostname}: true (the machine as it was); rename: the old name.
  bool deleted = false;
  std::optional<std::string> renamed_from;
  bool operator==(const MachineView&) const = default;
};
std::string EncodeMachineView(const MachineView& m);
Result<MachineView> DecodeMachineView(std::string_view body);

// GET /v1/admin/machines: {"machines": [...]}.
std::string EncodeMachineList(const std::vector<MachineView>& machines);
Result<std::vector<MachineView>> DecodeMachineList(std::string_view body);

// POST /v1/admin/machines (docs/protocol.md, "Enroll"), and one row of an
// import. A field absent from the body is kept from the enrolled machine:
// each optional here is nullopt when absent. Lenient as the appliance
// always was: a hostname, pool or EK field that is not a string reads as
// "", and a flag that is not true or false as false.
struct EnrollRequest {
  std::string hostname;
  std::optional<std::string> pool;
  std::optional<std::string> ek_public_base64;  // TPM2B_PUBLIC
  std::optional<std::string> ek_certificate_base64;  // DER
  std::optional<std::vector<AddressView>> addresses;
  // "policy": given with a JSON value's text, or given as null (cleared).
  bool policy_given = false;
  std::optional<std::string> policy_json;
  // "vars": given with a JSON value's text (the core checks it is an object
  // of strings), or given as null.
  bool vars_given = false;
  std::optional<std::string> vars_json;
  // The enroll call's own fields (an import row has none).
  std::vector<std::string> unset_vars;
  bool replace_addresses = false;
  bool replace_vars = false;
  bool clear_policy = false;
  bool replace_ek = false;
  bool operator==(const EnrollRequest&) const = default;
};
std::string EncodeEnrollRequest(const EnrollRequest& r);
// field_invalid: addresses not a list of objects, unset_vars not a list of
// strings.
Result<EnrollRequest> DecodeEnrollRequest(std::string_view body);

// The answer to an enroll: the machine, what was done (created, updated,
// unchanged, replaced_ek), the changes in words and a one-line summary.
struct EnrollAnswer {
  MachineView machine;
  std::string outcome;
  std::vector<std::string> changes;
  std::string summary;
  bool operator==(const EnrollAnswer&) const = default;
};
std::string EncodeEnrollAnswer(const EnrollAnswer& a);
Result<EnrollAnswer> DecodeEnrollAnswer(std::string_view body);

// One row of POST /v1/admin/import: the machine, and where it came from
// (rackgatectl sends the inventory's line, and for a JSON inventory the
// row's index).
struct ImportRowRequest {
  EnrollRequest machine;
  std::optional<int64_t> line;
  std::optional<int64_t> row;
  bool operator==(const ImportRowRequest&) const = default;
};
// Where a row came from, for every refusal: "row R (line L)", "line L", or
// "machines[INDEX]" (its place in the body).
std::string ImportRowWhere(const ImportRowRequest& row, size_t index);

// POST /v1/admin/import: {"machines": [...], "dry_run": BOOL}.
struct ImportRequest {
  bool dry_run = false;
  std::vector<ImportRowRequest> rows;
  bool operator==(const ImportRequest&) const = default;
};
std::string EncodeImportRequest(const ImportRequest& r);
// Streamed: each row of "machines" is decoded and handed to `row` (with its
// index) as soon as it is parsed, and its JSON dropped, so an inventory's
// JSON tree is never held whole. Once a row is refused (by `row`, or here:
// a row that is not an object, field_invalid naming ImportRowWhere and the
// row's hostname) no later row is handed. Answers, in this order: bad_json
// (not a JSON object), field_missing (machines is not a list),
// field_invalid (machines given twice), the refused row's status,
// field_invalid (dry_run not true or false); else the request's dry_run
// (ImportRequest::rows stays empty).
using ImportRowSink = std::function<Status(ImportRowRequest row, size_t index)>;
Result<ImportRequest> DecodeImportRequest(std::string_view body, const ImportRowSink& row);

// The import's answer.
struct ImportRowOutcomeView {
  std::string where;
  std::string hostname;
  std::string outcome;
  std::vector<std::string> changes;
  bool operator==(const ImportRowOutcomeView&) const = default;
};
struct ImportAnswer {
  int64_t imported = 0;  // 0 for a dry run
  bool dry_run = false;
  int64_t created = 0;
  int64_t updated = 0;
  int64_t unchanged = 0;
  std::vector<ImportRowOutcomeView> rows;
  bool operator==(const ImportAnswer&) const = default;
};
std::string EncodeImportAnswer(const ImportAnswer& a);
Result<ImportAnswer> DecodeImportAnswer(std::string_view body);

// POST /v1/admin/machines/{hostname}/approve: what the operator sets as the
// pending machine is approved; absent fields keep the machine's. An empty
// body approves as recorded.
struct ApprovalRequest {
  std::optional<std::string> hostname;
  std::optional<std::string> pool;
  std::optional<std::vector<AddressView>> addresses;
  std::optional<std::string> vars_json;  // a JSON value's text; the core checks it
  std::string reason;
  bool operator==(const ApprovalRequest&) const = default;
};
std::string EncodeApprovalRequest(const ApprovalRequest& r);
// field_invalid: hostname or pool not a string, addresses not a list of
// objects.
Result<ApprovalRequest> DecodeApprovalRequest(std::string_view body);

// The body of revoke, reset and DELETE: {"reason": TEXT}, optional (an
// empty body has no reason; a reason that is not a string reads as none);
// reset's may add "unrevoke": true (anything else reads as false).
struct ReasonRequest {
  std::string reason;
  bool unrevoke = false;
  bool operator==(const ReasonRequest&) const = default;
};
std::string EncodeReasonRequest(const ReasonRequest& r);
Result<ReasonRequest> DecodeReasonRequest(std::string_view body);

// POST /v1/admin/machines/{hostname}/rename: {"hostname": NEW, "reason"}.
// A body is required (bad_json); a new name that is not a string reads as
// "" (which the core refuses).
struct RenameRequest {
  std::string hostname;
  std::string reason;
  bool operator==(const RenameRequest&) const = default;
};
std::string EncodeRenameRequest(const RenameRequest& r);
Result<RenameRequest> DecodeRenameRequest(std::string_view body);

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_ADMIN_MACHINES_H_
