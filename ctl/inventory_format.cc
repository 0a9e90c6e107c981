// The inventory file's formats: RFC 4180 CSV and a JSON inventory's row lines.
#include "ctl/inventory_format.h"

#include "base/json_depth.h"

namespace rackgate::ctl {

Result<std::vector<CsvRecord>> ParseCsv(std::string_view text) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::vector<CsvRecord> out;
  CsvRecord rec;
  std::string field;
  size_t line = 1;
  size_t i = 0;
  bool field_started = false;  // the record has content (for blank lines)
  const auto end_field = [&] {
    rec.fields.push_back(std::move(field));
    field.clear();
  };
  const auto end_record = [&] {
    end_field();
    if (field_started) out.push_back(std::move(rec));
    rec = CsvRecord{};
    field_started = false;
  };
  const auto fail = [&](size_t at, const std::string& why) -> Status {
    return Status::InvalidArgument("row_invalid", "line " + std::to_string(at) + ": " + why);
  };
  while (i < text.size()) {
    if (!field_started) rec.line = line;
    const char c = text[i];
    if (c == '"' && field.empty()) {
      // A quoted field runs to the quote that is not doubled.
      const size_t opened = line;
      field_started = true;
      ++i;
      for (;;) {
        if (i >= text.size()) return fail(opened, "a quoted field is never closed (a missing '\"')");
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        if (text[i] == '\n') ++line;
        field += text[i++];
      }
      const bool at_end = i >= text.size() || text[i] == ',' || text[i] == '\n' ||
                          (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n');
      if (!at_end) return fail(line, "text after a closing quote: a quote inside a quoted field is written \"\"");
      continue;
    }
    if (c == ',') {
      field_started = true;
      end_field();
      ++i;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;  // the LF ends the record
    } else if (c == '\n') {
      end_record();
      ++line;
      ++i;
    } else if (c == '"') {
      return fail(line, "a quote inside an unquoted field: quote the whole field and write the quote as \"\"");
    } else {
      field_started = true;
      field += c;
      ++i;
    }
  }
  if (field_started || !field.empty()) end_record();
  return out;
}


std::vector<size_t> JsonRowLines(std::string_view text) {
  using Kind = JsonToken::Kind;
  std::vector<size_t> lines;
  bool in_machines = false, expect_row = false, broken = false;
  std::string_view key;
  ScanJson(text, [&](const JsonToken& t) {
    if (in_machines && t.depth == 2 && expect_row && t.c != ']') {
      lines.push_back(t.line);
      expect_row = false;
    }
    switch (t.kind) {
      case Kind::kString:
        if (t.depth == 1) key = t.text;
        break;
      case Kind::kOpen:
        if (t.c == '[' && t.depth == 1 && key == "machines" && lines.empty()) in_machines = expect_row = true;
        break;
      case Kind::kClose:
        if (t.depth == 0) return !(broken = true);
        if (in_machines && t.depth == 2) in_machines = false;
        break;
      case Kind::kComma:
        if (in_machines && t.depth == 2) expect_row = true;
        if (t.depth == 1) key = {};
        break;
      case Kind::kOther:
        break;
    }
    return true;
  });
  if (broken) return {};
  return lines;
}

}  // namespace rackgate::ctl
