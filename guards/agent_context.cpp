// sqlcommenter comments and SET/RESET/SHOW pgwarden.<key>, read with a small SQL lexer that
// knows strings, quoted identifiers, dollar quotes and nested comments, so a comment-looking run
// inside a literal is never taken for one.
#include "guards/agent_context.h"

#include <algorithm>
#include <cctype>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/ascii.h"

namespace pgwarden::guards {

namespace {

enum class Tok { kWord, kQuotedIdent, kString, kPunct, kOther };

struct Token {
  Tok type;
  std::string text;  // words lower-cased; strings and quoted identifiers decoded
  size_t begin = 0;
  size_t end = 0;
};

struct Comment {
  size_t begin = 0;  // at "/*"
  size_t end = 0;    // after "*/"
};

struct Lexed {
  std::vector<Token> tokens;
  std::vector<Comment> comments;  // block comments only, in order
  bool ok = true;                 // false: unterminated string/comment
};

bool identStart(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool identChar(unsigned char c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; }

Lexed lex(std::string_view s) {
  Lexed out;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isspace(c)) {
      ++i;
    } else if (c == '-' && i + 1 < n && s[i + 1] == '-') {
      while (i < n && s[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      // PostgreSQL block comments nest.
      const size_t begin = i;
      int depth = 0;
      while (i < n) {
        if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
          ++depth;
          i += 2;
        } else if (s[i] == '*' && i + 1 < n && s[i + 1] == '/') {
          --depth;
          i += 2;
          if (depth == 0) break;
        } else {
          ++i;
        }
      }
      if (depth != 0) {
        out.ok = false;
        return out;
      }
      out.comments.push_back({begin, i});
    } else if (c == '\'' || ((c == 'e' || c == 'E') && i + 1 < n && s[i + 1] == '\'')) {
      const bool escapes = c != '\'';
      const size_t begin = i;
      i += escapes ? 2 : 1;
      std::string text;
      bool closed = false;
      while (i < n) {
        if (escapes && s[i] == '\\' && i + 1 < n) {
          const char e = s[i + 1];
          text += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : e == 'f' ? '\f' : e;
          i += 2;
        } else if (s[i] == '\'') {
          if (i + 1 < n && s[i + 1] == '\'') {
            text += '\'';
            i += 2;
          } else {
            ++i;
            closed = true;
            break;
          }
        } else {
          text += s[i++];
        }
      }
      if (!closed) {
        out.ok = false;
        return out;
      }
      out.tokens.push_back({Tok::kString, std::move(text), begin, i});
    } else if (c == '"') {
      const size_t begin = i++;
      std::string text;
      bool closed = false;
      while (i < n) {
        if (s[i] == '"') {
          if (i + 1 < n && s[i + 1] == '"') {
            text += '"';
            i += 2;
          } else {
            ++i;
            closed = true;
            break;
          }
        } else {
          text += s[i++];
        }
      }
      if (!closed) {
        out.ok = false;
        return out;
      }
      out.tokens.push_back({Tok::kQuotedIdent, std::move(text), begin, i});
    } else if (c == '$') {
      // $tag$ ... $tag$ (or a $n parameter).
      size_t j = i + 1;
      while (j < n && identChar(static_cast<unsigned char>(s[j])) && s[j] != '$') ++j;
      if (j < n && s[j] == '$' && (j == i + 1 || !std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
        const std::string_view tag = s.substr(i, j - i + 1);
        const size_t close = s.find(tag, j + 1);
        if (close == std::string_view::npos) {
          out.ok = false;
          return out;
        }
        const size_t begin = i;
        i = close + tag.size();
        out.tokens.push_back({Tok::kString, std::string(s.substr(j + 1, close - j - 1)), begin, i});
      } else {
        const size_t begin = i++;
        while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        out.tokens.push_back({Tok::kOther, std::string(s.substr(begin, i - begin)), begin, i});
      }
    } else if (std::isdigit(c)) {
      const size_t begin = i;
      while (i < n && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
      out.tokens.push_back({Tok::kOther, std::string(s.substr(begin, i - begin)), begin, i});
    } else if (identStart(c)) {
      const size_t begin = i;
      while (i < n && identChar(static_cast<unsigned char>(s[i]))) ++i;
      out.tokens.push_back({Tok::kWord, lower(s.substr(begin, i - begin)), begin, i});
    } else if (c == '.' || c == '=' || c == ';' || c == ',') {
      out.tokens.push_back({Tok::kPunct, std::string(1, static_cast<char>(c)), i, i + 1});
      ++i;
    } else {
      const size_t begin = i++;
      out.tokens.push_back({Tok::kOther, std::string(s.substr(begin, 1)), begin, i});
    }
  }
  return out;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The key='value' pairs of a sqlcommenter comment body; false when it is not shaped like one.
bool parsePairs(std::string_view body, AgentOverrides& out) {
  size_t i = 0;
  auto skipSpace = [&] {
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
  };
  bool any_pair = false;
  AgentOverrides found;
  while (true) {
    skipSpace();
    if (i >= body.size()) break;
    const size_t key_begin = i;
    while (i < body.size() && body[i] != '=' && body[i] != ',' && !std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    const auto key = percentDecode(body.substr(key_begin, i - key_begin));
    skipSpace();
    if (!key || key->empty() || i >= body.size() || body[i] != '=') return false;
    ++i;
    skipSpace();
    if (i >= body.size() || body[i] != '\'') return false;
    ++i;
    std::string raw;
    bool closed = false;
    while (i < body.size()) {
      if (body[i] == '\\' && i + 1 < body.size() && body[i + 1] == '\'') {
        raw += '\'';
        i += 2;
      } else if (body[i] == '\'') {
        ++i;
        closed = true;
        break;
      } else {
        raw += body[i++];
      }
    }
    if (!closed) return false;
    any_pair = true;
    const auto value = percentDecode(raw);
    const auto k = agentKeyFromName(*key);
    if (value && k && agentValueProblem(*value).empty()) {
      switch (*k) {
        case AgentKey::kAgentId: found.agent_id = *value; break;
        case AgentKey::kConversationId: found.conversation_id = *value; break;
        case AgentKey::kQueryIntent: found.query_intent = *value; break;
        case AgentKey::kProvenance: break;
      }
    }
    skipSpace();
    if (i >= body.size()) break;
    if (body[i] != ',') return false;
    ++i;
  }
  if (!any_pair) return false;
  out = std::move(found);
  return true;
}

AgentCommand errorCommand(std::string sqlstate, std::string message) {
  AgentCommand c;
  c.kind = AgentCommand::Kind::kError;
  c.sqlstate = std::move(sqlstate);
  c.error = std::move(message);
  return c;
}

bool isWord(const Token& t, std::string_view w) { return t.type == Tok::kWord && t.text == w; }

}  // namespace

const char* agentKeyName(AgentKey key) {
  switch (key) {
    case AgentKey::kAgentId: return "agent_id";
    case AgentKey::kConversationId: return "conversation_id";
    case AgentKey::kQueryIntent: return "query_intent";
    case AgentKey::kProvenance: return "provenance";
  }
  return "agent_id";
}

std::optional<AgentKey> agentKeyFromName(std::string_view name) {
  const std::string n = lower(name);
  if (n == "agent_id") return AgentKey::kAgentId;
  if (n == "conversation_id") return AgentKey::kConversationId;
  if (n == "query_intent") return AgentKey::kQueryIntent;
  if (n == "provenance") return AgentKey::kProvenance;
  return std::nullopt;
}

std::string agentValueProblem(std::string_view value) {
  if (value.size() > kMaxAgentValueBytes) {
    return "the value is longer than " + std::to_string(kMaxAgentValueBytes) + " bytes";
  }
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return "the value contains a control character";
  }
  return {};
}

std::optional<std::string> percentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hexValue(s[i + 1]);
    const int lo = hexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

AgentOverrides parseSqlComment(std::string_view sql) {
  AgentOverrides out;
  // No "/*" anywhere: no block comment, so nothing to lex (most statements; no allocation).
  if (sql.find("/*") == std::string_view::npos) return out;
  const Lexed lx = lex(sql);
  if (!lx.ok || lx.comments.empty()) return out;
  // Tokens other than a trailing ';' decide what counts as "before" and "after".
  size_t first_tok = sql.size();
  size_t last_tok = 0;
  for (const auto& t : lx.tokens) {
    if (t.type == Tok::kPunct && t.text == ";") continue;
    first_tok = std::min(first_tok, t.begin);
    last_tok = std::max(last_tok, t.end);
  }
  auto body = [&](const Comment& c) { return sql.substr(c.begin + 2, c.end - c.begin - 4); };
  const Comment& first = lx.comments.front();
  if (first.end <= first_tok && parsePairs(body(first), out)) return out;
  const Comment& last = lx.comments.back();
  if (last.begin >= last_tok && parsePairs(body(last), out)) return out;
  return AgentOverrides{};
}

namespace {

// Whether `sql` holds "pgwarden" in any case: a command of ours must name the namespace, as a
// word (folded to lower case) or a quoted identifier (whose only escape, "", cannot spell it), so
// a text without it is no command and needs no lexing.
bool mentionsNamespace(std::string_view sql) {
  constexpr std::string_view kName = "pgwarden";
  for (size_t i = 0; i + kName.size() <= sql.size(); ++i) {
    if (lowerAscii(sql[i]) == 'p' && iequals(sql.substr(i, kName.size()), kName)) return true;
  }
  return false;
}

// Whether the text's first word may be SET, RESET or SHOW: a command's first token is that word,
// and nothing but white space or a comment comes before it. Most texts (SELECT ...) are settled
// by their first few bytes, without the search for the namespace.
bool mayBeCommand(std::string_view sql) {
  size_t i = 0;
  while (i < sql.size() && (sql[i] == ' ' || (sql[i] >= '\t' && sql[i] <= '\r'))) ++i;
  if (i < sql.size() && (sql[i] == '-' || sql[i] == '/')) return true;  // perhaps a comment
  size_t end = i;
  while (end < sql.size() && end - i <= 5 &&
         (std::isalnum(static_cast<unsigned char>(sql[end])) || sql[end] == '_' || sql[end] == '$' ||
          static_cast<unsigned char>(sql[end]) >= 0x80)) {
    ++end;
  }
  const std::string_view word = sql.substr(i, end - i);
  return iequals(word, "set") || iequals(word, "reset") || iequals(word, "show");
}

}  // namespace

AgentCommand parseAgentCommand(std::string_view sql) {
  if (!mayBeCommand(sql) || !mentionsNamespace(sql)) return {};
  const Lexed lx = lex(sql);
  if (!lx.ok) return {};
  // The tokens without a trailing ';' (a span: the command's few tokens are never copied).
  const std::vector<Token>& all = lx.tokens;
  const size_t count = !all.empty() && all.back().type == Tok::kPunct && all.back().text == ";" ? all.size() - 1 : all.size();
  const std::span<const Token> t(all.data(), count);
  if (t.empty()) return {};
  const bool set = isWord(t[0], "set");
  const bool reset = isWord(t[0], "reset");
  const bool show = isWord(t[0], "show");
  if (!set && !reset && !show) return {};
  size_t i = 1;
  bool local = false;
  if (set && i < t.size() && (isWord(t[i], "session") || isWord(t[i], "local"))) {
    local = t[i].text == "local";
    ++i;
  }
  // pgwarden . key  (either part may be double-quoted; unquoted words are case-insensitive)
  auto part = [&](size_t k) -> std::optional<std::string> {
    if (k >= t.size()) return std::nullopt;
    if (t[k].type == Tok::kWord) return t[k].text;
    if (t[k].type == Tok::kQuotedIdent) return t[k].text;
    return std::nullopt;
  };
  const auto ns = part(i);
  if (!ns || *ns != "pgwarden" || i + 1 >= t.size() || t[i + 1].type != Tok::kPunct || t[i + 1].text != ".") {
    return {};
  }
  // From here on the text names our namespace: it is ours to answer, never the server's.
  const auto key_name = part(i + 2);
  if (!key_name) return errorCommand("42601", "expected a setting name after \"pgwarden.\"");
  const auto key = agentKeyFromName(*key_name);
  if (!key) {
    return errorCommand("42704", "unrecognized configuration parameter \"pgwarden." + *key_name +
                                     "\"; pgwarden accepts pgwarden.agent_id, pgwarden.conversation_id "
                                     "and pgwarden.query_intent");
  }
  i += 3;
  AgentCommand c;
  c.key = *key;
  c.local = local;
  if (show || reset) {
    if (i != t.size()) return errorCommand("42601", std::string("syntax error in ") + (show ? "SHOW" : "RESET") + " pgwarden." + agentKeyName(*key));
    c.kind = show ? AgentCommand::Kind::kShow : AgentCommand::Kind::kReset;
    return c;
  }
  if (i >= t.size() || !((t[i].type == Tok::kPunct && t[i].text == "=") || isWord(t[i], "to"))) {
    return errorCommand("42601", std::string("expected = or TO after pgwarden.") + agentKeyName(*key));
  }
  ++i;
  if (i + 1 != t.size()) {
    return errorCommand("42601", std::string("pgwarden.") + agentKeyName(*key) + " takes one value, e.g. SET pgwarden." +
                                     agentKeyName(*key) + " = 'value'");
  }
  const Token& v = t[i];
  if (isWord(v, "default")) {
    c.kind = AgentCommand::Kind::kReset;
    return c;
  }
  if (v.type != Tok::kString && v.type != Tok::kWord && v.type != Tok::kQuotedIdent && v.type != Tok::kOther) {
    return errorCommand("42601", std::string("expected a quoted value for pgwarden.") + agentKeyName(*key));
  }
  if (v.type == Tok::kOther && !std::isdigit(static_cast<unsigned char>(v.text[0]))) {
    return errorCommand("42601", std::string("expected a quoted value for pgwarden.") + agentKeyName(*key));
  }
  // A bare number lexes digit by digit after the first; take the raw text instead.
  std::string value = v.type == Tok::kOther ? std::string(sql.substr(v.begin, v.end - v.begin)) : v.text;
  if (std::string why = agentValueProblem(value); !why.empty()) {
    return errorCommand("22023", "invalid value for pgwarden." + std::string(agentKeyName(*key)) + ": " + why);
  }
  c.kind = AgentCommand::Kind::kSet;
  c.value = std::move(value);
  return c;
}

const char* agentCommandTag(const AgentCommand& cmd) {
  switch (cmd.kind) {
    case AgentCommand::Kind::kSet: return "SET";
    case AgentCommand::Kind::kReset: return "RESET";
    case AgentCommand::Kind::kShow: return "SHOW";
    case AgentCommand::Kind::kNone:
    case AgentCommand::Kind::kError: return "";
  }
  return "";
}

}  // namespace pgwarden::guards

// ---- the ctx document ----

namespace pgwarden::guards {

namespace {

void addDistinct(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

}  // namespace

ContextDoc buildContextDoc(const GuardInput& in) {
  ContextDoc d;
  d.sql = std::string(in.sql);
  d.fingerprint = in.analysis.fingerprint_hex;
  d.user = std::string(in.ctx.user);
  d.database = std::string(in.ctx.database);
  d.group = in.ctx.group.empty() ? in.group.name : std::string(in.ctx.group);
  d.agent_id = std::string(in.ctx.agent_id);
  d.conversation_id = std::string(in.ctx.conversation_id);
  d.application_name = std::string(in.ctx.application_name);
  d.client_addr = std::string(in.ctx.client_addr);
  d.query_intent_sent = std::string(in.ctx.query_intent);
  d.extended = in.ctx.extended;
  for (size_t i = 0; i < in.analysis.statements.size(); ++i) {
    const analysis::StatementInfo& st = in.analysis.statements[i];
    ContextStatement cs;
    cs.kind = analysis::kindName(st.kind);
    cs.command = st.command;
    cs.intent = analysis::intentName(st.intent);
    if (st.limit == analysis::LimitKind::kConstant) cs.limit = st.limit_value;
    for (const auto& r : st.relations) {
      ContextTable t{r.schema.empty() ? r.name : r.schema + "." + r.name, r.has_predicate,
                     r.written};
      addDistinct(d.tables, t.name);
      auto [it, fresh] = d.has_predicate.emplace(t.name, t.has_predicate);
      if (!fresh) it->second = it->second && t.has_predicate;
      cs.tables.push_back(std::move(t));
    }
    for (const auto& f : st.functions) {
      addDistinct(d.functions, f);
      cs.functions.push_back(f);
    }
    d.kinds.push_back(cs.kind);
    if (i == 0) {
      d.limit = cs.limit;
      d.query_intent_inferred = cs.intent;
    }
    d.statements.push_back(std::move(cs));
  }
  d.query_intent = d.query_intent_sent.empty() ? d.query_intent_inferred : d.query_intent_sent;
  if (in.ctx.budgets) {
    const BudgetCounters c = in.ctx.budgets->countersFor(in.ctx);
    d.has_budget = true;
    d.budget_statements = c.statements;
    d.budget_denied = c.denied;
    d.budget_rows = c.rows;
  }
  return d;
}

std::string contextJson(const ContextDoc& d) {
  using nlohmann::json;
  json j;
  j["sql"] = d.sql;
  j["fingerprint"] = d.fingerprint;
  j["user"] = d.user;
  j["database"] = d.database;
  j["group"] = d.group;
  j["agent_id"] = d.agent_id;
  j["conversation_id"] = d.conversation_id;
  j["query_intent"] = d.query_intent;
  j["query_intent_sent"] = d.query_intent_sent;
  j["query_intent_inferred"] = d.query_intent_inferred;
  j["application_name"] = d.application_name;
  j["client_addr"] = d.client_addr;
  j["extended"] = d.extended;
  j["kinds"] = d.kinds;
  j["tables"] = d.tables;
  j["functions"] = d.functions;
  j["has_predicate"] = json::object();
  for (const auto& [t, p] : d.has_predicate) j["has_predicate"][t] = p;
  j["limit"] = d.limit ? json(*d.limit) : json(nullptr);
  json sts = json::array();
  for (const auto& s : d.statements) {
    json o;
    o["kind"] = s.kind;
    o["command"] = s.command;
    o["intent"] = s.intent;
    json tables = json::array();
    for (const auto& t : s.tables) {
      tables.push_back({{"name", t.name}, {"has_predicate", t.has_predicate}, {"written", t.written}});
    }
    o["tables"] = std::move(tables);
    o["functions"] = s.functions;
    o["limit"] = s.limit ? json(*s.limit) : json(nullptr);
    sts.push_back(std::move(o));
  }
  j["statements"] = std::move(sts);
  if (d.has_budget) {
    j["budget"] = {{"statements", d.budget_statements}, {"denied", d.budget_denied}, {"rows", d.budget_rows}};
  } else {
    j["budget"] = nullptr;
  }
  // Invalid UTF-8 in the text (the server would refuse it anyway) is replaced, never a throw.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace pgwarden::guards
