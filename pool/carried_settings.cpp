#include "pool/carried_settings.h"

#include "guards/session_state.h"
#include "pool/server_conn.h"

namespace pgwarden::daemon {

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

std::string carriedSyncSql(ServerConnection& c, const ParamList& wanted) {
  std::string sql;
  for (const std::string_view name : guards::carriedSettings()) {
    const std::string* want = wantedValue(wanted, name);
    if (isReportedSetting(name)) {
      const std::string_view target = want ? std::string_view(*want) : c.loginParameter(name);
      if (target.empty() || c.parameter(name) == target) continue;
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

}  // namespace pgwarden::daemon
