// Startup parameter filtering: the allow list of client parameters, the `options` splitter
// (mirrors PostgreSQL's pg_split_opts) and the refusals that name the offending parameter.
#include "session/startup_params.h"

#include <algorithm>
#include <cctype>

#include "common/ascii.h"
#include "guards/fixed_settings.h"

namespace pgwarden::session {

namespace {

// Parameters a client may set that change how results are presented to it, never what the
// server lets it do. Each is applied on the server connection with SET when it differs.
constexpr const char* kClientParams[] = {"application_name", "client_encoding", "DateStyle",
                                         "TimeZone", "IntervalStyle", "extra_float_digits"};

void setParam(ParamList& list, const std::string& name, const std::string& value) {
  for (auto& [n, v] : list) {
    if (n == name) {
      v = value;
      return;
    }
  }
  list.emplace_back(name, value);
}

StartupFilterResult refuse(std::string sqlstate, std::string message) {
  StartupFilterResult r;
  r.refusal = {std::move(sqlstate), std::move(message)};
  return r;
}

// Applies one name=value setting, wherever it came from. Returns a refusal message or "".
std::string applySetting(ClientStartup& out, const std::string& name, const std::string& value,
                         bool from_options) {
  const std::string where = from_options ? "in options" : "in the startup packet";
  if (const char* key = contextKey(name)) {
    if (value.size() > kMaxContextValue) {
      return std::string(key) + " is longer than " + std::to_string(kMaxContextValue) +
             " bytes";
    }
    std::string* field = key == std::string_view("agent_id")          ? &out.agent_id
                         : key == std::string_view("conversation_id") ? &out.conversation_id
                                                                      : &out.query_intent;
    *field = value;
    return "";
  }
  if (iequals(name, "search_path")) {
    out.search_path = value;
    return "";
  }
  if (const char* canonical = canonicalClientParam(name)) {
    if (std::string_view(canonical) == "client_encoding") {
      // pgwarden reads every statement as UTF-8; under another encoding the server would split
      // and read the same bytes differently (docs/reliability.md, "The text pgwarden judges").
      if (!guards::isUtf8EncodingName(value)) {
        return "client_encoding \"" + value + "\" " + where +
               " is not accepted: pgwarden reads statements as UTF-8 and accepts only "
               "client_encoding UTF8; connect with client_encoding=UTF8 and convert on the client";
      }
      setParam(out.params, canonical, std::string(guards::kClientEncoding));
      return "";
    }
    setParam(out.params, canonical, value);
    if (std::string_view(canonical) == "application_name") out.application_name = value;
    return "";
  }
  if (iequals(name, "replication")) {
    return "replication connections are not allowed through pgwarden (parameter \"replication\" " +
           where + ")";
  }
  return "parameter \"" + name + "\" " + where +
         " is not allowed: pgwarden sets the server's settings itself; a client may set only "
         "application_name, client_encoding, DateStyle, TimeZone, IntervalStyle, "
         "extra_float_digits, and pgwarden's agent_id, conversation_id and query_intent";
}

}  // namespace

const char* canonicalClientParam(std::string_view name) {
  for (const char* p : kClientParams) {
    if (iequals(name, p)) return p;
  }
  return nullptr;
}

const char* contextKey(std::string_view name) {
  std::string_view n = name;
  if (n.size() > 9 && iequals(n.substr(0, 9), "pgwarden.")) n.remove_prefix(9);
  if (iequals(n, "agent_id")) return "agent_id";
  if (iequals(n, "conversation_id")) return "conversation_id";
  if (iequals(n, "query_intent")) return "query_intent";
  return nullptr;
}

Result<ParamList> parseOptions(std::string_view options) {
  // Split as pg_split_opts does: whitespace separates, a backslash takes the next byte literally.
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < options.size()) {
    while (i < options.size() && std::isspace(static_cast<unsigned char>(options[i]))) ++i;
    if (i >= options.size()) break;
    std::string tok;
    while (i < options.size() && !std::isspace(static_cast<unsigned char>(options[i]))) {
      if (options[i] == '\\') {
        ++i;
        if (i >= options.size()) break;
      }
      tok.push_back(options[i]);
      ++i;
    }
    tokens.push_back(std::move(tok));
  }

  ParamList out;
  const auto splitSetting = [&](const std::string& s, const std::string& shown) -> std::string {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      return "options: \"" + shown + "\" needs the form name=value";
    }
    out.emplace_back(s.substr(0, eq), s.substr(eq + 1));
    return "";
  };
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::string& tok = tokens[t];
    std::string err;
    if (tok == "-c") {
      if (t + 1 >= tokens.size()) return Result<ParamList>::fail("options: -c needs name=value");
      ++t;
      err = splitSetting(tokens[t], tokens[t]);
    } else if (tok.size() > 2 && tok.compare(0, 2, "-c") == 0) {
      err = splitSetting(tok.substr(2), tok);
    } else if (tok.size() > 2 && tok.compare(0, 2, "--") == 0) {
      // As PostgreSQL does for --name=value: dashes in the name stand for underscores.
      std::string s = tok.substr(2);
      const auto eq = s.find('=');
      std::replace(s.begin(), eq == std::string::npos ? s.end() : s.begin() + eq, '-', '_');
      err = splitSetting(s, tok);
    } else {
      return Result<ParamList>::fail(
          "options: switch \"" + tok +
          "\" is not allowed; only -c name=value settings are accepted (pgwarden's agent_id, "
          "conversation_id, query_intent and ordinary client settings)");
    }
    if (!err.empty()) return Result<ParamList>::fail(err);
  }
  return out;
}

StartupFilterResult filterStartupParams(const ParamList& params) {
  ClientStartup out;
  bool have_user = false;
  bool have_database = false;
  for (const auto& [name, value] : params) {
    if (name == "user") {
      out.user = value;
      have_user = true;
    } else if (name == "database") {
      out.database = value;
      have_database = true;
    } else if (name == "options") {
      auto settings = parseOptions(value);
      if (!settings) return refuse("42501", settings.error());
      for (const auto& [n, v] : *settings) {
        std::string err = applySetting(out, n, v, true);
        if (!err.empty()) return refuse("42501", err);
      }
    } else if (name.rfind("_pq_.", 0) == 0) {
      out.unrecognized_protocol_options.push_back(name);
    } else {
      std::string err = applySetting(out, name, value, false);
      if (!err.empty()) return refuse("42501", err);
    }
  }
  if (!have_user || out.user.empty()) {
    return refuse("28000", "no PostgreSQL user name specified in startup packet");
  }
  if (!have_database || out.database.empty()) out.database = out.user;
  StartupFilterResult r;
  r.startup = std::move(out);
  return r;
}

}  // namespace pgwarden::session
