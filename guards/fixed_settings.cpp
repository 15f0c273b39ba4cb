// The settings no policy group may change, and the denials that say which and what to do instead.
#include "guards/fixed_settings.h"

#include <cctype>
#include <string>

#include "common/ascii.h"
#include "guards/codes.h"

namespace pgwarden::guards {

namespace {

GuardResult refuse(std::string_view setting, std::string_view how, std::string message,
                   std::string next, std::string hint) {
  GuardResult r;
  r.action = Action::kDeny;
  r.code = std::string(codes::kProtectedSetting);
  r.subject = std::string(setting);
  r.message = std::move(message);
  r.hint = std::move(hint);
  r.facts.add("setting", setting).add("statement", how).add("next_step", next);
  return r;
}

GuardResult lexicalDenial(std::string_view setting, std::string_view how) {
  if (setting == "standard_conforming_strings") {
    return refuse(setting, how,
                  "standard_conforming_strings must stay on through pgwarden (changed by " +
                      std::string(how) +
                      "): it decides where a string constant ends, and pgwarden reads statements "
                      "as the server does only with it on; write backslash escapes in E'...' "
                      "strings instead.",
                  "use E'...' strings for backslash escapes", "SELECT E'it\\'s'");
  }
  if (setting == "client_encoding") {
    return refuse(setting, how,
                  "client_encoding must stay UTF8 through pgwarden (changed by " +
                      std::string(how) +
                      "): pgwarden reads statements as UTF-8 text, as the server does only with "
                      "UTF8; send UTF-8 and convert on the client.",
                  "send UTF-8 text with client_encoding UTF8", "SHOW client_encoding");
  }
  // set_config() with a name that is not a constant: it could name either of them.
  return refuse("*", how,
                "set_config() with a setting name that is not a constant is not allowed through "
                "pgwarden: it could change how the server reads the next statements; name the "
                "setting with a constant.",
                "name the setting with a constant", "SELECT set_config('work_mem', '64MB', false)");
}

bool acceptedValue(std::string_view setting, std::string_view value) {
  if (setting == "standard_conforming_strings") return isOnValue(value);
  return isUtf8EncodingName(value);
}

bool isSettingsTable(const analysis::RelationRef& r) {
  return r.name == "pg_settings" && (r.schema.empty() || r.schema == "pg_catalog");
}

}  // namespace

bool isUtf8EncodingName(std::string_view value) {
  // As the server's clean_encoding_name: lower case, letters and digits only.
  std::string clean;
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) clean.push_back(static_cast<char>(std::tolower(u)));
  }
  return clean == "utf8" || clean == "unicode";
}

bool isOnValue(std::string_view value) {
  return iequals(value, "on") || iequals(value, "true") || iequals(value, "yes") || value == "1";
}

bool isLexicalSetting(std::string_view name) {
  return iequals(name, "standard_conforming_strings") || iequals(name, "client_encoding");
}

bool serverReportAccepted(std::string_view name, std::string_view value) {
  if (name == "standard_conforming_strings") return value == kStandardConformingStrings;
  if (name == "client_encoding") return value == kClientEncoding;
  return true;
}

std::optional<GuardResult> fixedSettingChange(const analysis::StatementInfo& st) {
  for (const auto& name : st.set_config_names) {
    if (name == "*" || isLexicalSetting(name)) return lexicalDenial(name, "set_config()");
  }
  if (isLexicalSetting(st.setting)) {
    // SET to the one accepted value changes nothing and drivers send it; anything else (another
    // value, DEFAULT, RESET) is refused.
    if (st.kind == analysis::StatementKind::kSet && st.setting_value != "default" &&
        st.setting_value != "current" && acceptedValue(st.setting, st.setting_value)) {
      return std::nullopt;
    }
    if (st.kind == analysis::StatementKind::kSet)
      return lexicalDenial(st.setting, st.set_local ? "SET LOCAL" : "SET");
    if (st.kind == analysis::StatementKind::kReset) return lexicalDenial(st.setting, "RESET");
  }
  for (const auto& r : st.relations) {
    if (!r.written || !isSettingsTable(r)) continue;
    return refuse(
        "pg_settings", st.command,
        st.command +
            " of pg_settings changes the session's settings (it is set_config() "
            "under another name) and is not allowed through pgwarden; read pg_settings with "
            "SELECT and leave the settings as they are.",
        "read pg_settings with SELECT",
        "SELECT name, setting FROM pg_settings WHERE name = 'statement_timeout'");
  }
  return std::nullopt;
}

}  // namespace pgwarden::guards
