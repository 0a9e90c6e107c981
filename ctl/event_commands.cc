// rackgatectl events over the admin API (wire/admin_events.h,
// core/event_service.h): webhook events and their deliveries
// (docs/events.md).
#include "ctl/commands.h"

#include <string>

#include "base/utc_time.h"
#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/command_line.h"
#include "wire/admin_events.h"
#include "wire/admin_query.h"

namespace rackgate::ctl {

namespace {

constexpr char kEventsHelp[] =
    "Usage: rackgatectl events [--pending] [--limit N] [--json]\n"
    "\n"
    "The newest webhook events, newest first, with each webhook's delivery:\n"
    "delivered, or the attempts so far, the next one and the last error.\n"
    "\n"
    "Options:\n"
    "  --pending             only events some webhook has not received yet\n"
    "  --limit N             at most N events, 1 to 10000 (default 50)\n"
    RACKGATE_OPT_JSON RACKGATE_OPT_SOCKET RACKGATE_ADMIN_EXIT;

// One delivery's state in a few words.
std::string DeliveryState(const wire::EventDeliveryView& d) {
  std::string out = d.webhook + ": ";
  const std::string attempts = std::to_string(d.attempts);
  if (d.delivered_at) return out + "delivered " + UtcTime(*d.delivered_at) + " (attempts " + attempts + ")";
  out += "pending, attempts " + attempts + ", next " + UtcTime(d.next_attempt_at);
  if (!d.last_error.empty()) out += ", last error: " + d.last_error;
  return out;
}

}  // namespace

int RunEvents(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"limit"}, {"pending", "json"}, 0});
  if (!args.ok()) return UsageError(kEventsHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kEventsHelp);
  auto limit = args->GetInt("limit", 50, 1, 10000);
  if (!limit.ok()) return UsageError(kEventsHelp, limit.status().message());
  const wire::EventQuery query{*limit, args->Has("pending")};
  int code = kExitOk;
  auto r = Send(socket, "GET", "/v1/admin/events" + wire::EncodeEventQuery(query), &code);
  if (!r.ok()) return code;
  if (args->Has("json")) return PrintAnswer(*r), kExitOk;
  auto events = DecodeAnswer(*r, wire::DecodeEventList, &code);
  if (!events.ok()) return code;
  Table table({"ID", "TIME", "TYPE", "MACHINE", "DELIVERIES"});
  for (const wire::EventView& e : *events) {
    table.Add({std::to_string(e.id), UtcTime(e.at), e.type, e.hostname,
               e.deliveries.empty() ? "(no webhook)" : DeliveryState(e.deliveries.front())});
    for (size_t i = 1; i < e.deliveries.size(); ++i) table.Add({"", "", "", "", DeliveryState(e.deliveries[i])});
  }
  table.Print();
  return kExitOk;
}

}  // namespace rackgate::ctl
