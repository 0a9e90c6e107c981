// Provisioning reports: each machine's last one, replaced by the next
// (docs/trust.md, "Provisioning reports"). Not a state change: no audit row.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "storage/rows.h"
#include "storage/sql_store.h"
#include "storage/validation.h"

namespace rackgate::storage {

namespace {

// The wire's bounds (wire::kMaxReportMessage and friends), kept here too so
// that the store never grows with a careless caller.
constexpr size_t kMaxReportName = 64;
constexpr size_t kMaxReportMessage = 512;
constexpr size_t kMaxReportDone = 16;

constexpr char kReportSelect[] =
    "SELECT r.machine_id, m.hostname, r.at, r.outcome, r.step, r.reason, r.message, r.exit_status, r.done_json "
    "FROM machine_reports r JOIN machines m ON m.id = r.machine_id ";

ProvisioningReportRecord ReadReport(const Stmt& s) {
  ProvisioningReportRecord r;
  r.machine_id = s.Int(0);
  r.hostname = s.Text(1);
  r.at = s.Int(2);
  r.outcome = s.Text(3);
  r.step = s.Text(4);
  r.reason = s.Text(5);
  r.message = s.Text(6);
  r.exit_status = static_cast<int>(s.Int(7));
  r.done = StringList(s.Text(8));
  return r;
}

}  // namespace

Status SqlStore::RecordReport(const ProvisioningReportRecord& report) {
  return Guard([&]() -> Status {
    if (report.outcome != "ok" && report.outcome != "failed") {
      return Status::InvalidArgument("field_invalid", "a report's outcome is ok or failed");
    }
    CheckSize("report step", report.step.size(), 1, kMaxReportName);
    CheckSize("report reason", report.reason.size(), 0, kMaxReportName);
    CheckSize("report message", report.message.size(), 0, kMaxReportMessage);
    CheckSize("report done", report.done.size(), 0, kMaxReportDone);
    for (const auto& d : report.done) CheckSize("report done name", d.size(), 1, kMaxReportName);
    if (report.exit_status < 0 || report.exit_status > 255) {
      return Status::InvalidArgument("field_invalid", "a report's exit status is 0..255");
    }
    db_->Write([&](Connection& c) {
      MustMachineById(c, report.machine_id);
      Stmt s = c.Prepare(
          "INSERT INTO machine_reports (machine_id, at, outcome, step, reason, message, exit_status, done_json) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (machine_id) DO UPDATE SET at = excluded.at, "
          "outcome = excluded.outcome, step = excluded.step, reason = excluded.reason, message = excluded.message, "
          "exit_status = excluded.exit_status, done_json = excluded.done_json");
      s.BindInt(1, report.machine_id)
          .BindInt(2, report.at)
          .BindText(3, report.outcome)
          .BindText(4, report.step)
          .BindText(5, report.reason)
          .BindText(6, report.message)
          .BindInt(7, report.exit_status)
          .BindText(8, Dump(json(report.done)))
          .Run();
      return true;
    });
    return Status::Ok();
  });
}

Result<ProvisioningReportRecord> SqlStore::LastReport(int64_t machine_id) {
  return Guard([&]() -> Result<ProvisioningReportRecord> {
    return db_->Read([&](Connection& c) -> ProvisioningReportRecord {
      Stmt s = c.Prepare(std::string(kReportSelect) + "WHERE r.machine_id = ?1");
      s.BindInt(1, machine_id);
      if (!s.Step()) Fail(Status::NotFound("report_unknown", "the machine has not reported"));
      return ReadReport(s);
    });
  });
}

Result<std::map<int64_t, ProvisioningReportRecord>> SqlStore::ListLastReports() {
  return Guard([&]() -> Result<std::map<int64_t, ProvisioningReportRecord>> {
    return db_->Read([&](Connection& c) {
      std::map<int64_t, ProvisioningReportRecord> out;
      Stmt s = c.Prepare(kReportSelect);
      while (s.Step()) {
        ProvisioningReportRecord r = ReadReport(s);
        out.emplace(r.machine_id, std::move(r));
      }
      return out;
    });
  });
}

}  // namespace rackgate::storage
