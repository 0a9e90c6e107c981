// libFuzzer target: the event log parser, replay and boot-fact extraction on
// arbitrary bytes (what a machine sends as `event_log` in its evidence). Built
// only with -Dfuzzing=enabled (clang); run it with script/fuzz. Any crash,
// sanitizer report, leak or timeout is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "attest/boot_facts.h"
#include "attest/eventlog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rackgate::attest;  // NOLINT
  rackgate::Result<EventLog> log = ParseEventLog(std::span<const uint8_t>(data, size));
  if (!log.ok()) return 0;
  rackgate::Result<PcrValues> pcrs = Replay(*log);
  if (pcrs.ok()) (void)ComparePcrs(*pcrs, *pcrs);
  const BootFacts facts = ExtractBootFacts(*log);
  for (const Event& ev : log->events) {
    const std::string d = DescribeEvent(ev);
    // The contract every printer relies on: short, printable ASCII.
    if (d.size() > kMaxDescriptionChars) __builtin_trap();
    for (char c : d) {
      if (c < 0x20 || c > 0x7e) __builtin_trap();
    }
  }
  (void)facts;
  return 0;
}
