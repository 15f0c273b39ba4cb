#include "pool/carried_settings.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "guards/pooled_state_check.h"
#include "pool/server_conn.h"

namespace pgwarden::pool {

namespace {

const std::string* wantedValue(const ParamList& params, std::string_view name) {
  for (const auto& [n, v] : params) {
    if (n == name) return &v;
  }
  return nullptr;
}

}  // namespace

bool isReportedSetting(std::string_view name) {
  return name != "extra_float_digits" && name != "search_path";
}

std::string quoteSqlLiteral(std::string_view v) {
  std::string out;
  out.reserve(v.size() + 3);
  if (v.find('\\') != std::string_view::npos) out.push_back('E');
  out.push_back('\'');
  for (char c : v) {
    if (c == '\'' || c == '\\') out.push_back(c);
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

namespace {

// The words of a DateStyle (check_datestyle's list), lowercased and trimmed; nullopt for an
// empty word.
std::optional<std::vector<std::string>> dateStyleWords(std::string_view v) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= v.size()) {
    size_t comma = v.find(',', at);
    if (comma == std::string_view::npos) comma = v.size();
    std::string w;
    for (char c : v.substr(at, comma - at)) {
      if (!std::isspace(static_cast<unsigned char>(c)))
        w.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    if (w.empty()) return std::nullopt;
    out.push_back(std::move(w));
    at = comma + 1;
  }
  return out;
}

bool isDateStyleWord(std::string_view w) {
  return w == "iso" || w == "sql" || w == "postgres" || w == "german";
}
bool isDateOrderWord(std::string_view w) {
  return w == "ymd" || w == "dmy" || w == "euro" || w == "european" || w == "mdy" || w == "us" ||
         w == "noneuro" || w == "noneuropean";
}

}  // namespace

std::string completeDateStyle(std::string_view wanted, std::string_view login) {
  const auto words = dateStyleWords(wanted);
  const auto base = dateStyleWords(login);
  if (!words || !base || base->size() != 2) return std::string(wanted);
  bool style = false, order = false, german = false;
  for (const auto& w : *words) {
    if (w == "default") return std::string(wanted);
    style = style || isDateStyleWord(w);
    order = order || isDateOrderWord(w);
    german = german || w == "german";
  }
  // The server reports its own value as "Style, Order".
  const size_t comma = login.find(',');
  std::string_view base_style = login.substr(0, comma);
  std::string_view base_order = login.substr(comma + 1);
  while (!base_order.empty() && base_order.front() == ' ') base_order.remove_prefix(1);
  std::string out;
  if (!style) out.append(base_style).append(", ");
  out.append(wanted);
  if (!order && !german) out.append(", ").append(base_order);
  return out;
}

void completeDateStyle(ParamList& params, std::string_view login) {
  for (auto& [name, value] : params) {
    if (name == "DateStyle") value = completeDateStyle(value, login);
  }
}

std::optional<std::string> startupValue(std::string_view name, const ParamList& startup) {
  if (name == "client_encoding" || name == "search_path") return std::nullopt;
  if (const std::string* v = wantedValue(startup, name)) return *v;
  if (name == "application_name") return std::string();
  return std::nullopt;
}

std::optional<std::string> resetsToStartup(std::string_view sql,
                                           const std::vector<analysis::StatementInfo>& statements,
                                           const ParamList& startup) {
  std::optional<std::string> out;
  size_t copied = 0;  // of `sql`, up to here
  for (const auto& st : statements) {
    const bool to_default =
        st.kind == analysis::StatementKind::kReset ||
        (st.kind == analysis::StatementKind::kSet && st.setting_value == "default");
    if (!to_default) continue;
    const std::string_view name = guards::carriedSetting(st.setting);
    if (name.empty()) continue;
    const auto value = startupValue(name, startup);
    if (!value) continue;
    size_t from = static_cast<size_t>(std::max(st.location, 0));
    size_t len = st.length > 0 ? static_cast<size_t>(st.length) : sql.size() - from;
    if (from < copied || from + len > sql.size()) return std::nullopt;  // not a text we can cut
    // A statement after the first starts right after the last one's semicolon.
    while (len > 0 && std::isspace(static_cast<unsigned char>(sql[from]))) {
      ++from;
      --len;
    }
    if (!out) out.emplace();
    out->append(sql.substr(copied, from - copied));
    out->append(st.set_local ? "SET LOCAL " : "SET ");
    out->append(name);
    out->append(" TO ");
    out->append(quoteSqlLiteral(*value));
    copied = from + len;
  }
  if (out) out->append(sql.substr(copied));
  return out;
}

std::string carriedSyncSql(ServerConnection& c, const ParamList& wanted) {
  std::string sql;
  for (const std::string_view name : guards::carriedSettings()) {
    const std::string* want = wantedValue(wanted, name);
    if (isReportedSetting(name)) {
      // A client that sent no application_name has '' on a direct connection, not pgwarden's.
      const bool app = name == "application_name";
      const std::string_view target = want  ? std::string_view(*want)
                                      : app ? std::string_view()
                                            : c.loginParameter(name);
      if ((target.empty() && !app) || c.parameter(name) == target) continue;
      sql += "SET " + std::string(name) + " = " + quoteSqlLiteral(target) + ";";
    } else {
      const std::string_view target = want ? std::string_view(*want) : std::string_view();
      if (c.unreportedValue(name) == target) continue;
      c.noteUnreported(name, target);
      sql += target.empty() ? "RESET " + std::string(name) + ";"
                            : "SET " + std::string(name) + " = " + quoteSqlLiteral(target) + ";";
    }
  }
  return sql;
}

}  // namespace pgwarden::pool
