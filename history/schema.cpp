// DDL for the history table in both dialects, and Record -> column values. Both dialects use the
// same column names so that the reports' SQL runs against either store.
#include "history/schema.h"

#include <algorithm>

#include "history/json.h"

namespace pgwarden::history {

namespace {

// A column's default: what a row written before the column existed holds. Null for the columns
// without one (timestamps are always written; record_uid is NULL when the record had no spool).
const char* defaultValue(ColumnType t, Dialect d) {
  switch (t) {
    case ColumnType::kInt: return "0";
    case ColumnType::kText: return "''";
    case ColumnType::kBool: return d == Dialect::kPostgres ? "false" : "0";
    case ColumnType::kJson: return "'[]'";
    case ColumnType::kTimestamp:
    case ColumnType::kUid: return nullptr;
  }
  return nullptr;
}

std::string sqlType(ColumnType t, Dialect d) {
  const bool pg = d == Dialect::kPostgres;
  const char* type = "TEXT";
  switch (t) {
    case ColumnType::kTimestamp: type = pg ? "timestamptz" : "TEXT"; break;
    case ColumnType::kInt: type = pg ? "bigint" : "INTEGER"; break;
    case ColumnType::kText: type = pg ? "text" : "TEXT"; break;
    case ColumnType::kBool: type = pg ? "boolean" : "INTEGER"; break;
    case ColumnType::kJson: type = pg ? "jsonb" : "TEXT"; break;
    case ColumnType::kUid: return pg ? "text" : "TEXT";
  }
  const char* def = defaultValue(t, d);
  return std::string(type) + " NOT NULL" + (def != nullptr ? std::string(" DEFAULT ") + def : "");
}

// The result screens' entries in guard_actions (session/statement_policy.cpp writes the list; each
// screen finding is one {"guard":"result_screen",...}): counted from the record's own text, so a
// record that went through the spool keeps its count.
int64_t screenFindings(std::string_view guard_actions) {
  static constexpr std::string_view kEntry = "{\"guard\":\"result_screen\"";
  int64_t n = 0;
  for (size_t at = guard_actions.find(kEntry); at != std::string_view::npos;
       at = guard_actions.find(kEntry, at + kEntry.size())) {
    ++n;
  }
  return n;
}

}  // namespace

void RowValues::assign(const Record& r) {
  tables_json_.clear();
  tables_json_ += '[';
  for (const auto& t : r.tables) {
    if (tables_json_.size() > 1) tables_json_ += ',';
    appendJsonString(tables_json_, t);
  }
  tables_json_ += ']';
  const std::string_view uid = formatRecordUid(r, uid_.data(), uid_.size());

  auto ts = [this](int64_t v, size_t k) {
    formatTimestampUs(v, stamps_[k].data());
    return Value{ColumnType::kTimestamp, v, std::string_view(stamps_[k].data(), kTimestampChars)};
  };
  auto num = [](int64_t v) { return Value{ColumnType::kInt, v, {}}; };
  auto txt = [](std::string_view v) { return Value{ColumnType::kText, 0, v}; };
  auto flag = [](bool v) { return Value{ColumnType::kBool, v ? 1 : 0, {}}; };
  auto json = [](std::string_view v) { return Value{ColumnType::kJson, 0, v}; };
  values_ = {{
      ts(r.started_at_us, 0),
      ts(r.finished_at_us, 1),
      num(r.duration_us),
      txt(r.instance_id),
      num(static_cast<int64_t>(r.session_id)),
      txt(r.user),
      txt(r.database),
      txt(r.policy_group),
      txt(r.client_addr),
      txt(r.application_name),
      txt(r.agent_id),
      txt(r.conversation_id),
      txt(r.query_intent_sent),
      txt(r.query_intent_inferred),
      txt(r.statement_kind),
      json(tables_json_),
      txt(r.sql_text),
      flag(r.sql_truncated),
      txt(r.fingerprint),
      json(r.guard_actions.empty() ? std::string_view("[]") : std::string_view(r.guard_actions)),
      txt(outcomeName(r.outcome)),
      txt(r.deny_code),
      txt(r.sqlstate),
      txt(r.error_message),
      num(r.rows_returned),
      flag(r.truncated),
      num(r.rows_affected),
      num(r.bytes_sent),
      txt(r.protocol),
      flag(r.single_zero),
      num(screenFindings(r.guard_actions)),
      txt(r.tool_name),
      txt(r.tool_args),
      num(0),
      txt(""),  // chain fields: "" rather than a null view, which SQLite would bind as NULL
      txt(""),
      txt(r.request_id),
      txt(r.traceparent),
      txt(r.host),
      Value{ColumnType::kUid, 0, uid},
  }};
}

void RowValues::setChain(uint64_t seq, std::string_view key_id, std::string_view hash_hex) {
  values_[kChainSeqField].i = static_cast<int64_t>(seq);
  values_[kChainKeyField].text = key_id;
  values_[kChainHashField].text = hash_hex;
}

std::string columnList() {
  std::string out;
  for (const auto& c : kColumns) {
    if (!out.empty()) out += ", ";
    out += c.name;
  }
  return out;
}

std::string addColumn(Dialect d, std::string_view name) {
  ColumnType type = ColumnType::kText;
  for (const auto& c : kColumns) {
    if (name == c.name) type = c.type;
  }
  return std::string("ALTER TABLE ") + kHistoryTable + " ADD COLUMN " +
         (d == Dialect::kPostgres ? "IF NOT EXISTS " : "") + std::string(name) + " " + sqlType(type, d);
}

std::string sqliteOlderTableView(const std::vector<std::string>& present) {
  std::string added;
  for (const auto& c : kColumns) {
    if (std::find(present.begin(), present.end(), c.name) != present.end()) continue;
    const char* def = defaultValue(c.type, Dialect::kSqlite);
    added += std::string(", ") + (def != nullptr ? def : "NULL") + " AS " + c.name;
  }
  if (added.empty()) return "";
  return std::string("CREATE TEMP VIEW ") + kHistoryTable + " AS SELECT *" + added +
         " FROM main." + kHistoryTable;
}

std::vector<std::string> schemaStatements(Dialect d) {
  const bool pg = d == Dialect::kPostgres;
  std::string table = std::string("CREATE TABLE IF NOT EXISTS ") + kHistoryTable + " (\n  id " +
                      (pg ? "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
                          : "INTEGER PRIMARY KEY");
  for (const auto& c : kColumns) {
    table += std::string(",\n  ") + c.name + " " + sqlType(c.type, d);
  }
  table += "\n)";
  const std::string version =
      std::string("CREATE TABLE IF NOT EXISTS ") + kSchemaTable + " (version " +
      (pg ? "integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
          : "INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT "
            "(strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))");
  auto index = [&](const char* col) {
    return std::string("CREATE INDEX IF NOT EXISTS ") + kHistoryTable + "_" + col + "_idx ON " +
           kHistoryTable + " (" + col + ")";
  };
  // NULLs are distinct in a unique index: records without a spool id coexist. SQLite keeps the
  // spool's high-water mark instead (kSpoolTable: epoch as record_uid's 16 hex digits).
  const std::string uid_index = pg ? std::string("CREATE UNIQUE INDEX IF NOT EXISTS ") + kUidIndex +
                                         " ON " + kHistoryTable + " (" + kUidColumn + ")"
                                   : std::string("CREATE TABLE IF NOT EXISTS ") + kSpoolTable +
                                         " (epoch TEXT PRIMARY KEY, last_seq INTEGER NOT NULL)";
  const std::string record_version =
      std::string("INSERT INTO ") + kSchemaTable + " (version) VALUES (" +
      std::to_string(kSchemaVersion) + ") ON CONFLICT (version) DO NOTHING";
  std::vector<std::string> out{table};
  if (pg) {
    for (const char* column : kAddedColumns) out.push_back(addColumn(d, column));
  }
  // No index on outcome: without statistics SQLite chose it over started_at for the reports'
  // outcome conditions and read every 'ok' record of the store, and each index costs the writer
  // per record (docs/performance.md, "The history writer (2026-12-06)"). A file or table from
  // before loses it.
  const std::string no_outcome_index =
      std::string("DROP INDEX IF EXISTS ") + kHistoryTable + "_outcome_idx";
  for (auto& s : {version, index("started_at"), index("conversation_id"), index("fingerprint"),
                  no_outcome_index, uid_index, record_version}) {
    out.push_back(s);
  }
  return out;
}

}  // namespace pgwarden::history
