// read_only: only reads pass. Defence in depth over the read-only server connection: writes, DDL,
// procedural code, locks, server files, session-state escapes and changes to the protected
// settings are refused here, with a reason, before the server sees them.
#include <algorithm>
#include <optional>

#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

const std::vector<std::string>& defaultProtectedSettings() {
  static const std::vector<std::string> kSettings = {
      "default_transaction_read_only",
      "transaction_read_only",
      "statement_timeout",
      "lock_timeout",
      "idle_in_transaction_session_timeout",
      "role",
      "session_authorization",
  };
  return kSettings;
}

bool isProtectedSetting(std::string_view name, const std::vector<std::string>& protected_settings) {
  if (name == "*") return true;
  return std::find(protected_settings.begin(), protected_settings.end(), name) !=
         protected_settings.end();
}

namespace {

GuardResult protectedSetting(std::string_view setting, std::string_view how) {
  GuardResult r;
  r.action = Action::kDeny;
  r.code = std::string(codes::kProtectedSetting);
  r.subject = std::string(setting);
  std::string next;
  if (setting == "*") {
    r.message = "set_config() with a setting name that is not a constant is not allowed on this "
                "connection; remove the call.";
    next = "remove the set_config call";
  } else if (setting == "role" || setting == "session_authorization") {
    r.message = std::string(how) + " of " + std::string(setting) +
                " is not allowed: this connection runs as a fixed role; run the query as the "
                "current user.";
    next = "run the query without changing the role";
  } else if (setting == "search_path") {
    r.message = std::string(how) +
                " of search_path is not allowed: it is fixed for this connection; write "
                "schema-qualified table names (for example public.my_table) instead.";
    next = "schema-qualify table names";
  } else {
    r.message = std::string(setting) + " is a protected setting on this connection and cannot be "
                "changed by " + std::string(how) + "; leave it as it is and send the query alone.";
    next = "send the query without changing " + std::string(setting);
  }
  r.facts.add("setting", setting).add("statement", how).add("next_step", next);
  r.hint = "SHOW " + std::string(setting == "*" ? "statement_timeout" : setting);
  return r;
}

class ReadOnlyGuard final : public Guard {
 public:
  explicit ReadOnlyGuard(std::vector<std::string> protected_settings)
      : protected_(std::move(protected_settings)) {}

  std::string_view kind() const override { return "read_only"; }
  bool deterministic() const override { return true; }
  bool literalBlind() const override { return true; }
  std::vector<std::string_view> codes() const override {
    return {codes::kReadOnly, codes::kProtectedSetting};
  }

  // A statement after COMMIT or ROLLBACK in the same text runs in a new transaction, whose
  // read-only mode comes from default_transaction_read_only as the earlier statements left it:
  // the server reports a change of that setting only when the whole text has run, too late to
  // stop what followed. So the transaction's end must be the text's last statement.
  GuardResult checkText(const GuardInput& in) const override {
    const auto& stmts = in.analysis.statements;
    for (size_t i = 0; i + 1 < stmts.size(); ++i) {
      const analysis::StatementInfo& st = stmts[i];
      if (st.kind != analysis::StatementKind::kTransaction ||
          (st.command != "COMMIT" && st.command != "ROLLBACK")) {
        continue;
      }
      const std::string_view next = util::statementText(in.sql, stmts[i + 1]);
      return deny(st, st.command + " followed by another statement",
                  "A statement follows " + st.command +
                      " in this query; a new transaction would begin inside the query, beyond "
                      "what pgwarden can check. Send the statements after " +
                      st.command + " as a query of their own.",
                  "send the statements after " + st.command + " as a separate query",
                  next.size() <= 300 ? std::string(next) : std::string());
    }
    return {};
  }

  GuardResult checkStatement(const GuardInput& in,
                             const analysis::StatementInfo& st) const override {
    (void)in;
    // EXPLAIN without ANALYZE plans a locking or data-modifying query without running it
    // (PostgreSQL plans them in a read-only transaction too); its other clauses still count.
    const bool planned_only = st.kind == analysis::StatementKind::kExplain && !st.explain_analyze;
    if (auto clause = checkClauses(st, planned_only)) return std::move(*clause);
    switch (st.kind) {
      case analysis::StatementKind::kSelect:
      case analysis::StatementKind::kShow:
      case analysis::StatementKind::kFetch:
      case analysis::StatementKind::kClosePortal:
      case analysis::StatementKind::kDeallocate:
      case analysis::StatementKind::kExecute:
        return {};
      case analysis::StatementKind::kInsert:
      case analysis::StatementKind::kUpdate:
      case analysis::StatementKind::kDelete:
      case analysis::StatementKind::kMerge:
      case analysis::StatementKind::kDdl:
      case analysis::StatementKind::kCall:
      case analysis::StatementKind::kDo:
      case analysis::StatementKind::kListen:
      case analysis::StatementKind::kNotify:
      case analysis::StatementKind::kUnlisten:
      case analysis::StatementKind::kMaintenance:
      case analysis::StatementKind::kLock:
      case analysis::StatementKind::kAlterSystem:
      case analysis::StatementKind::kLoad:
      case analysis::StatementKind::kOther:
        return denyNotRead(st);
      case analysis::StatementKind::kTransaction:
        return checkTransaction(st);
      case analysis::StatementKind::kSet:
      case analysis::StatementKind::kReset:
      case analysis::StatementKind::kDiscard:
        return checkSessionState(st);
      case analysis::StatementKind::kExplain:
      case analysis::StatementKind::kPrepare:
      case analysis::StatementKind::kDeclareCursor:
      case analysis::StatementKind::kCopy:
        return checkInnerStatement(st);
    }
    return {};
  }

 private:
  // set_config() calls, and the clauses that make a statement of a readable kind write or lock;
  // checked before the statement's kind.
  std::optional<GuardResult> checkClauses(const analysis::StatementInfo& st,
                                          bool planned_only) const {
    for (const auto& name : st.set_config_names) {
      if (isProtectedSetting(name, protected_)) return protectedSetting(name, "set_config()");
    }
    if (st.modifying_cte && !planned_only) {
      return deny(st, "a WITH clause that changes data",
                  "A WITH clause that runs INSERT, UPDATE, DELETE or MERGE is not allowed: this "
                  "connection is read-only; keep only SELECT queries inside WITH.",
                  "use only SELECT inside WITH", "WITH t AS (SELECT 1 AS n) SELECT n FROM t");
    }
    if (st.select_into) {
      return deny(st, "SELECT INTO",
                  "SELECT INTO creates a table and is not allowed: this connection is read-only; "
                  "drop the INTO clause to get the rows back instead.",
                  "remove INTO and read the rows", "");
    }
    if (st.locking_clause && !planned_only) {
      return deny(st, "FOR UPDATE/FOR SHARE",
                  "Locking clauses (FOR UPDATE, FOR SHARE and the like) are not allowed: this "
                  "connection is read-only and never locks rows; remove the locking clause.",
                  "remove FOR UPDATE/FOR SHARE", "");
    }
    return std::nullopt;
  }

  // The kinds never allowed here: they change data or objects, run procedural code, wait on
  // notifications, lock, or change the server.
  static GuardResult denyNotRead(const analysis::StatementInfo& st) {
    switch (st.kind) {
      case analysis::StatementKind::kInsert:
      case analysis::StatementKind::kUpdate:
      case analysis::StatementKind::kDelete:
      case analysis::StatementKind::kMerge:
        return deny(st, st.command,
                    st.command + " changes data and is not allowed: this connection is read-only; "
                    "read the rows with SELECT instead.",
                    "use SELECT to read data", countHint(st));
      case analysis::StatementKind::kDdl:
        return deny(st, st.command,
                    st.command + " is not allowed: this connection is read-only and cannot create "
                    "or change objects; use a WITH query (CTE) or a subquery instead of a new "
                    "object.",
                    "use a WITH query or subquery", "WITH t AS (SELECT 1 AS n) SELECT n FROM t");
      case analysis::StatementKind::kCall:
      case analysis::StatementKind::kDo:
        return deny(st, st.command,
                    st.command + " runs procedural code and is not allowed: this connection is "
                    "read-only; write what you need as a single SELECT.",
                    "write the logic as a SELECT", "");
      case analysis::StatementKind::kListen:
      case analysis::StatementKind::kNotify:
      case analysis::StatementKind::kUnlisten:
        return deny(st, st.command,
                    st.command + " is not allowed on this connection; poll with a SELECT instead.",
                    "poll with SELECT", "");
      case analysis::StatementKind::kMaintenance:
        return deny(st, st.command,
                    st.command + " is a maintenance command and is not allowed on this "
                    "connection; ask a database administrator if it is needed.",
                    "ask a database administrator", "");
      case analysis::StatementKind::kLock:
        return deny(st, "LOCK TABLE",
                    "LOCK TABLE is not allowed: this connection is read-only and a SELECT needs "
                    "no explicit lock; send the SELECT alone.",
                    "send the SELECT without LOCK", "");
      case analysis::StatementKind::kAlterSystem:
        return deny(st, "ALTER SYSTEM",
                    "ALTER SYSTEM changes the server configuration and is not allowed on this "
                    "connection; ask a database administrator.",
                    "ask a database administrator", "SHOW " + (st.setting.empty() ? std::string("all")
                                                                                  : st.setting));
      case analysis::StatementKind::kLoad:
      case analysis::StatementKind::kOther:
      default:  // only the kinds above come here; any other gets the generic refusal
        return deny(st, st.command.empty() ? std::string("this statement") : st.command,
                    (st.command.empty() ? std::string("This statement") : st.command) +
                        " is not allowed: this connection only runs reads; use SELECT.",
                    "use SELECT", "");
    }
  }

  // Transaction control passes, but not READ WRITE and not two-phase commit.
  static GuardResult checkTransaction(const analysis::StatementInfo& st) {
    if (st.read_write_requested) {
      return deny(st, st.command + " READ WRITE",
                  st.command + " READ WRITE is not allowed: this connection is read-only; use "
                  "BEGIN or BEGIN READ ONLY.",
                  "use BEGIN READ ONLY", "BEGIN READ ONLY");
    }
    if (st.two_phase) {
      return deny(st, st.command,
                  st.command + " (two-phase commit) is not allowed on this connection; use "
                  "COMMIT or ROLLBACK.",
                  "use COMMIT or ROLLBACK", "COMMIT");
    }
    return {};
  }

  // SET and RESET of the protected settings and of the transaction mode, and DISCARD.
  GuardResult checkSessionState(const analysis::StatementInfo& st) const {
    switch (st.kind) {
      case analysis::StatementKind::kSet:
        if (st.read_write_requested) {
          return deny(st, st.command + " READ WRITE",
                      "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE is not allowed: this "
                      "connection is read-only; leave the default.",
                      "leave the transaction mode as it is", "SHOW transaction_read_only");
        }
        if (isProtectedSetting(st.setting, protected_) && !harmlessSet(st)) {
          return protectedSetting(st.setting, "SET");
        }
        return {};
      case analysis::StatementKind::kReset:
        if (st.setting == "all") {
          GuardResult r = protectedSetting("all", "RESET");
          r.message = "RESET ALL would also reset this connection's protected settings and is not "
                      "allowed; reset only the settings you changed, by name.";
          r.hint = "RESET work_mem";
          return r;
        }
        if (isProtectedSetting(st.setting, protected_) && !harmlessReset(st.setting)) {
          return protectedSetting(st.setting, "RESET");
        }
        return {};
      case analysis::StatementKind::kDiscard:
        return deny(st, "DISCARD",
                    "DISCARD is not allowed: it would reset this connection's protected session "
                    "state; the session is cleaned up when it ends.",
                    "do not reset the session", "");
      default:
        break;
    }
    return {};
  }

  // A SET of a protected setting that changes nothing the policy relies on: read-only on (the
  // connection's own default), SET ... TO DEFAULT where RESET is harmless, SET ROLE NONE where no
  // role can have been set.
  bool harmlessSet(const analysis::StatementInfo& st) const {
    const std::string value = util::lower(st.setting_value);
    if (value == "default") return harmlessReset(st.setting);
    if (st.setting == "default_transaction_read_only") {
      return value == "on" || value == "true" || value == "yes" || value == "1";
    }
    return st.setting == "role" && value == "none" && harmlessReset("role");
  }

  // RESET of default_transaction_read_only goes back to the connection's login value (on for
  // the read-only pools; the write pool's off changes nothing its write mode does not judge).
  // RESET ROLE and RESET SESSION AUTHORIZATION change nothing while both are protected: then no
  // SET ROLE or SET SESSION AUTHORIZATION (nor set_config of them) can have run on this session.
  bool harmlessReset(std::string_view setting) const {
    if (setting == "default_transaction_read_only") return true;
    if (setting != "role" && setting != "session_authorization") return false;
    return isProtectedSetting("role", protected_) &&
           isProtectedSetting("session_authorization", protected_);
  }

  // A statement that wraps another (EXPLAIN, PREPARE, DECLARE CURSOR, COPY) passes only when the
  // one it wraps reads, and a COPY only to the client.
  static GuardResult checkInnerStatement(const analysis::StatementInfo& st) {
    switch (st.kind) {
      case analysis::StatementKind::kExplain:
        if (st.explain_analyze && !isRead(st.inner_kind)) {
          return deny(st, "EXPLAIN ANALYZE " + std::string(kindUpper(st.inner_kind)),
                      "EXPLAIN ANALYZE runs the statement, and a " +
                          std::string(kindUpper(st.inner_kind)) +
                          " is not allowed: this connection is read-only; use EXPLAIN without "
                          "ANALYZE to see its plan.",
                      "use EXPLAIN without ANALYZE", "");
        }
        return {};
      case analysis::StatementKind::kPrepare:
        if (!isRead(st.inner_kind)) {
          return deny(st, "PREPARE of " + std::string(kindUpper(st.inner_kind)),
                      "PREPARE of a " + std::string(kindUpper(st.inner_kind)) +
                          " is not allowed: this connection is read-only; prepare only SELECT "
                          "statements.",
                      "prepare only SELECT statements", "PREPARE q AS SELECT 1");
        }
        return {};
      case analysis::StatementKind::kDeclareCursor:
        if (st.with_hold) {
          return deny(st, "DECLARE ... WITH HOLD",
                      "DECLARE ... WITH HOLD keeps a cursor open after its transaction and is not "
                      "allowed here; declare the cursor without WITH HOLD inside BEGIN ... COMMIT.",
                      "declare the cursor WITHOUT HOLD inside a transaction",
                      "DECLARE c CURSOR FOR SELECT 1");
        }
        if (!isRead(st.inner_kind)) {
          return deny(st, "DECLARE CURSOR", "Cursors may only read; declare the cursor for a SELECT.",
                      "declare the cursor for a SELECT", "DECLARE c CURSOR FOR SELECT 1");
        }
        return {};
      case analysis::StatementKind::kCopy:
        if (st.copy_from) {
          return deny(st, "COPY FROM",
                      "COPY ... FROM writes rows into a table and is not allowed: this connection "
                      "is read-only; read data with SELECT or COPY ... TO STDOUT.",
                      "use COPY (SELECT ...) TO STDOUT", "COPY (SELECT 1) TO STDOUT");
        }
        if (st.copy_to_file) {
          return deny(st, "COPY TO file/program",
                      "COPY ... TO a server file or program is not allowed; use COPY ... TO STDOUT "
                      "(psql \\copy) to receive the data yourself.",
                      "use COPY ... TO STDOUT", "COPY (SELECT 1) TO STDOUT");
        }
        if (st.inner_kind != analysis::StatementKind::kOther && !isRead(st.inner_kind)) {
          return deny(st, "COPY of " + std::string(kindUpper(st.inner_kind)),
                      "COPY of a statement that changes data is not allowed: this connection is "
                      "read-only; COPY only SELECT queries.",
                      "COPY only SELECT queries", "COPY (SELECT 1) TO STDOUT");
        }
        return {};
      default:
        break;
    }
    return {};
  }

  static bool isRead(analysis::StatementKind k) {
    return k == analysis::StatementKind::kSelect || k == analysis::StatementKind::kExecute;
  }

  static const char* kindUpper(analysis::StatementKind k) {
    switch (k) {
      case analysis::StatementKind::kInsert:
        return "INSERT";
      case analysis::StatementKind::kUpdate:
        return "UPDATE";
      case analysis::StatementKind::kDelete:
        return "DELETE";
      case analysis::StatementKind::kMerge:
        return "MERGE";
      case analysis::StatementKind::kDdl:
        return "DDL statement";
      default: return "statement that is not a read";
    }
  }

  static std::string countHint(const analysis::StatementInfo& st) {
    for (const auto& r : st.relations) {
      if (r.written) return "SELECT count(*) FROM " + util::displayName(r.schema, r.name);
    }
    return "";
  }

  static GuardResult deny(const analysis::StatementInfo& st, const std::string& what,
                          std::string message, const std::string& next, std::string hint) {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kReadOnly);
    r.message = std::move(message);
    r.hint = std::move(hint);
    r.subject = what;
    r.facts.add("statement", what).add("kind", analysis::kindName(st.kind)).add("next_step", next);
    return r;
  }

  std::vector<std::string> protected_;
};

}  // namespace

std::unique_ptr<Guard> makeReadOnlyGuard(const YAML::Node& node, const std::string& path,
                                         const GroupSettings& group) {
  checkGuardKeys(node, path, {"protected_settings"});
  std::vector<std::string> settings = group.protected_settings;
  for (const auto& s : config::getStringList(node, path, "protected_settings")) {
    settings.push_back(util::lower(s));
  }
  return std::make_unique<ReadOnlyGuard>(std::move(settings));
}

}  // namespace pgwarden::guards
