// Shared guard helpers (see guard_util.h), the Facts renderer, the code -> SQLSTATE table and the
// guard registry plumbing.
#include "guards/guard_util.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/config_util.h"
#include "guards/codes.h"

namespace pgwarden::guards {

namespace codes {

std::string_view sqlstateFor(std::string_view code) {
  if (code == kMissingPredicate || code == kLimitTooLarge || code == kLimitRequired ||
      code == kFunctionLimit || code == kRecursionUnbounded || code == kSeqScan ||
      code == kCostTooHigh || code == kJoinExplosion) {
    return kSqlstateLimit;
  }
  if (code == kRangeTooWide) return kSqlstateLimit;
  if (code == kInvalidArguments || code == kRangeReversed || code == kRangeRequired) return kSqlstateInvalidParameter;
  if (code == kSyntaxError) return kSqlstateSyntax;
  if (code == kInvalidEncoding) return kSqlstateCharacterNotInRepertoire;
  if (code == kPlanUnavailable) return kSqlstateUnavailable;
  if (code == kRowsCapped || code == kRowsTruncated || code == kUntrustedRead)
    return kSqlstateWarning;
  if (code == kTooManyRows) return kSqlstateLimit;
  if (code == kLookFirst) return kSqlstatePrerequisite;
  if (code == kTransactionRequired) return kSqlstateNoTransaction;
  if (code == kTransactionRolledBack) return kSqlstateTransactionTimeout;
  if (code == kSessionState) return kSqlstateNotSupported;
  if (code == kTransactionOpen || code == kTransactionCommitted || code == kTransactionDiscarded) {
    return kSqlstateNotice;
  }
  return kSqlstatePolicy;
}

}  // namespace codes

// ---- GuardResult ----

void GuardResult::clear() {
  action = Action::kAllow;
  code.clear();
  sqlstate.clear();
  message.clear();
  hint.clear();
  facts.clear();
  subject.clear();
  edits.clear();
  max_rows = -1;
  truncation_notice.clear();
  wants_plan = false;
  wants_webhook = false;
  webhook_body.clear();
}

// ---- Facts ----

Facts::Item& Facts::push(std::string key, Encoding encoding) {
  // Verdicts carry two to four facts: one allocation instead of growing 1, 2, 4.
  if (items_.empty()) items_.reserve(4);
  Item& it = items_.emplace_back();
  it.key = std::move(key);
  it.encoding = encoding;
  return it;
}

Facts& Facts::add(std::string key, std::string_view text) {
  push(std::move(key), Encoding::kString).text.assign(text);
  return *this;
}

Facts& Facts::add(std::string key, int64_t n) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof buf, n);
  push(std::move(key), Encoding::kRaw).text.assign(buf, res.ptr);
  return *this;
}

Facts& Facts::add(std::string key, double n) {
  char buf[64];
  if (!std::isfinite(n)) n = 0;
  std::snprintf(buf, sizeof buf, "%.10g", n);
  push(std::move(key), Encoding::kRaw).text.assign(buf);
  return *this;
}

Facts& Facts::add(std::string key, bool b) {
  push(std::move(key), Encoding::kRaw).text.assign(b ? "true" : "false");
  return *this;
}

Facts& Facts::addNull(std::string key) {
  push(std::move(key), Encoding::kRaw).text.assign("null");
  return *this;
}

Facts& Facts::add(std::string key, const std::vector<std::string>& list) {
  std::string json = "[";
  std::string text;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) {
      json += ",";
      text += ", ";
    }
    json.push_back('"');
    util::appendJsonEscaped(json, list[i]);
    json.push_back('"');
    text += list[i];
  }
  json += "]";
  Item& it = push(std::move(key), Encoding::kPrebuilt);
  it.text = std::move(text);
  it.json = std::move(json);
  return *this;
}

std::string Facts::json(std::string_view code) const {
  size_t size = code.size() + 16;
  for (const auto& it : items_) size += it.key.size() + std::max(it.text.size(), it.json.size()) + 8;
  std::string out;
  out.reserve(size);
  out += "{\"code\":\"";
  util::appendJsonEscaped(out, code);
  out.push_back('"');
  for (const auto& it : items_) {
    out += ",\"";
    util::appendJsonEscaped(out, it.key);
    out += "\":";
    switch (it.encoding) {
      case Encoding::kString:
        out.push_back('"');
        util::appendJsonEscaped(out, it.text);
        out.push_back('"');
        break;
      case Encoding::kRaw: out += it.text; break;
      case Encoding::kPrebuilt: out += it.json; break;
    }
  }
  out += "}";
  return out;
}

const std::string* Facts::text(std::string_view key) const {
  for (const auto& it : items_) {
    if (it.key == key) return &it.text;
  }
  return nullptr;
}

// ---- registry ----

const GuardFactory* GuardRegistry::find(std::string_view kind) const {
  auto it = factories_.find(kind);
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<std::string> GuardRegistry::kinds() const {
  std::vector<std::string> out;
  for (const auto& [k, f] : factories_) out.push_back(k);
  return out;
}

void checkGuardKeys(const YAML::Node& node, const std::string& path,
                    std::initializer_list<const char*> own, config::SourceSite site) {
  // config::checkKeys takes an initializer_list; build the union here and check by hand with the
  // same message shape.
  std::vector<std::string> allowed(std::begin(kCommonGuardKeys), std::end(kCommonGuardKeys));
  for (const char* k : own) allowed.emplace_back(k);
  config::notifyKnownKeys(site, path, allowed);
  config::requireMap(node, path);
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw config::ConfigError(config::lineOf(kv.first), path + "." + key,
                                "unknown key '" + key + "' (allowed here: " + list + ")");
    }
  }
}

namespace util {



namespace {

// "schema.name" read in place, for globMatch.
struct QualifiedName {
  std::string_view schema;
  std::string_view name;
  size_t size() const { return schema.size() + 1 + name.size(); }
  char operator[](size_t i) const {
    return i < schema.size() ? schema[i] : i == schema.size() ? '.' : name[i - schema.size() - 1];
  }
};

template <typename Text>
bool globMatchText(std::string_view p, const Text& t, bool icase) {
  auto eq = [icase](char a, char b) {
    return icase ? std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b))
                 : a == b;
  };
  // Iterative matcher with one backtrack point: linear for the patterns config holds.
  size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '?' || (p[pi] != '*' && eq(p[pi], t[ti])))) {
      ++pi;
      ++ti;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace

bool globMatch(std::string_view p, std::string_view t, bool icase) { return globMatchText(p, t, icase); }

bool globMatch(std::string_view p, std::string_view schema, std::string_view name, bool icase) {
  return globMatchText(p, QualifiedName{schema, name}, icase);
}

std::string jsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  appendJsonEscaped(out, s);
  return out;
}

void appendJsonEscaped(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
}

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n);
  const bool neg = digits[0] == '-';
  if (neg) digits.erase(0, 1);
  std::string out;
  const size_t len = digits.size();
  for (size_t i = 0; i < len; ++i) {
    out += digits[i];
    if ((len - i - 1) % 3 == 0 && i + 1 < len) out += ',';
  }
  return neg ? "-" + out : out;
}

std::string approxCount(int64_t n) {
  if (n < 100) return "about " + withCommas(n);
  int64_t scale = 1;
  while (n / scale >= 100) scale *= 10;
  const int64_t rounded = static_cast<int64_t>(std::llround(static_cast<double>(n) / scale)) * scale;
  return "about " + withCommas(rounded);
}

std::string quoteIdent(std::string_view name) {
  bool plain = !name.empty() && (std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name) {
    plain = plain && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
                      c == '_');
  }
  if (plain) return std::string(name);
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string displayName(std::string_view schema, std::string_view name) {
  if (schema.empty()) return quoteIdent(name);
  return quoteIdent(schema) + "." + quoteIdent(name);
}

std::vector<std::string> candidates(const analysis::RelationRef& rel, const GroupSettings& group) {
  std::vector<std::string> out;
  forEachCandidateSchema(rel.schema, rel.name, group, [&](std::string_view schema) {
    out.push_back(std::string(schema).append(".").append(rel.name));
    return false;
  });
  return out;
}

namespace {

// What findStats found: the table's statistics (null when none), and the schema it was found in,
// or when not found the first schema it was looked for in (`any` false: none was tried).
struct StatsLookup {
  const analysis::TableStats* found = nullptr;
  std::string_view schema;
  bool any = false;
};

StatsLookup lookupStats(const analysis::TableStatsSnapshot* stats, std::string_view schema,
                        std::string_view name, const GroupSettings& group) {
  // candidates()'s order, walked without building its strings: this runs for several guards and
  // screens on every statement.
  StatsLookup out;
  forEachCandidateSchema(schema, name, group, [&](std::string_view in) {
    if (!out.any) out.schema = in;
    out.any = true;
    if (!out.found && stats) {
      out.found = stats->find(in, name);
      if (out.found) out.schema = in;
    }
    return out.found != nullptr;
  });
  return out;
}

}  // namespace

const analysis::TableStats* findStats(const analysis::TableStatsSnapshot* stats,
                                      const analysis::RelationRef& rel, const GroupSettings& group,
                                      std::string* resolved) {
  const StatsLookup l = lookupStats(stats, rel.schema, rel.name, group);
  if (resolved) {
    if (l.any) {
      resolved->assign(l.schema).append(".").append(rel.name);
    } else {
      *resolved = rel.name;
    }
  }
  return l.found;
}

const analysis::TableStats* findStats(const analysis::TableStatsSnapshot* stats,
                                      std::string_view schema, std::string_view name,
                                      const GroupSettings& group, std::string_view* found_schema) {
  const StatsLookup l = lookupStats(stats, schema, name, group);
  if (l.found && found_schema) *found_schema = l.schema;
  return l.found;
}

std::string examplePredicate(std::string_view column, std::string_view type,
                             const analysis::ColumnStats* stats) {
  const std::string col = quoteIdent(column);
  const std::string t = lower(type);
  std::string low, high;
  // The newest week the data holds, or its highest value: a condition that finds rows, never an
  // example dated by the clock on data that stopped years ago.
  if (stats && stats->bounds(&low, &high) && high.find('\'') == std::string::npos) {
    if (t == "date") return col + " >= DATE '" + high + "' - 7";
    if (t.rfind("timestamp", 0) == 0)
      return col + " >= '" + high + "'::" + t + " - interval '7 days'";
    if (stats->category == 'N') return col + " = " + high;
  }
  if (t == "date") return col + " >= current_date - 7";
  if (t.rfind("timestamp", 0) == 0) return col + " >= now() - interval '7 days'";
  if (t == "smallint" || t == "integer" || t == "bigint" || t.rfind("numeric", 0) == 0 ||
      t == "real" || t == "double precision" || t == "int2" || t == "int4" || t == "int8") {
    return col + " = 42";
  }
  if (t == "boolean") return col + " = true";
  if (t == "uuid") return col + " = '00000000-0000-0000-0000-000000000000'";
  return col + " = 'value'";
}

std::string examplePredicate(const analysis::TableStats& table) {
  if (table.indexed_columns.empty()) return {};
  const std::string& column = table.indexed_columns.front();
  const std::string type =
      table.indexed_column_types.empty() ? "" : table.indexed_column_types.front();
  const auto it = table.columns.find(column);
  return examplePredicate(column, type, it == table.columns.end() ? nullptr : &it->second);
}

std::string excerpt(std::string_view s, size_t max) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  if (out.size() <= max) return out;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  return out.substr(0, cut) + "...";
}

std::string_view statementText(std::string_view sql, const analysis::StatementInfo& st) {
  const size_t begin = std::min<size_t>(static_cast<size_t>(std::max(st.location, 0)), sql.size());
  const size_t len = std::min<size_t>(static_cast<size_t>(std::max(st.length, 0)), sql.size() - begin);
  std::string_view t = sql.substr(begin, len);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  return t;
}

}  // namespace util
// ---- housekeeping (policy.h) ----

bool isSessionHousekeeping(analysis::StatementKind kind) {
  // Every kind listed, no default: a kind added later must be placed on one side on purpose.
  switch (kind) {
    case analysis::StatementKind::kSet:
    case analysis::StatementKind::kReset:
    case analysis::StatementKind::kShow:
    case analysis::StatementKind::kTransaction:
    case analysis::StatementKind::kDiscard:
    case analysis::StatementKind::kDeallocate:
    case analysis::StatementKind::kClosePortal:
      return true;
    case analysis::StatementKind::kSelect:
    case analysis::StatementKind::kInsert:
    case analysis::StatementKind::kUpdate:
    case analysis::StatementKind::kDelete:
    case analysis::StatementKind::kMerge:
    case analysis::StatementKind::kDdl:
    case analysis::StatementKind::kExplain:
    case analysis::StatementKind::kCopy:
    case analysis::StatementKind::kCall:
    case analysis::StatementKind::kDo:
    case analysis::StatementKind::kPrepare:
    case analysis::StatementKind::kExecute:
    case analysis::StatementKind::kDeclareCursor:
    case analysis::StatementKind::kFetch:
    case analysis::StatementKind::kListen:
    case analysis::StatementKind::kNotify:
    case analysis::StatementKind::kUnlisten:
    case analysis::StatementKind::kMaintenance:
    case analysis::StatementKind::kLock:
    case analysis::StatementKind::kAlterSystem:
    case analysis::StatementKind::kLoad:
    case analysis::StatementKind::kOther:
      return false;
  }
  return false;
}

bool isSessionHousekeeping(const analysis::Analysis& analysis) {
  return std::all_of(
      analysis.statements.begin(), analysis.statements.end(),
      [](const analysis::StatementInfo& st) { return isSessionHousekeeping(st.kind); });
}

}  // namespace pgwarden::guards
