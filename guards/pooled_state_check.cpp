// What a transaction-pooled client may not leave behind on a server connection, and the denial
// that says so and what to do instead.
#include "guards/pooled_state_check.h"

#include <array>
#include <string>

#include "common/ascii.h"
#include "guards/codes.h"

namespace pgwarden::guards {

namespace {

constexpr std::array<std::string_view, 7> kCarried = {
    "application_name", "client_encoding",     "DateStyle",  "TimeZone",
    "IntervalStyle",    "extra_float_digits", "search_path"};

GuardResult refuse(std::string what, std::string next, std::string hint) {
  GuardResult r;
  r.action = Action::kDeny;
  r.code = std::string(codes::kSessionState);
  r.subject = what;
  r.message = what +
              " is not allowed on this connection: it is transaction-pooled, so the server "
              "connection is shared with other clients between transactions and such state "
              "would not stay with you; " +
              next + ".";
  r.hint = std::move(hint);
  r.facts.add("statement", what).add("pool_mode", "transaction").add("next_step", next);
  return r;
}

bool sessionAdvisoryLock(std::string_view name) {
  // pg_advisory_xact_lock and friends end with the transaction and are fine.
  static constexpr std::string_view kSession[] = {
      "pg_advisory_lock",     "pg_advisory_lock_shared",     "pg_try_advisory_lock",
      "pg_try_advisory_lock_shared", "pg_advisory_unlock", "pg_advisory_unlock_shared",
      "pg_advisory_unlock_all"};
  for (auto s : kSession) {
    if (iequals(name, s)) return true;
  }
  return false;
}

}  // namespace

std::span<const std::string_view> carriedSettings() { return kCarried; }

std::string_view carriedSetting(std::string_view name) {
  for (auto c : kCarried) {
    if (iequals(name, c)) return c;
  }
  return {};
}

std::optional<GuardResult> sessionStateUse(const analysis::StatementInfo& st) {
  switch (st.kind) {
    case analysis::StatementKind::kSet:
      if (st.set_local || st.setting.empty() || !carriedSetting(st.setting).empty()) break;
      if (st.setting == "session characteristics") {
        return refuse("SET SESSION CHARACTERISTICS", "set the transaction's characteristics with "
                      "BEGIN ... or SET TRANSACTION inside it", "BEGIN ISOLATION LEVEL REPEATABLE READ");
      }
      return refuse("SET " + st.setting,
                    "use SET LOCAL " + st.setting + " inside a transaction (BEGIN; SET LOCAL ...; "
                    "your query; COMMIT)",
                    "BEGIN; SET LOCAL " + st.setting + " = ...; ...; COMMIT");
    case analysis::StatementKind::kPrepare:
    case analysis::StatementKind::kExecute:
    case analysis::StatementKind::kDeallocate:
      return refuse(st.command.empty() ? std::string("PREPARE") : st.command,
                    "send the statement itself, or prepare it with the extended query protocol "
                    "(your driver's prepared statements), which pgwarden carries across connections",
                    "use the driver's prepared statements instead of SQL PREPARE");
    case analysis::StatementKind::kListen:
    case analysis::StatementKind::kUnlisten:
      return refuse(st.command.empty() ? std::string("LISTEN") : st.command,
                    "connect to a group in session pool_mode to receive notifications", "");
    case analysis::StatementKind::kDeclareCursor:
      if (st.with_hold) {
        return refuse("DECLARE ... WITH HOLD",
                      "declare the cursor without WITH HOLD inside a transaction (BEGIN; DECLARE "
                      "c CURSOR FOR ...; FETCH ...; COMMIT)",
                      "BEGIN; DECLARE c CURSOR FOR SELECT ...; FETCH 100 FROM c; COMMIT");
      }
      break;
    case analysis::StatementKind::kLoad:
      return refuse("LOAD", "do not load libraries through this connection", "");
    case analysis::StatementKind::kDdl:
      if (st.temporary) {
        return refuse(st.command + " (temporary)", "use a common table expression (WITH ...) or a subquery instead of a "
                      "temporary table", "WITH t AS (SELECT ...) SELECT ... FROM t");
      }
      break;
    default:
      break;
  }
  for (const auto& call : st.calls) {
    if (sessionAdvisoryLock(call.name)) {
      return refuse(call.name + "()",
                    "take the lock with the transaction-scoped form (pg_advisory_xact_lock and "
                    "friends) inside a transaction",
                    "BEGIN; SELECT pg_advisory_xact_lock(42); ...; COMMIT");
    }
    if (iequals(call.name, "set_config") && call.args.size() == 3 &&
        !(call.args[2].type == analysis::ConstArg::Type::kBool &&
          (call.args[2].text == "t" || call.args[2].text == "true"))) {
      const std::string& setting = call.args[0].type == analysis::ConstArg::Type::kString
                                       ? call.args[0].text
                                       : std::string();
      if (setting.empty() || carriedSetting(setting).empty()) {
        return refuse("set_config(..., false)",
                      "pass true as the third argument (is_local) inside a transaction", "");
      }
    }
  }
  return std::nullopt;
}

}  // namespace pgwarden::guards
