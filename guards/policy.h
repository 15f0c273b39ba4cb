// Policy groups and the guard chain. A group is an ordered list of guards built once from config;
// evaluate() runs a statement text through it exactly once and returns one Decision the session
// acts on. Guards never touch sockets; anything that needs the server (catalog statistics, EXPLAIN)
// comes in as data.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/column_stats.h"
#include "analysis/table_stats.h"
#include "common/recycling_allocator.h"
#include "guards/result_assertions.h"

namespace pgwarden::guards {

struct GuardResult;
struct ChainState;     // where a paused chain stopped (policy.cpp)
class BudgetView;      // per-conversation budget state as the chain reads it (below)
class Masking;         // masked columns (masking.h)
class UntrustedContent;  // the data-flow rule (untrusted.h)

enum class Action { kAllow, kWarn, kDeny, kRewrite };
const char* actionName(Action a);

// One guard's verdict, as history records it and as the client sees it.
struct Verdict {
  std::string guard;     // guard kind, e.g. "require_predicate"
  Action action = Action::kAllow;
  std::string code;      // e.g. "MISSING_PREDICATE"
  std::string sqlstate;  // for deny: 42501 policy, 54000 limits, 42601 syntax, ...
  std::string message;   // one sentence: what was wrong and what to do next
  std::string detail;    // compact JSON object with the facts (deny and warn only: a rewrite
                         // is never sent, so its detail stays empty)
  std::string hint;      // an example query that would pass
  int position = 0;      // 1-based cursor position in the text (syntax errors), 0 = none
};

// A replacement of bytes [offset, offset + length) of the statement text.
struct TextEdit {
  size_t offset = 0;
  size_t length = 0;
  std::string replacement;
};
// A text's edits: made and dropped with every statement a guard rewrites, nearly always one, so
// a list of one takes its block from the thread's free list (common/recycling_allocator.h).
using TextEdits = std::vector<TextEdit, RecyclingAllocator<TextEdit>>;

// A field added here is also reset by PolicyGroup::evaluate's refill (recycle() in policy.cpp).
struct Decision {
  bool denied = false;
  Verdict deny;                          // valid when denied
  std::vector<Verdict> warnings;         // sent as NoticeResponse before the result
  std::vector<Verdict> actions;          // every non-allow verdict, in order, for history
  std::optional<std::string> rewritten_sql;  // forward this text instead of the original
  TextEdits edits;                           // what rewritten_sql applied to the text (doorRowCap)
  int64_t max_rows = -1;                 // >= 0: the client receives at most this many rows
  // The notice to send on its own (no detail, no hint) when truncation's message is empty: the
  // capping guard's, when the group's reason for ROWS_TRUNCATED renders empty.
  std::string truncation_notice;
  // The full NoticeResponse for a cut result (code ROWS_TRUNCATED, SQLSTATE 01000, the capping
  // guard's notice or the group's reason for the code, hint), valid when max_rows >= 0. The
  // session sends it only when the server produced more than max_rows rows (it asked for
  // max_rows + 1). Its detail is left empty: truncationDetail(max_rows), written when sent.
  Verdict truncation;

  // cost_gate: when set, the statement may not run yet. The daemon runs this text (it is
  // "EXPLAIN (FORMAT JSON) " + the text to forward, never ANALYZE) on the same server
  // connection, then calls PolicyGroup::evaluatePlan() with the single JSON value it returns, or
  // PolicyGroup::planUnavailable() if it could not get one. If the EXPLAIN itself fails with a
  // server error (an unknown column, say), that error is the statement's answer: forward it.
  std::optional<std::string> explain_sql;
  // The text has $n parameters: send explain_sql through Parse/Bind with the statement's own
  // parameter types and values (extended protocol), not as a simple Query.
  bool explain_needs_params = false;
  // Chain positions of the guards waiting for the plan (read by evaluatePlan).
  std::vector<size_t> plan_guards;
  // The planner's estimate of the rows, from the plan evaluatePlan read; -1 when not planned.
  double estimated_rows = -1;

  // http_webhook: when set, the chain is paused at guard `guard` (a guards/webhook_guard.h
  // WebhookGuard). The daemon POSTs `body` to that guard's service without blocking and calls
  // PolicyGroup::resumeWebhook() with the outcome; the statement waits until then.
  struct WebhookCall {
    size_t guard = 0;
    std::string body;
    std::shared_ptr<const ChainState> state;
  };
  std::optional<WebhookCall> webhook;
};

// An HTTP policy service's answer, or why there is none. `error` is for the log only.
struct WebhookOutcome {
  enum class Status { kOk, kTimeout, kTransport, kHttpError, kOverloaded, kCancelled };
  Status status = Status::kTransport;
  long http_status = 0;
  std::string body;
  std::string error;
  int attempts = 0;
};

// Measures the chain as it runs, for the daemon's metrics. Called on the loop thread, once per
// guard and text (checkText plus every checkStatement of that guard), and once per call of an
// operator's script or policy service. Implementations must not allocate once warm.
class GuardObserver {
 public:
  enum class External { kLua, kWebhook };
  enum class CallResult { kOk, kFailure, kTimeout };
  virtual ~GuardObserver() = default;
  // `kind` is the guard's kind() (a string with static storage for every built-in kind).
  virtual void guardEvaluated(std::string_view kind, std::chrono::nanoseconds spent) = 0;
  virtual void externalCall(External kind, CallResult result, std::chrono::nanoseconds spent) = 0;
};

// Who is asking, as the session knows it.
struct RequestContext {
  std::string_view user;
  std::string_view database;
  std::string_view group;
  std::string_view agent_id;
  std::string_view conversation_id;
  std::string_view query_intent;
  std::string_view application_name;
  std::string_view client_addr;
  bool extended = false;  // came through Parse rather than Query
  // No parameter's type was declared (a Query, which has no parameters, or a Parse that left
  // every type to the server): the server infers each $n's type from where it stands (`id = $1`
  // compares two values of id's type). Part of the plan's key.
  bool inferred_params = false;
  // The front end's name for history ("mcp"); empty: "simple" or "extended" as `extended` says.
  std::string_view protocol;
  // The MCP tool the statement runs for, and an operator tool's validated arguments (JSON).
  std::string_view tool;
  std::string_view tool_args;
  // The request the statement runs for (history's request_id and traceparent), and where to note
  // the record_uid of each record it makes (null: nowhere).
  std::string_view request_id;
  std::string_view traceparent;
  std::vector<std::string>* record_uids = nullptr;
  // Budgets: the session (the conversation when no conversation_id is known) and the loop's
  // ledger; a null ledger means no budget state is available and budget guards pass.
  uint64_t session_id = 0;
  const BudgetView* budgets = nullptr;
  // Null: the chain is not timed (tests, the config check).
  GuardObserver* observer = nullptr;
};

// Conversation counters. `statements` passed; `denied` were refused by any guard but a budget.
struct BudgetCounters {
  int64_t statements = 0;
  int64_t denied = 0;
  int64_t rows = 0;
};

// The per-conversation budget state, as the chain's readers see it. budgets/ sits above guards
// and implements it (budgets::BudgetLedger), so guards never include the ledger: the agent
// context document reads a conversation's counters through this, and the budget guard kind,
// itself in budgets/, reaches the ledger behind it (BudgetLedger::of).
class BudgetView {
 public:
  // The counters of the conversation `ctx` belongs to (zero for an unknown one).
  virtual BudgetCounters countersFor(const RequestContext& ctx) const = 0;

 protected:
  BudgetView() = default;
  ~BudgetView() = default;
  BudgetView(const BudgetView&) = default;
  BudgetView& operator=(const BudgetView&) = default;
};

class Guard;  // defined in guards/guard.h

struct GroupSettings;   // defined in guards/guard.h
class GuardRegistry;    // defined in guards/guard.h

// Operator-written reasons: code -> (table or "*") -> message. The message replaces the generated
// one; {fact} placeholders (e.g. {table}, {estimated_rows}, {limit}) take the verdict's facts.
using ReasonOverrides = std::map<std::string, std::map<std::string, std::string, std::less<>>, std::less<>>;

// `mode: guarded_writes` (docs/writes.md): the group may change data, only inside a transaction
// pgwarden watches. The checks that stay in force whatever the group's chain says (the read_only
// and functions guards' own logic, built with their defaults) live here, so a write group can
// never be configured without them.
struct WriteMode {
  bool guarded = false;                   // false: read_only (the default)
  int64_t max_rows_statement = 100;
  int64_t max_rows_transaction = 1000;
  std::chrono::milliseconds idle_timeout{60000};
  std::chrono::milliseconds max_age{600000};
  bool allow_ddl = false;
  std::unique_ptr<Guard> read_checks;      // read_only's logic, plus session_replication_role
  std::unique_ptr<Guard> function_checks;  // functions' default deny list
  WriteMode();
  ~WriteMode();
  WriteMode(WriteMode&&) noexcept;
  WriteMode& operator=(WriteMode&&) noexcept;
};

class PolicyGroup {
 public:
  PolicyGroup(std::string name, std::vector<std::unique_ptr<Guard>> guards,
              std::vector<std::string> search_path, ReasonOverrides reasons = {},
              std::map<std::string, Action, std::less<>> result_screens = {});
  ~PolicyGroup();
  const std::string& name() const { return name_; }
  const std::vector<std::string>& searchPath() const { return search_path_; }
  const std::vector<std::unique_ptr<Guard>>& guards() const { return guards_; }
  const GroupSettings& settings() const { return *settings_; }
  const WriteMode& writes() const { return writes_; }
  // Unique for the process's life (never reused, unlike an address): what a cache keyed by group
  // names it by, so a group a reload replaced can never answer for its successor.
  uint64_t id() const { return id_; }
  // Every guard of the chain is deterministic (Guard::deterministic): evaluate() gives the same
  // decision for the same text and catalog snapshot, whoever asks and whenever.
  bool deterministic() const { return deterministic_; }
  void setWriteMode(WriteMode w) { writes_ = std::move(w); }
  // The group's `pool_mode` (session or transaction): how long its sessions hold a server
  // connection; "" when the group leaves it to pool.mode.
  const std::string& poolMode() const { return pool_mode_; }
  // The group's masked columns (guards/masking.h); null when it masks nothing. Not const: the
  // daemon gives it the instance's key before the configuration is published.
  Masking* masking() const { return masking_.get(); }
  void setMasking(std::shared_ptr<Masking> m) { masking_ = std::move(m); }
  // The group's untrusted content and what a conversation that read it may not do
  // (guards/untrusted.h); null when it declares none.
  const UntrustedContent* untrusted() const { return untrusted_.get(); }
  void setUntrusted(std::shared_ptr<const UntrustedContent> u) { untrusted_ = std::move(u); }
  // soft_delete_columns and result_assertions (guards/result_assertions.h), set once at parse.
  void setDeclarations(std::vector<DeclaredColumn> soft_delete,
                       std::vector<ResultAssertion> assertions);
  void setPoolMode(std::string mode) { pool_mode_ = std::move(mode); }
  // screen_probe_timeout: the screens' indexed probe's time budget (0: off).
  void setScreenProbe(int timeout_ms);
  // `read_replicas: true`: the group's read-only sessions may read from a replica
  // (upstream.replicas) whose replay lag is under upstream.max_replica_lag.
  bool readReplicas() const { return read_replicas_; }
  void setReadReplicas(bool on) { read_replicas_ = on; }

  // Runs the chain once over all statements of the text: guard by guard in config order, each
  // guard seeing the whole text and then every statement; the first deny ends it. `stats` may be
  // null (not loaded yet). `analysis` must be ok (use syntaxErrorVerdict otherwise).
  Decision evaluate(const analysis::Analysis& analysis, std::string_view sql,
                    const RequestContext& ctx, const analysis::TableStatsSnapshot* stats) const;
  // The same, written over `d`, a decision the caller reuses (the policy engine's refilled plans):
  // its verdicts', texts' and lists' storage is kept, so a text judged like the one before (a
  // read capped for max_rows) costs no allocation.
  void evaluate(const analysis::Analysis& analysis, std::string_view sql, const RequestContext& ctx,
                const analysis::TableStatsSnapshot* stats, Decision& d) const;

  // The chain's literal-blind guards (Guard::literalBlind) across the texts of one shape
  // template. `skip`: they had nothing to say about an earlier text of the text's shape, judged by
  // this group over the same snapshot, so they would have nothing to say now either; the chain
  // runs without them (the decision is the same: a guard with nothing to say adds nothing to it).
  // Otherwise `clean` comes back true when every one of them ran and had nothing to say.
  struct BlindGuards {
    bool skip = false;
    bool clean = false;
  };
  // How many of the chain's guards are literal-blind (0: BlindGuards can save nothing).
  size_t literalBlindGuards() const { return blind_guards_; }
  // evaluate() for a text of a shape template (analysis/shape_template.h); only for a
  // deterministic group.
  void evaluate(const analysis::Analysis& analysis, std::string_view sql, const RequestContext& ctx,
                const analysis::TableStatsSnapshot* stats, Decision& d, BlindGuards& blind) const;

  // Second half of a decision that set explain_sql: `plan_json` is the one value EXPLAIN
  // (FORMAT JSON) returned. Returns `pending` with explain_sql cleared when the plan passes (its
  // rewrite, row cap and warnings kept), or a denial (SEQ_SCAN, COST_TOO_HIGH; PLAN_UNAVAILABLE
  // when the JSON cannot be read and the gate fails closed).
  Decision evaluatePlan(const Decision& pending, std::string_view plan_json,
                        const analysis::TableStatsSnapshot* stats) const;
  // The EXPLAIN could not run (timeout, lost connection): applies the gate's fail_behavior.
  Decision planUnavailable(const Decision& pending) const;

  // Second half of a decision that set `webhook`: the outcome becomes the paused guard's verdict
  // and the chain goes on at the next guard (it may pause again, or set explain_sql). Pass the
  // same text, analysis, context and statistics as to evaluate().
  Decision resumeWebhook(const Decision& pending, const WebhookOutcome& outcome,
                         const analysis::Analysis& analysis, std::string_view sql,
                         const RequestContext& ctx,
                         const analysis::TableStatsSnapshot* stats) const;

  // A verdict for guard `index` reached outside the chain (a budget checked when the statement
  // runs), with the group's reason overrides applied as for any other verdict.
  Verdict render(size_t index, GuardResult r) const;
  // A result screen's finding (kind "result_screen"), with the group's reason overrides applied;
  // r.action is the group's result_screens action for the code.
  Verdict renderScreen(GuardResult r) const;
  // A verdict of a check outside the chain and outside any guard (kind names it in history, e.g.
  // "tool_plan_check"), with the group's reason overrides applied.
  Verdict renderOutside(std::string_view kind, GuardResult r) const;

 private:
  Verdict finalize(const Guard& guard, GuardResult r) const;
  Verdict finalize(std::string_view kind, bool warn_only, GuardResult r) const;
  void evaluateInto(const analysis::Analysis& analysis, std::string_view sql,
                    const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                    Decision& d, BlindGuards* blind) const;
  Decision runChain(const analysis::Analysis& analysis, std::string_view sql,
                    const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                    Decision d, ChainState st) const;
  void runChainInto(const analysis::Analysis& analysis, std::string_view sql,
                    const RequestContext& ctx, const analysis::TableStatsSnapshot* stats,
                    Decision& d, ChainState& st, BlindGuards* blind = nullptr) const;
  // A chain that ran through: its rewrite, row cap and the statement to plan.
  void finishChain(const analysis::Analysis& analysis, std::string_view sql, Decision& d,
                   ChainState& st) const;
  std::string name_;
  std::vector<std::unique_ptr<Guard>> guards_;
  std::vector<std::string> search_path_;
  ReasonOverrides reasons_;
  std::unique_ptr<GroupSettings> settings_;
  WriteMode writes_;
  std::shared_ptr<Masking> masking_;
  std::shared_ptr<const UntrustedContent> untrusted_;
  std::string pool_mode_;
  bool read_replicas_ = false;
  uint64_t id_ = 0;
  bool deterministic_ = true;
  size_t blind_guards_ = 0;
};

using PolicyMap = std::map<std::string, std::shared_ptr<const PolicyGroup>, std::less<>>;

// Parses the `groups:` section. Throws config::ConfigError with line and key on any problem.
// Each group: `search_path` (list), `reasons` (map CODE -> message, or CODE -> {table: message}),
// `guards` (ordered list of maps with `kind:`; see packaging/pgwarden.yaml and docs/denials.md).
PolicyMap parsePolicyGroups(const YAML::Node& groups);
PolicyMap parsePolicyGroups(const YAML::Node& groups, const GuardRegistry& registry);

// The ROWS_TRUNCATED notice's detail: {"code":"ROWS_TRUNCATED","max_rows":N,"next_step":...}.
std::string truncationDetail(int64_t max_rows);

// The row cap's rewrite of one statement that returns rows (row_limit's, and every door's): a
// LIMIT `cap` on a new line after the statement, or its LIMIT literal (or ALL) replaced by
// `cap`; none for LIMIT $n, whose value comes with the Bind.
std::optional<TextEdit> rowCapEdit(const analysis::StatementInfo& st, int64_t cap);
// A door's own cap on the rows it keeps (an MCP call's max_rows), when it is below the group's:
// the text to run, each read capped at max_rows + 1 (the extra row tells the door the result was
// cut) over the decision's other edits; nullopt when the decision's text already holds it.
std::optional<std::string> doorRowCap(const Decision& d, const analysis::Analysis& analysis,
                                      std::string_view sql, int64_t max_rows);

// Makes `d` a denial by `v` (recorded in its actions): nothing of the allowed path (rewrite, row
// cap, truncation notice, waiting plan guards) survives. The one way a decision becomes a denial.
void applyDenial(Decision& d, Verdict v);

// The denial for text libpg_query cannot parse (SQLSTATE 42601, parser message and position;
// with `sql`, the hint quotes the text around the position).
Verdict syntaxErrorVerdict(const analysis::Analysis& analysis, std::string_view sql = {});

// The settings a group's statements may not change: the defaults, and search_path when the group
// sets one.
std::vector<std::string> protectedFor(const std::vector<std::string>& search_path);

// Session housekeeping: SET/RESET/SHOW, transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT,
// SET TRANSACTION ...), DISCARD, DEALLOCATE and CLOSE. Drivers send these on their own (pgjdbc's
// SET extra_float_digits on connect, psycopg2's BEGIN), so they neither spend budget nor go to the
// operator's Lua scripts and policy services: an unreachable service must not stop a driver from
// connecting. The built-in guards still judge them (protected settings, READ WRITE, DISCARD).
// This is the one classification budgets and the external guards share.
bool isSessionHousekeeping(analysis::StatementKind kind);
// Every statement of the text is housekeeping (so is an empty text: it has none).
bool isSessionHousekeeping(const analysis::Analysis& analysis);

}  // namespace pgwarden::guards
