// Provisioning reports: authenticate, store the last one, log it.
#include "core/report_service.h"

#include "base/log.h"

namespace rackgate::core {

namespace {

std::shared_ptr<spdlog::logger> Log() {
  static const auto log = Logger("report");
  return log;
}

}  // namespace

Status ReportService::Record(const std::optional<std::string>& bearer_token,
                             const Result<wire::ProvisioningReport>& report) {
  // The token first: an anonymous caller learns nothing about the body.
  auto auth = attestation_->Authenticate(bearer_token);
  if (!auth.ok()) {
    Log()->warn("report refused: {}", auth.status().reason());
    return auth.status();
  }
  const storage::Machine& m = auth->machine;
  if (!report.ok()) {
    Log()->warn("report from {} refused: {} ({})", m.hostname, report.status().reason(), report.status().message());
    return report.status();
  }
  storage::ProvisioningReportRecord r;
  r.machine_id = m.id;
  r.at = attestation_->Now();
  r.outcome = report->outcome;
  r.step = report->step;
  r.reason = report->reason;
  r.message = report->message;
  r.exit_status = report->exit_status;
  r.done = report->done;
  if (Status s = store_->RecordReport(r); !s.ok()) {
    if (s.code() == Status::Code::kInvalidArgument) return s;
    Log()->error("report from {} not stored: {}", m.hostname, s.ToString());
    return StoreBusy(s);
  }
  // The message is the agent's text: the log sink escapes it, and the wire
  // decoder kept it printable; it is quoted so that it reads as one field.
  if (r.outcome == "ok") {
    Log()->info("report from {}: ok after {} (exit {})", m.hostname, r.step, r.exit_status);
  } else {
    Log()->warn("report from {}: failed at {}: {} \"{}\" (exit {})", m.hostname, r.step, r.reason, r.message,
                r.exit_status);
  }
  return Status::Ok();
}

}  // namespace rackgate::core
