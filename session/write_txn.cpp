// The guarded-writes state machine: legality of each move, the judgement of a text before it runs
// (LOOK_FIRST, TRANSACTION_REQUIRED, MISSING_PREDICATE, DDL, escapes), the row caps, and the
// notices. The read_only and functions guards' own logic judges everything that is not a write.
#include "session/write_txn.h"

#include <algorithm>
#include <charconv>

#include "guards/codes.h"
#include "guards/guard_util.h"
#include "protocol/messages.h"

namespace pgwarden::session {

namespace codes = guards::codes;
using analysis::StatementInfo;
using analysis::StatementKind;
using guards::Action;
using guards::GuardResult;

namespace {

constexpr size_t kMaxTables = 32;
constexpr size_t kMaxChanges = 16;
constexpr size_t kMaxLooked = 256;
constexpr size_t kMaxMarks = 32;
// The tables a write's count reads (the countersQuery's LIMIT): a transaction that changed more
// tables than this is counted by its busiest ones.
constexpr size_t kMaxCounted = 64;
constexpr const char* kNextMoves = "SELECT to inspect, COMMIT to keep, ROLLBACK to undo";

// DDL that changes who may do what, or hides code that runs later with other rights: never in a
// write group, whatever allow_ddl says.
constexpr std::string_view kEscapeCommands[] = {
    "GRANT",           "GRANT ROLE",      "REVOKE",          "CREATE POLICY",   "ALTER POLICY",
    "DROP POLICY",          "CREATE ROLE",     "ALTER ROLE",      "DROP ROLE",
    "CREATE USER",     "ALTER USER",      "DROP USER",       "CREATE GROUP",    "ALTER GROUP",
    "DROP GROUP",      "ALTER DEFAULT PRIVILEGES", "REASSIGN OWNED", "DROP OWNED",
    "SECURITY LABEL",  "CREATE FUNCTION", "ALTER FUNCTION",  "CREATE PROCEDURE",
    "CREATE TRIGGER",  "CREATE EVENT TRIGGER", "ALTER EVENT TRIGGER", "CREATE RULE",
    "CREATE EXTENSION", "ALTER EXTENSION", "CREATE LANGUAGE", "CREATE DATABASE", "ALTER DATABASE",
    "DROP DATABASE",   "CREATE SERVER",   "CREATE FOREIGN DATA WRAPPER", "CREATE PUBLICATION",
    "CREATE SUBSCRIPTION", "ALTER SUBSCRIPTION",
};

bool isEscapeDdl(std::string_view command) {
  for (auto c : kEscapeCommands) {
    if (command == c) return true;
  }
  return false;
}

bool isDml(StatementKind k) {
  return k == StatementKind::kInsert || k == StatementKind::kUpdate || k == StatementKind::kDelete ||
         k == StatementKind::kMerge;
}

GuardResult denial(std::string_view code, std::string message, std::string hint, std::string subject) {
  GuardResult r;
  r.action = Action::kDeny;
  r.code = std::string(code);
  r.message = std::move(message);
  r.hint = std::move(hint);
  r.subject = std::move(subject);
  return r;
}

std::string seconds(uint64_t ms) { return std::to_string((ms + 999) / 1000) + "s"; }

}  // namespace

const char* txnStateName(TxnState s) {
  switch (s) {
    case TxnState::kNone: return "none";
    case TxnState::kOpen: return "open";
    case TxnState::kFailed: return "failed";
    case TxnState::kRolledBack: return "rolled_back";
  }
  return "?";
}

const char* txnEndName(TxnEnd e) {
  switch (e) {
    case TxnEnd::kCommitted: return "committed";
    case TxnEnd::kRolledBack: return "client_rollback";
    case TxnEnd::kIdleTimeout: return "idle_timeout";
    case TxnEnd::kMaxAge: return "max_age";
    case TxnEnd::kDisconnect: return "disconnect";
  }
  return "?";
}

bool WriteTransaction::move(TxnEvent e, uint64_t now_ms) {
  std::optional<TxnState> to;
  switch (state_) {
    case TxnState::kNone:
      if (e == TxnEvent::kServerIdle) to = TxnState::kNone;
      if (e == TxnEvent::kServerInTxn) to = TxnState::kOpen;
      if (e == TxnEvent::kServerFailed) to = TxnState::kFailed;
      if (to && *to != TxnState::kNone) began_ms_ = now_ms;
      break;
    case TxnState::kOpen:
    case TxnState::kFailed:
      if (e == TxnEvent::kServerIdle) to = TxnState::kNone;
      if (e == TxnEvent::kServerInTxn) to = TxnState::kOpen;
      if (e == TxnEvent::kServerFailed) to = TxnState::kFailed;
      if (e == TxnEvent::kExpired) {
        to = TxnState::kRolledBack;
        expired_by_ = now_ms >= began_ms_ + static_cast<uint64_t>(mode_.max_age.count())
                          ? TxnEnd::kMaxAge
                          : TxnEnd::kIdleTimeout;
        lost_ = summary();
        lost_rows_ = rows_;
      }
      break;
    case TxnState::kRolledBack:
      // The ROLLBACK pgwarden sent answers with 'I'; the state waits for the client to be told.
      if (e == TxnEvent::kServerIdle) to = TxnState::kRolledBack;
      if (e == TxnEvent::kTold) to = TxnState::kNone;
      break;
  }
  if (!to) return false;
  state_ = *to;
  last_ms_ = now_ms;
  return true;
}

std::string WriteTransaction::key(std::string_view schema, std::string_view name) {
  return schema.empty() ? std::string(name) : std::string(schema) + "." + std::string(name);
}

bool WriteTransaction::looked(std::string_view schema, std::string_view name) const {
  // An unqualified name on either side matches the same table name in any schema: the session's
  // search_path is fixed by its group, so "t" and "public.t" are the same table in practice.
  for (const auto& k : looked_) {
    const auto dot = k.find('.');
    const std::string_view kn = dot == std::string::npos ? std::string_view(k) : std::string_view(k).substr(dot + 1);
    const std::string_view ks = dot == std::string::npos ? std::string_view() : std::string_view(k).substr(0, dot);
    if (kn == name && (schema.empty() || ks.empty() || ks == schema)) return true;
  }
  return false;
}

void WriteTransaction::noteRead(const StatementInfo& st) {
  for (const auto& r : st.relations) {
    if (r.written || looked(r.schema, r.name)) continue;
    if (looked_.size() >= kMaxLooked) looked_.erase(looked_.begin());
    looked_.push_back(key(r.schema, r.name));
  }
}

WriteTransaction::Judgement WriteTransaction::judge(const guards::GuardInput& in, bool extended) const {
  Judgement j;
  if (state_ == TxnState::kRolledBack) {
    j.deny = rolledBackDenial();
    return j;
  }
  for (const auto& st : in.analysis.statements) {
    if (auto d = judgeStatement(in, st, extended, j)) {
      j.deny = std::move(d);
      j.wrap = false;
      return j;
    }
  }
  return j;
}

std::optional<GuardResult> WriteTransaction::judgeStatement(const guards::GuardInput& in,
                                                            const StatementInfo& st, bool extended,
                                                            Judgement& j) const {
  if (mode_.function_checks) {
    GuardResult r = mode_.function_checks->checkStatement(in, st);
    if (r.action == Action::kDeny) return r;
  }
  const bool truncate = st.kind == StatementKind::kDelete && st.command == "TRUNCATE";
  const bool ddl = st.kind == StatementKind::kDdl || truncate;
  const bool alone = in.analysis.statements.size() == 1;
  if (isDml(st.kind) || ddl) {
    if (ddl && isEscapeDdl(st.command)) {
      return denial(codes::kWriteEscape,
                    st.command + " changes who may do what (or installs code that runs later) and is "
                    "never allowed through pgwarden's write mode; ask a database administrator.",
                    "", st.command);
    }
    if (ddl && !mode_.allow_ddl) {
      GuardResult r = denial(codes::kDdlNotAllowed,
                             st.command + " is not allowed in this group (allow_ddl is off); change "
                             "rows with INSERT, UPDATE or DELETE inside BEGIN ... COMMIT instead.",
                             "BEGIN", st.command);
      r.facts.add("statement", st.command).add("next_step", "change rows, not objects");
      return r;
    }
    if (!alone) {
      GuardResult r = denial(codes::kWriteNotAlone,
                             st.command + " must be sent on its own, one statement per query, so "
                             "pgwarden can count what it changed; split the text.",
                             "", st.command);
      r.facts.add("statements", static_cast<int64_t>(in.analysis.statements.size()));
      return r;
    }
    if (st.modifying_cte) {
      return denial(codes::kWriteHidden,
                    "A WITH clause that runs INSERT, UPDATE, DELETE or MERGE is not allowed: pgwarden "
                    "counts and caps one write per statement; send each write as its own statement.",
                    "", st.command);
    }
    std::string target;
    for (const auto& r : st.relations) {
      if (!r.written) continue;
      const std::string name = guards::util::displayName(r.schema, r.name);
      if (target.empty()) target = name;
      if ((st.kind == StatementKind::kUpdate || st.kind == StatementKind::kDelete) && !truncate &&
          (!r.has_predicate || r.trivial_predicate)) {
        GuardResult d = denial(codes::kMissingPredicate,
                               st.command + " of " + name + " without a WHERE clause that narrows "
                               "the rows would change every row; add a WHERE on the key of the "
                               "rows you mean (WHERE 1=1 and WHERE true do not count).",
                               st.command + " " + name + " ... WHERE id = 42", name);
        d.facts.add("table", name).add("statement", st.command).add("next_step", "add a WHERE clause");
        return d;
      }
    }
    // Over the extended protocol the text is judged at Parse; whether a transaction is open and
    // the table was looked at is judged when each Execute runs (judgeExecute).
    if (!extended) {
      if (auto d = stateDenial(st, target, state_ == TxnState::kNone)) return d;
    } else {
      j.at_execute = true;
    }
    if ((state_ == TxnState::kOpen || extended) && isDml(st.kind) && !truncate) {
      j.wrap = true;
      j.table = target;
      j.command = st.command;
    }
    return std::nullopt;
  }
  if (st.kind == StatementKind::kTransaction) {
    if (st.two_phase) {
      return denial(codes::kWriteEscape,
                    st.command + " (two-phase commit) would keep a transaction beyond this session; "
                    "use COMMIT or ROLLBACK.",
                    "COMMIT", st.command);
    }
    if (st.chain) {
      return denial(codes::kWriteEscape,
                    st.command + " AND CHAIN starts a new transaction pgwarden did not see begin; "
                    "send " + st.command + " and then BEGIN.",
                    st.command, st.command);
    }
    if (st.savepoint == kWriteSavepoint) {
      return denial(codes::kWriteEscape,
                    "The savepoint name " + std::string(kWriteSavepoint) + " is pgwarden's own (it "
                    "wraps each write); use another name for your savepoints.",
                    "SAVEPOINT my_step", st.command);
    }
    return std::nullopt;
  }
  if (mode_.read_checks) {
    GuardResult r = mode_.read_checks->checkStatement(in, st);
    if (r.action == Action::kDeny) return r;
  }
  return std::nullopt;
}

std::optional<GuardResult> WriteTransaction::stateDenial(const StatementInfo& st, const std::string& target,
                                                         bool no_transaction) const {
  if (no_transaction) {
    GuardResult r = denial(codes::kTransactionRequired,
                           st.command + " outside a transaction is not allowed: BEGIN first; you "
                           "will see what changed before it is kept (COMMIT) or undone (ROLLBACK).",
                           "BEGIN", target.empty() ? st.command : target);
    r.facts.add("statement", st.command).add("next_step", "BEGIN");
    return r;
  }
  if (!isDml(st.kind)) return std::nullopt;  // TRUNCATE too (its kind is kDelete); DDL needs no look
  for (const auto& r : st.relations) {
    if (!r.written || looked(r.schema, r.name)) continue;
    const std::string name = guards::util::displayName(r.schema, r.name);
    GuardResult d = denial(codes::kLookFirst,
                           "Look at " + name + " before changing it: read its rows with a "
                           "SELECT in this session first (the columns and the rows you are about "
                           "to change), then send the " + st.command + " again.",
                           "SELECT * FROM " + name + " LIMIT 10", name);
    d.facts.add("table", name).add("next_step", "SELECT from " + name + " first");
    return d;
  }
  return std::nullopt;
}

std::optional<GuardResult> WriteTransaction::judgeExecute(const StatementInfo& st, bool begin_sent) const {
  if (state_ == TxnState::kRolledBack) return rolledBackDenial();
  std::string target;
  for (const auto& r : st.relations) {
    if (r.written) {
      target = guards::util::displayName(r.schema, r.name);
      break;
    }
  }
  return stateDenial(st, target, state_ == TxnState::kNone && !begin_sent);
}

namespace {

// `text` as a string literal, whatever standard_conforming_strings says.
std::string sqlLiteral(std::string_view text) {
  std::string out = "E'";
  for (const char c : text) {
    if (c == '\\' || c == '\'') out += c;
    out += c;
  }
  return out + "'";
}

// RI triggers that only check: the others (CASCADE, SET NULL, SET DEFAULT) change other tables.
constexpr const char* kCheckingTriggers =
    "'RI_FKey_check_ins', 'RI_FKey_check_upd', 'RI_FKey_noaction_del', 'RI_FKey_noaction_upd', "
    "'RI_FKey_restrict_del', 'RI_FKey_restrict_upd'";

}  // namespace

std::vector<std::string> WriteTransaction::savepointStatements(Savepoint step) const {
  const std::string name(kWriteSavepoint);
  switch (step) {
    case Savepoint::kSet:
      return {"SAVEPOINT " + name, countersQuery()};
    case Savepoint::kRelease:
      return {"RELEASE SAVEPOINT " + name};
    case Savepoint::kUndo:
      return {"ROLLBACK TO SAVEPOINT " + name, "RELEASE SAVEPOINT " + name};
  }
  return {};
}

std::string WriteTransaction::savepointQuery(Savepoint step) const {
  std::string sql;
  for (const std::string& s : savepointStatements(step)) {
    if (!sql.empty()) sql += "; ";
    sql += s;
  }
  return sql;
}

std::string WriteTransaction::countersQuery() const {
  // Whether the target can change other tables: it is not a plain or partitioned table (a view,
  // say), or it or a partition has a trigger other than a checking RI trigger (ON DELETE CASCADE,
  // SET NULL and user triggers), or a rule that is not a view's. Only then are the counters read
  // (the scan of pg_class costs milliseconds in a large catalog); the first row, '' and 0, says
  // they were. A plain table's writes change only its own rows: its command tag counts them.
  const std::string t = "pg_catalog.to_regclass(" + sqlLiteral(counting_.table) + ")";
  // The target and its partitions (pg_partition_tree has no rows for a plain table).
  const std::string rels =
      "(SELECT " + t + " AS relid UNION SELECT relid FROM pg_catalog.pg_partition_tree(" + t + "))";
  const std::string gate =
      "(" + t + " IS NULL OR EXISTS (SELECT FROM pg_catalog.pg_class r WHERE r.oid = " + t +
      " AND r.relkind NOT IN ('r', 'p')) OR EXISTS (SELECT FROM " + rels +
      " p JOIN pg_catalog.pg_trigger g ON g.tgrelid = p.relid JOIN pg_catalog.pg_proc f ON f.oid = "
      "g.tgfoid WHERE f.proname NOT IN (" +
      kCheckingTriggers + ")) OR EXISTS (SELECT FROM " + rels +
      " p JOIN pg_catalog.pg_rewrite w ON w.ev_class = p.relid WHERE w.ev_type <> '1'))";
  const std::string n =
      "pg_catalog.pg_stat_get_xact_tuples_inserted(oid) + "
      "pg_catalog.pg_stat_get_xact_tuples_updated(oid) "
      "+ pg_catalog.pg_stat_get_xact_tuples_deleted(oid)";
  // The gate in the scan's own WHERE is a one-time filter: closed, pg_class is never read.
  // pg_catalog named: a relation of the same name earlier on the search_path cannot stand in.
  return "SELECT '', 0 WHERE " + gate +
         " UNION ALL (SELECT oid::pg_catalog.regclass::pg_catalog.text, " + n +
         " FROM pg_catalog.pg_class WHERE " + gate + " AND relkind = 'r' AND " + n +
         " > 0 ORDER BY 2 DESC LIMIT 64)";
}

void WriteTransaction::beginWrite(std::string_view table) {
  counting_ = Counting{};
  counting_.table = std::string(table);
}

void WriteTransaction::noteCounterRow(std::string_view data_row_body) {
  auto cells = protocol::parseDataRowValues(data_row_body);
  if (!cells || cells->size() != 2 || !(*cells)[0] || !(*cells)[1]) return;
  if ((*cells)[0]->empty()) {
    counting_.needed = true;  // the target can change other tables: count them
    return;
  }
  const std::string_view n = *(*cells)[1];
  int64_t rows = 0;
  if (std::from_chars(n.data(), n.data() + n.size(), rows).ec != std::errc()) return;
  auto& into = counting_.after ? counting_.now : counting_.before;
  if (into.size() < kMaxCounted) into.push_back({std::string(*(*cells)[0]), rows});
}

std::vector<WriteTransaction::TableDelta> WriteTransaction::counted() const {
  std::vector<TableDelta> out;
  for (const auto& t : counting_.now) {
    auto b = std::find_if(counting_.before.begin(), counting_.before.end(),
                          [&](const TableDelta& x) { return x.table == t.table; });
    const int64_t delta = t.rows - (b == counting_.before.end() ? 0 : b->rows);
    if (delta > 0) out.push_back({t.table, delta});
  }
  return out;
}

namespace {

std::string rowsText(int64_t n) { return std::to_string(n) + (n == 1 ? " row" : " rows"); }

}  // namespace

std::optional<GuardResult> WriteTransaction::onWriteDone(const std::string& table,
                                                         std::string_view command, int64_t tag_rows,
                                                         const std::vector<TableDelta>& changed) {
  int64_t measured = 0;
  for (const auto& c : changed) measured += c.rows;
  // The counters see every table; when they saw less than the tag says (track_counts off), the
  // tag's count of the named table stands.
  const bool by_counters = !changed.empty() && measured >= tag_rows;
  const std::vector<TableDelta> per_table =
      by_counters ? changed : std::vector<TableDelta>{{table, tag_rows}};
  const int64_t rows = by_counters ? measured : tag_rows;
  const bool statement_cap = rows > mode_.max_rows_statement;
  if (statement_cap || rows_ + rows > mode_.max_rows_transaction) {
    const int64_t cap = statement_cap ? mode_.max_rows_statement : mode_.max_rows_transaction;
    std::string where = " of " + table;
    std::vector<std::string> tables;
    for (const auto& c : per_table) tables.push_back(c.table + ": " + rowsText(c.rows));
    if (per_table.size() > 1 || per_table[0].table != table) {
      // Rows of other tables: ON DELETE CASCADE, SET NULL, or triggers.
      where = " in " + std::to_string(per_table.size()) + " tables (";
      for (size_t i = 0; i < tables.size(); ++i) where += (i ? "; " : "") + tables[i];
      where += "; the command tag counts " + rowsText(tag_rows) + " of " + table + ")";
    }
    GuardResult d = denial(
        codes::kTooManyRows,
        std::string(command) + " would have changed " + std::to_string(rows) + " rows" + where +
            (statement_cap ? "" : " (the transaction " + std::to_string(rows_) + " already)") +
            ", over the " + (statement_cap ? "statement" : "transaction") + " cap of " +
            std::to_string(cap) +
            "; pgwarden undid this statement only and the "
            "transaction is still open: narrow the WHERE clause, or ROLLBACK.",
        "SELECT count(*) FROM " + table + " WHERE ...", table);
    d.facts.add("table", table)
        .add("rows", rows)
        .add("tables", tables)
        .add("cap", cap)
        .add("scope", statement_cap ? "statement" : "transaction")
        .add("transaction_rows", rows_)
        .add("next_step", "narrow the WHERE clause");
    return d;
  }
  rows_ += rows;
  ++writes_;
  for (const auto& c : per_table) {
    auto it = std::find_if(tables_.begin(), tables_.end(),
                           [&](const TableRows& t) { return t.table == c.table; });
    if (it != tables_.end()) {
      it->rows += c.rows;
    } else if (tables_.size() < kMaxTables) {
      tables_.push_back({c.table, c.rows});
    }
  }
  if (changes_.size() < kMaxChanges) changes_.push_back({std::string(command), table, rows});
  return std::nullopt;
}

void WriteTransaction::onSavepointStatement(const StatementInfo& st) {
  // PostgreSQL allows a name twice; ROLLBACK TO and RELEASE act on the newest of that name.
  auto newest = [&]() {
    return std::find_if(marks_.rbegin(), marks_.rend(),
                        [&](const Mark& m) { return m.name == st.savepoint; });
  };
  if (st.command == "SAVEPOINT") {
    if (marks_.size() >= kMaxMarks)
      marks_.erase(marks_.begin());  // forgotten: its rollback over-counts
    marks_.push_back({st.savepoint, rows_, writes_, tables_, changes_});
  } else if (st.command == "ROLLBACK TO SAVEPOINT") {
    auto it = newest();
    if (it == marks_.rend()) return;
    rows_ = it->rows;
    writes_ = it->writes;
    tables_ = it->tables;
    changes_ = it->changes;
    marks_.erase(it.base(), marks_.end());  // the savepoint itself stays; later ones are gone
  } else if (st.command == "RELEASE") {
    auto it = newest();
    if (it != marks_.rend()) marks_.erase(std::prev(it.base()), marks_.end());
  }
}

void WriteTransaction::onDdlDone(std::string_view command) {
  ++writes_;
  if (changes_.size() < kMaxChanges) changes_.push_back({std::string(command), "", 0});
}

WriteTransaction::Completion WriteTransaction::onCommandComplete(const StatementInfo* st,
                                                                 std::string_view tag,
                                                                 std::optional<Wrapped> wrapped) {
  Completion out;
  if (st && st->kind == StatementKind::kSelect) noteRead(*st);  // EXPLAIN shows no rows: not a look
  const std::string_view word = tag.substr(0, tag.find(' '));
  if ((word == "COMMIT" || word == "ROLLBACK") &&
      (state_ == TxnState::kOpen || state_ == TxnState::kFailed)) {
    out.txn_rows = rows_;
  }
  if (st && st->kind == StatementKind::kDdl && state_ == TxnState::kOpen) onDdlDone(st->command);
  if (st && st->kind == StatementKind::kTransaction && !st->savepoint.empty())
    onSavepointStatement(*st);
  if (!wrapped) return out;
  out.rows = protocol::commandTagCount(tag);
  if (!counting_.needed || out.rows > mode_.max_rows_statement ||
      rows_ + out.rows > mode_.max_rows_transaction) {
    // Only its own rows changed (or the tag alone is over): no need to count more.
    out.over = onWriteDone(wrapped->table, wrapped->command, out.rows);
    out.counted = !out.over;
    return out;
  }
  counting_.table = wrapped->table;
  counting_.command = std::string(wrapped->command);
  counting_.tag_rows = out.rows;
  counting_.after = true;
  counting_.now.clear();
  out.measure = true;
  return out;
}

WriteTransaction::Completion WriteTransaction::onCounted() {
  Completion out;
  const std::vector<TableDelta> changed = counted();
  out.rows = counting_.tag_rows;
  int64_t measured = 0;
  for (const auto& c : changed) measured += c.rows;
  out.rows = std::max(out.rows, measured);
  out.over = onWriteDone(counting_.table, counting_.command, counting_.tag_rows, changed);
  out.counted = !out.over;
  counting_ = Counting{};
  return out;
}

WriteTransaction::StatementEnd WriteTransaction::afterStatement(char status,
                                                                std::string_view last_tag,
                                                                uint64_t now_ms) {
  StatementEnd out;
  const TxnState before = state_;
  const TxnEvent e = status == 'T'   ? TxnEvent::kServerInTxn
                     : status == 'E' ? TxnEvent::kServerFailed
                                     : TxnEvent::kServerIdle;
  out.moved = move(e, now_ms);
  if (!out.moved) return out;
  if ((before == TxnState::kOpen || before == TxnState::kFailed) && status == 'I') {
    const bool committed = last_tag == "COMMIT" && before == TxnState::kOpen;
    out.notice = endNotice(committed);
    out.ended = committed ? TxnEnd::kCommitted : TxnEnd::kRolledBack;
    clear();
  } else if (status == 'T' || status == 'E') {
    out.notice = openNotice(now_ms);
  }
  return out;
}

std::optional<guards::Verdict> WriteTransaction::afterDenial(std::string_view code,
                                                             uint64_t now_ms) {
  if (code == codes::kTransactionRolledBack && state_ == TxnState::kRolledBack) {
    (void)move(TxnEvent::kTold, now_ms);
    return std::nullopt;
  }
  if (state_ == TxnState::kOpen || state_ == TxnState::kFailed) return openNotice(now_ms);
  return std::nullopt;
}

std::optional<TxnEnd> WriteTransaction::due(uint64_t now_ms) const {
  if (state_ != TxnState::kOpen && state_ != TxnState::kFailed) return std::nullopt;
  if (now_ms >= began_ms_ + static_cast<uint64_t>(mode_.max_age.count())) return TxnEnd::kMaxAge;
  if (now_ms >= last_ms_ + static_cast<uint64_t>(mode_.idle_timeout.count())) return TxnEnd::kIdleTimeout;
  return std::nullopt;
}

std::string WriteTransaction::summary() const {
  std::string out;
  for (const auto& t : tables_) {
    if (!out.empty()) out += "; ";
    out += t.table + ": " + std::to_string(t.rows) + (t.rows == 1 ? " row" : " rows");
  }
  for (const auto& c : changes_) {
    if (!c.table.empty()) continue;
    if (!out.empty()) out += "; ";
    out += c.command;
  }
  return out.empty() ? std::string("no changes") : out;
}

WriteTransaction::Totals WriteTransaction::totals() const { return {rows_, writes_, summary()}; }

void WriteTransaction::clear() {
  rows_ = 0;
  writes_ = 0;
  tables_.clear();
  changes_.clear();
  marks_.clear();
}

guards::Verdict WriteTransaction::openNotice(uint64_t now_ms) const {
  const uint64_t idle_left = static_cast<uint64_t>(mode_.idle_timeout.count());
  const uint64_t age_end = began_ms_ + static_cast<uint64_t>(mode_.max_age.count());
  const uint64_t age_left = age_end > now_ms ? age_end - now_ms : 0;
  const uint64_t left = std::min(idle_left, age_left);
  guards::Verdict v;
  v.guard = "guarded_writes";
  v.action = Action::kWarn;
  v.code = std::string(codes::kTransactionOpen);
  v.sqlstate = std::string(codes::kSqlstateNotice);
  const bool failed = state_ == TxnState::kFailed;
  v.message = std::string(failed ? "Transaction failed; only ROLLBACK helps now. "
                                 : "Transaction open. ") +
              "Changed so far: " + summary() + ". pgwarden rolls it back if idle for " +
              seconds(idle_left) + " (at most " + seconds(age_left) + " from now). Next: " +
              (failed ? std::string("ROLLBACK") : std::string(kNextMoves)) + ".";
  std::vector<std::string> per_statement;
  for (const auto& c : changes_) {
    per_statement.push_back(c.command + (c.table.empty() ? "" : " " + c.table + " " + std::to_string(c.rows)));
  }
  guards::Facts f;
  f.add("rows", rows_)
      .add("statements", per_statement)
      .add("seconds_left", static_cast<int64_t>(left / 1000))
      .add("next_moves", failed ? std::vector<std::string>{"ROLLBACK"}
                                : std::vector<std::string>{"SELECT", "COMMIT", "ROLLBACK"});
  v.detail = f.json(v.code);
  v.hint = failed ? "ROLLBACK" : "COMMIT";
  return v;
}

guards::Verdict WriteTransaction::endNotice(bool committed) const {
  guards::Verdict v;
  v.guard = "guarded_writes";
  v.action = Action::kWarn;
  v.code = std::string(committed ? codes::kTransactionCommitted : codes::kTransactionDiscarded);
  v.sqlstate = std::string(codes::kSqlstateNotice);
  v.message = committed ? "Committed; kept: " + summary() + "."
                        : "Rolled back; nothing was kept (discarded: " + summary() + ").";
  guards::Facts f;
  f.add("rows", rows_).add("kept", committed).add("changes", summary());
  v.detail = f.json(v.code);
  return v;
}

GuardResult WriteTransaction::rolledBackDenial() const {
  const bool age = expired_by_ == TxnEnd::kMaxAge;
  GuardResult d = denial(codes::kTransactionRolledBack,
                         std::string("pgwarden rolled your transaction back: it was ") +
                             (age ? "open longer than " + seconds(static_cast<uint64_t>(mode_.max_age.count()))
                                  : "idle longer than " + seconds(static_cast<uint64_t>(mode_.idle_timeout.count()))) +
                             ". Lost: " + lost_ + ". Nothing of it was kept; BEGIN again and redo "
                             "the changes you still want, then COMMIT promptly.",
                         "BEGIN", "");
  d.facts.add("reason", txnEndName(expired_by_)).add("lost", lost_).add("lost_rows", lost_rows_)
      .add("next_step", "BEGIN and redo the changes");
  return d;
}

}  // namespace pgwarden::session
