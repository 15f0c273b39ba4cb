// Report output: text table, CSV, JSON, HTML.
#include "history/report_format.h"

#include <algorithm>

#include "history/json.h"
#include "history/text.h"

namespace pgwarden::history {

namespace {

constexpr size_t kMaxCellChars = 60;  // text output only; the other formats keep everything

// Display width in characters, counting each code point once (good enough for a terminal table).
size_t displayWidth(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string displayCell(const ReportCell& cell) {
  if (cell.null) return "";
  std::string s = cell.text;
  sanitizeUtf8(s);
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (displayWidth(s) > kMaxCellChars) {
    // Cut after kMaxCellChars - 3 code points.
    size_t chars = 0;
    size_t i = 0;
    while (i < s.size() && chars < kMaxCellChars - 3) {
      i += std::max<size_t>(1, utf8SequenceLength(std::string_view(s).substr(i)));
      ++chars;
    }
    s.resize(i);
    s += "...";
  }
  return s;
}

bool looksNumeric(const std::string& s) {
  if (s.empty()) return false;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  bool dot = false;
  for (; i < s.size(); ++i) {
    if (s[i] == '.' && !dot) {
      dot = true;
    } else if (s[i] < '0' || s[i] > '9') {
      return false;
    }
  }
  return s.back() != '.';
}

std::string csvField(const ReportCell& cell) {
  if (cell.null) return "";
  std::string s = cell.text;
  sanitizeUtf8(s);
  // A leading = + - @ makes a spreadsheet evaluate the field; a quote before it keeps it text.
  const bool formula =
      !cell.numeric && !s.empty() && std::string_view("=+-@").find(s[0]) != std::string_view::npos;
  if (!formula && s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  if (formula) out += '\'';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

const char* reportFormatName(ReportFormat format) {
  switch (format) {
    case ReportFormat::kTable:
      return "table";
    case ReportFormat::kCsv:
      return "csv";
    case ReportFormat::kJson:
      return "json";
    case ReportFormat::kHtml:
      return "html";
  }
  return "table";
}

bool parseReportFormat(const std::string& name, ReportFormat* out) {
  for (ReportFormat f :
       {ReportFormat::kTable, ReportFormat::kCsv, ReportFormat::kJson, ReportFormat::kHtml}) {
    if (name == reportFormatName(f)) {
      *out = f;
      return true;
    }
  }
  return false;
}

std::string formatReportText(const ReportTable& table) {
  const size_t ncol = table.columns.size();
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> width(ncol);
  std::vector<bool> numeric(ncol, true);
  for (size_t c = 0; c < ncol; ++c) width[c] = displayWidth(table.columns[c]);
  for (const auto& row : table.rows) {
    std::vector<std::string> out;
    for (size_t c = 0; c < ncol && c < row.size(); ++c) {
      out.push_back(displayCell(row[c]));
      width[c] = std::max(width[c], displayWidth(out.back()));
      if (!row[c].numeric && !row[c].null) numeric[c] = false;
    }
    cells.push_back(std::move(out));
  }
  if (table.rows.empty()) numeric.assign(ncol, false);
  auto pad = [](std::string& line, const std::string& s, size_t w, bool right) {
    const size_t fill = w - std::min(w, displayWidth(s));
    if (right) line.append(fill, ' ');
    line += s;
    if (!right) line.append(fill, ' ');
  };
  std::string out;
  std::string line;
  for (size_t c = 0; c < ncol; ++c) {
    if (c > 0) line += "  ";
    pad(line, table.columns[c], width[c], numeric[c]);
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out += line + "\n";
  line.clear();
  for (size_t c = 0; c < ncol; ++c) {
    if (c > 0) line += "  ";
    line.append(width[c], '-');
  }
  out += line + "\n";
  for (const auto& row : cells) {
    line.clear();
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      pad(line, row[c], width[c], numeric[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out +=
      "(" + std::to_string(table.rows.size()) + (table.rows.size() == 1 ? " row)\n" : " rows)\n");
  return out;
}

std::string formatReportJson(std::string_view name, const ReportTable& table) {
  JsonWriter w;
  w.beginObject().key("report").string(name).key("rows").beginArray();
  for (const auto& row : table.rows) {
    w.beginObject();
    for (size_t c = 0; c < table.columns.size() && c < row.size(); ++c) {
      w.key(table.columns[c]);
      const ReportCell& cell = row[c];
      if (cell.null) {
        w.null();
      } else if (cell.numeric && looksNumeric(cell.text)) {
        w.raw(cell.text);
      } else {
        w.string(cell.text);
      }
    }
    w.endObject();
  }
  w.endArray().endObject();
  return w.take() + "\n";
}

std::string formatReportCsv(const ReportTable& table) {
  std::string out;
  for (size_t c = 0; c < table.columns.size(); ++c) {
    if (c > 0) out += ',';
    out += csvField(ReportCell{table.columns[c], false, false});
  }
  out += "\r\n";
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c > 0) out += ',';
      out += csvField(row[c]);
    }
    out += "\r\n";
  }
  return out;
}

void appendHtmlEscaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
}

std::string htmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  appendHtmlEscaped(out, s);
  return out;
}

std::string formatReportHtml(std::string_view title, const ReportTable& table) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
  appendHtmlEscaped(out, title);
  out +=
      "</title>\n<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
      "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
      "td.n{text-align:right}td pre{margin:0;white-space:pre-wrap}</style>\n</head><body>\n<h1>";
  appendHtmlEscaped(out, title);
  out += "</h1>\n<table>\n<thead><tr>";
  for (const auto& c : table.columns) {
    out += "<th>";
    appendHtmlEscaped(out, c);
    out += "</th>";
  }
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (const auto& cell : row) {
      std::string text = cell.text;
      sanitizeUtf8(text);
      out += cell.numeric ? "<td class=\"n\">" : "<td>";
      appendHtmlEscaped(out, cell.null ? "" : text);
      out += "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n<p>" + std::to_string(table.rows.size()) +
         (table.rows.size() == 1 ? " row" : " rows") + "</p>\n</body></html>\n";
  return out;
}

std::string formatReport(ReportFormat format, std::string_view name, const ReportTable& table) {
  switch (format) {
    case ReportFormat::kTable:
      return formatReportText(table);
    case ReportFormat::kCsv:
      return formatReportCsv(table);
    case ReportFormat::kJson:
      return formatReportJson(name, table);
    case ReportFormat::kHtml:
      return formatReportHtml(std::string("pgwarden report ") + std::string(name), table);
  }
  return formatReportText(table);
}

}  // namespace pgwarden::history
