// The inventory file's formats that rackgatectl import reads (docs/inventory.md):
// RFC 4180 CSV records with the physical line each starts on, and the line
// of each row of a JSON inventory's "machines" array.
#ifndef RACKGATE_DAEMON_CTL_INVENTORY_FORMAT_H_
#define RACKGATE_DAEMON_CTL_INVENTORY_FORMAT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::ctl {

// One CSV record and the 1-based physical line it starts on.
struct CsvRecord {
  size_t line = 0;
  std::vector<std::string> fields;
};

// RFC 4180: fields separated by commas, records by LF or CRLF; a field in
// double quotes may hold commas, line breaks and "" (one quote). A leading
// UTF-8 BOM is skipped, and so are blank lines. row_invalid (kInvalidArgument)
// naming the line for an unclosed quote, text after a closing quote, or a
// quote inside an unquoted field.
Result<std::vector<CsvRecord>> ParseCsv(std::string_view text);

// The 1-based line on which each element of the top-level "machines" array
// starts, found by a scan that follows strings and nesting (it does not
// validate: the caller parses the text too, and uses these lines only when
// their count matches the rows it parsed).
std::vector<size_t> JsonRowLines(std::string_view text);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_INVENTORY_FORMAT_H_
