// Page rendering. Links carry the filter's range so that a conversation opened from a page is
// read within the same bounded range.
#include "studio/pages.h"

#include <map>
#include <nlohmann/json.hpp>

#include "history/report_format.h"
#include "history/text.h"
#include "studio/chart.h"

namespace pgwarden::studio {

namespace {

using history::appendHtmlEscaped;
using history::ReportCell;
using history::ReportKind;
using history::ReportTable;

constexpr std::pair<const char*, const char*> kNav[] = {{"", "Conversations"},
                                                        {"retries", "Retries"},
                                                        {"repeats", "Repeats"},
                                                        {"denials", "Denials"},
                                                        {"zeros", "Zeros"}};

std::string cell(const ReportTable& t, const std::vector<ReportCell>& row, const char* name) {
  const int i = t.column(name);
  if (i < 0 || static_cast<size_t>(i) >= row.size() || row[static_cast<size_t>(i)].null) return "";
  std::string s = row[static_cast<size_t>(i)].text;
  history::sanitizeUtf8(s);
  return s;
}

std::string conversationHref(const std::string& id, const Filter& f) {
  return std::string(kPrefix) + "conversation?id=" + urlEncode(id) + "&since=" + urlEncode(f.since);
}

// Where a value of `column` leads: a conversation's timeline, or the conversations filtered by it.
std::string linkFor(std::string_view column, const std::string& value, const Filter& f) {
  if (value.empty()) return "";
  if (column == "conversation") return conversationHref(value, f);
  const char* key = column == "agent_id"       ? "agent"
                    : column == "user_name"    ? "user"
                    : column == "policy_group" ? "group"
                    : column == "fingerprint"  ? "fingerprint"
                    : column == "deny_code"    ? "code"
                                               : nullptr;
  if (key == nullptr) return "";
  return std::string(kPrefix) + "?since=" + urlEncode(f.since) + "&" + key + "=" + urlEncode(value);
}

void link(std::string& out, const std::string& href, std::string_view text) {
  out += "<a href=\"";
  appendHtmlEscaped(out, href);
  out += "\">";
  appendHtmlEscaped(out, text);
  out += "</a>";
}

// A table of `t`'s rows; long text columns wrap, values that lead somewhere are links.
std::string table(const ReportTable& t, const Filter& f) {
  std::string out = "<div class=\"tablebox\"><table><thead><tr>";
  for (const auto& c : t.columns) {
    out += "<th>";
    appendHtmlEscaped(out, c);
    out += "</th>";
  }
  out += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (size_t c = 0; c < t.columns.size() && c < row.size(); ++c) {
      std::string v = row[c].null ? "" : row[c].text;
      history::sanitizeUtf8(v);
      const std::string& name = t.columns[c];
      const bool sql = name == "example" || name == "latest_reason" || name == "tables";
      out += row[c].numeric ? "<td class=\"n\">" : sql ? "<td class=\"sql\">" : "<td>";
      if (const std::string href = linkFor(name, v, f); !href.empty()) {
        link(out, href, v);
      } else {
        appendHtmlEscaped(out, v);
      }
      out += "</td>";
    }
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n<p class=\"note\">" + std::to_string(t.rows.size()) +
         (t.rows.size() == 1 ? " row" : " rows") + "</p>\n";
  return out;
}

void input(std::string& out, const char* name, const char* label, const std::string& value) {
  out += std::string("<label>") + label + "<input name=\"" + name + "\" value=\"";
  appendHtmlEscaped(out, value);
  out += "\"></label>";
}

std::string filterForm(std::string_view active, const Filter& f) {
  std::string out = "<form class=\"filters\" method=\"get\" action=\"";
  out += std::string(kPrefix) + std::string(active) + "\">";
  out += "<label>time<select name=\"since\">";
  bool known = false;
  for (const char* r : {"1h", "6h", "24h", "7d", "30d", "90d"}) {
    const bool sel = f.since == r;
    known |= sel;
    out += std::string("<option") + (sel ? " selected" : "") + ">" + r + "</option>";
  }
  if (!known) {
    out += "<option selected>";
    appendHtmlEscaped(out, f.since);
    out += "</option>";
  }
  out += "</select></label>";
  if (active.empty()) {  // the reports are filtered by time only
    input(out, "agent", "agent", f.agent);
    input(out, "user", "user", f.user);
    input(out, "group", "group", f.group);
    input(out, "code", "code", f.code);
    if (!f.fingerprint.empty()) input(out, "fingerprint", "shape", f.fingerprint);
  }
  out += "<button type=\"submit\">Show</button></form>\n";
  return out;
}

}  // namespace

std::string layout(std::string_view title, std::string_view active, const Filter& f, bool filters,
                   const std::string& body) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
  appendHtmlEscaped(out, title);
  out +=
      " · pgwarden studio</title>\n<link rel=\"stylesheet\" href=\"/studio/studio.css\">\n"
      "<link rel=\"icon\" href=\"/studio/favicon.svg\" type=\"image/svg+xml\">\n"
      "</head><body>\n<header><a class=\"brand\" href=\"/studio/\">pgwarden studio</a><nav>";
  for (const auto& [path, name] : kNav) {
    out += std::string("<a href=\"") + std::string(kPrefix) + path +
           "?since=" + urlEncode(f.since) + "\"" + (active == path ? " class=\"active\"" : "") +
           ">" + name + "</a>";
  }
  out +=
      "</nav><div class=\"live\" id=\"live\" aria-live=\"polite\">"
      "<span>sessions open <b id=\"live-sessions\">–</b></span>"
      "<span>statements/s <b id=\"live-rate\">–</b></span></div></header>\n";
  if (filters) out += filterForm(active, f);
  out += "<main>\n";
  out += body;
  out += "</main>\n<script src=\"/studio/studio.js\"></script>\n</body></html>\n";
  return out;
}

std::string conversationsPage(const Filter& f, const ReportTable& rows) {
  std::string body = "<h1>Conversations, newest first</h1>\n<p class=\"note\">Started within " +
                     history::htmlEscape(f.since) + "; at most " + std::to_string(kPageRows) +
                     " shown.</p>\n";
  body += table(rows, f);
  return layout("Conversations", "", f, true, body);
}

namespace {

// The guards' and result screens' entries of one record, each with its code and reason.
void findings(std::string& out, const std::string& guard_actions) {
  auto actions = nlohmann::json::parse(guard_actions, nullptr, false);
  if (!actions.is_array() || actions.empty()) return;
  out += "<ul class=\"findings\">";
  for (const auto& a : actions) {
    if (!a.is_object()) continue;
    auto str = [&](const char* k) {
      return a.contains(k) && a[k].is_string() ? a[k].get<std::string>() : std::string();
    };
    const std::string action = str("action");
    const bool bad = action == "deny";
    out += "<li><b class=\"";
    out += bad ? "bad" : "warn";
    out += "\">";
    appendHtmlEscaped(out, str("code").empty() ? action : str("code"));
    out += "</b> <span class=\"note\">(";
    appendHtmlEscaped(out, str("guard") + ", " + action);
    out += ")</span> ";
    appendHtmlEscaped(out, str("reason"));
    out += "</li>";
  }
  out += "</ul>";
}

void statement(std::string& out, const ReportTable& t, const std::vector<ReportCell>& row) {
  const std::string outcome = cell(t, row, "outcome");
  const std::string deny = cell(t, row, "deny_code");
  const std::string warnings = cell(t, row, "warnings");
  const bool warned = !warnings.empty() && warnings != "0";
  const std::string n = cell(t, row, "n");
  out += "<li id=\"s" + history::htmlEscape(n) + "\" class=\"stmt ";
  appendHtmlEscaped(out, warned && outcome == "ok" ? "warned" : outcome);
  out += "\"><div class=\"stmt-head\"><span class=\"n\">#";
  appendHtmlEscaped(out, n);
  out += "</span><time>";
  appendHtmlEscaped(out, cell(t, row, "started_at"));
  out += "</time><span class=\"outcome\">";
  appendHtmlEscaped(out, outcome);
  out += "</span>";
  if (!deny.empty()) {
    out += "<span class=\"bad deny-code\">";
    appendHtmlEscaped(out, deny);
    out += "</span>";
  }
  if (warned) out += "<span class=\"warn\">" + history::htmlEscape(warnings) + " warning(s)</span>";
  out += "<span>rows " + history::htmlEscape(cell(t, row, "rows_returned"));
  if (const std::string affected = cell(t, row, "rows_affected");
      !affected.empty() && affected != "0") {
    out += " · affected " + history::htmlEscape(affected);
  }
  const std::string us = cell(t, row, "duration_us");
  char ms[32] = "";
  std::snprintf(ms, sizeof ms, "%.1f",
                us.empty() ? 0.0 : std::strtod(us.c_str(), nullptr) / 1000.0);
  out += "</span><span>" + std::string(ms) + " ms</span>";
  // Where it ran: a read served by a replica may be behind the primary by its lag.
  if (const std::string host = cell(t, row, "host"); !host.empty()) {
    out += "<span class=\"host\">on ";
    appendHtmlEscaped(out, host);
    out += "</span>";
  }
  out += "<span>";
  appendHtmlEscaped(out, cell(t, row, "agent_id"));
  out += "</span></div>\n<pre class=\"sql\">";
  appendHtmlEscaped(out, cell(t, row, "sql_text"));
  out += "</pre>";
  if (const std::string tool = cell(t, row, "tool_name"); !tool.empty()) {
    out += "<div class=\"tool\">MCP tool <b>";
    appendHtmlEscaped(out, tool);
    out += "</b> <code>";
    appendHtmlEscaped(out, cell(t, row, "tool_args"));
    out += "</code></div>";
  }
  findings(out, cell(t, row, "guard_actions"));
  if (const std::string msg = cell(t, row, "error_message"); !msg.empty()) {
    out += "<p class=\"message\"><b>";
    appendHtmlEscaped(out, cell(t, row, "sqlstate").empty() ? "message" : cell(t, row, "sqlstate"));
    out += "</b> ";
    appendHtmlEscaped(out, msg);
    out += "</p>";
  }
  out += "</li>\n";
}

}  // namespace

std::string timelinePage(const Filter& f, const ReportTable& rows) {
  std::string body = "<h1>Conversation <span class=\"conv-id\">";
  appendHtmlEscaped(body, f.id);
  body += "</span></h1>\n";
  if (rows.rows.empty()) {
    body += "<p class=\"note\">No statements of this conversation started within " +
            history::htmlEscape(f.since) + ".</p>\n";
  } else {
    const auto& first = rows.rows.front();
    body += "<p class=\"note\">" + std::to_string(rows.rows.size()) + " statement(s) by ";
    appendHtmlEscaped(body, cell(rows, first, "agent_id").empty() ? "(no agent id)"
                                                                  : cell(rows, first, "agent_id"));
    body += " as ";
    appendHtmlEscaped(body, cell(rows, first, "user_name"));
    body += " (group ";
    appendHtmlEscaped(body, cell(rows, first, "policy_group"));
    body += "), from ";
    appendHtmlEscaped(body, cell(rows, first, "started_at"));
    body += " to ";
    appendHtmlEscaped(body, cell(rows, rows.rows.back(), "started_at"));
    body += ".</p>\n";
  }
  body += "<ol class=\"timeline\">\n";
  for (const auto& row : rows.rows) statement(body, rows, row);
  body += "</ol>\n";
  return layout("Conversation", "conversation", f, false, body);
}

namespace {

std::vector<Bar> bars(const ReportTable& t, const char* label, const char* value,
                      const char* link_column, const Filter& f, const char* label2 = nullptr) {
  std::vector<Bar> out;
  for (const auto& row : t.rows) {
    Bar b;
    b.label = cell(t, row, label);
    if (label2 != nullptr) b.label += " · " + cell(t, row, label2).substr(0, 8);
    b.value = std::strtod(cell(t, row, value).c_str(), nullptr);
    b.href = linkFor(link_column, cell(t, row, link_column), f);
    out.push_back(std::move(b));
    if (out.size() == 15) break;
  }
  return out;
}

std::string denialsChart(const ReportTable& over_time) {
  std::vector<std::string> buckets;
  std::vector<std::string> codes;
  std::map<std::string, size_t> code_index;
  std::map<std::string, size_t> bucket_index;
  for (const auto& row : over_time.rows) {
    const std::string b = cell(over_time, row, "bucket");
    const std::string c = cell(over_time, row, "deny_code");
    if (bucket_index.emplace(b, buckets.size()).second) buckets.push_back(b);
    if (code_index.emplace(c, codes.size()).second) codes.push_back(c);
  }
  std::vector<std::vector<double>> values(buckets.size(), std::vector<double>(codes.size(), 0));
  for (const auto& row : over_time.rows) {
    values[bucket_index[cell(over_time, row, "bucket")]]
          [code_index[cell(over_time, row, "deny_code")]] +=
        std::strtod(cell(over_time, row, "denials").c_str(), nullptr);
  }
  return stackedColumns("Denials by code over time", buckets, codes, values);
}

}  // namespace

std::string reportPage(ReportKind kind, const Filter& f, const ReportTable& rows,
                       const ReportTable& extra) {
  std::string body;
  std::string title;
  switch (kind) {
    case ReportKind::kRetries:
      title = "Retries";
      body =
          "<h1>Retried shapes</h1><p class=\"note\">One statement shape tried with at least 3 "
          "different texts in one conversation: the agent guessing literals.</p>\n" +
          barChart("Different texts per conversation and shape",
                   bars(rows, "conversation", "variants", "conversation", f, "fingerprint"));
      break;
    case ReportKind::kRepeats:
      title = "Repeats";
      body =
          "<h1>Shapes repeated across conversations</h1><p class=\"note\">What agents keep "
          "rediscovering.</p>\n" +
          barChart("Conversations per shape",
                   bars(rows, "fingerprint", "conversations", "fingerprint", f));
      break;
    case ReportKind::kDenials:
      title = "Denials";
      body = "<h1>Denials</h1>\n" + denialsChart(extra);
      break;
    case ReportKind::kZeros:
      title = "Zeros";
      body =
          "<h1>Zero results</h1><p class=\"note\">Statements that succeeded with no rows or a "
          "single 0: the confident wrong answers.</p>\n" +
          barChart("Zero results by table", bars(extra, "table_name", "results", "", f));
      break;
    case ReportKind::kConversation:
      return timelinePage(f, rows);
  }
  body += "<h2>Rows</h2>\n" + table(rows, f);
  return layout(title, history::reportKindName(kind), f, true, body);
}

std::string errorPage(std::string_view title, std::string_view message, const Filter& f) {
  std::string body = "<h1>";
  appendHtmlEscaped(body, title);
  body += "</h1><p class=\"error-box\">";
  appendHtmlEscaped(body, message);
  body += "</p>\n";
  return layout(title, "-", f, false, body);
}

}  // namespace pgwarden::studio
