// The statement gate: the one place a statement is judged, whichever front end it came through.
// Given a text (or a prepared statement's plan) and who is asking, it runs the analysis and the
// policy group's chain, waits for what the chain waits on (a webhook's answer, the cost gate's
// EXPLAIN, the shared budget store) and admits the statement against its conversation's budget,
// then hands back one verdict: the plan to act on (allowed, rewritten, warned or denied) and the
// budget it holds. A wait resumes at the stage it stopped at; nothing before it runs again.
// A text libpg_query cannot parse is put to the server's parser (a Parse, never run), so that the
// syntax error the client gets is the server's own.
//
// The front end supplies who is asking and, for the cost gate and the parse check, a way to reach
// its server connection (GateCaller). The gate never touches a socket.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "budgets/budget.h"
#include "guards/agent_context.h"
#include "guards/guard.h"
#include "guards/policy.h"
#include "session/statement_policy.h"
#include "session/write_txn.h"

namespace pgwarden::guards {
class ConversationMarks;
}  // namespace pgwarden::guards

namespace pgwarden::net {
class WebhookClient;
}  // namespace pgwarden::net

namespace pgwarden::session {

// The statement name of the parse check's Parse (closed again before the client goes on).
inline constexpr const char* kParseCheckName = "pgwarden_parse_check";

// The parameters an extended-protocol statement's EXPLAIN runs with (the statement's own).
struct ExplainArgs {
  std::vector<uint32_t> param_types;
  std::vector<int16_t> param_formats;
  std::vector<std::optional<std::string>> params;  // nullopt = SQL NULL
  bool bound = false;                              // params are the Bind's values
};

// A check of the statement's plan that the front end adds (an operator tool's plan_check): it
// makes the gate run EXPLAIN even where the group has no cost gate, and runs after the group's
// plan guards. A result is the denial (rendered with the group's reasons); none lets it pass.
using PlanCheck = std::function<std::optional<guards::GuardResult>(const analysis::PlanSummary&)>;

struct GateRequest {
  // What to judge: a text, analysed and run through the chain, or (when `plan` is set) a
  // prepared statement's plan, judged at its Bind or Execute. The gate copies the text (into
  // storage it keeps from one statement to the next), so it need only live through decide().
  std::string_view sql;
  std::shared_ptr<const StatementPlan> plan;
  guards::AgentOverrides overrides;  // the statement's sqlcommenter comment
  bool extended = false;
  // Admit it against the conversation's budget: it is about to run (a Query, an Execute).
  bool admit = false;
  // The cost gate's EXPLAIN: never; now (a plan that needs parameters and has none gets
  // planUnavailable); or now unless the plan needs parameters, when it is left for the Bind.
  enum class Explain : uint8_t { kSkip, kRun, kRunOrDefer };
  Explain explain = Explain::kSkip;
  ExplainArgs explain_args;
  PlanCheck plan_check;
  // The front end refused the request before its text ran (an operator tool's arguments broke
  // its schema or range caps): the verdict is this denial, no guard runs, and the text is
  // analysed only so the denial is recorded against its statements.
  std::optional<guards::GuardResult> refusal;

  // As a new request, keeping what a long list of parameters would not leave behind.
  void clear();
};

struct GateVerdict {
  std::shared_ptr<const StatementPlan> plan;
  // Admitted: held until the run finishes (the recorder gives it back).
  std::shared_ptr<const budgets::BudgetKey> budget_key;
  guards::AgentOverrides overrides;
  // The server refused the statement before it ran: this ErrorResponse (the whole message) is the
  // statement's answer, as the statement would have failed the same way. Either the cost gate's
  // EXPLAIN failed, or the server's parser refused a text libpg_query could not parse (the plan
  // then carries no denial of pgwarden's: the text was the server's to refuse).
  std::string explain_error;
  // Guarded writes: the text is a write to run inside pgwarden's savepoint (wrap), on `table`.
  struct Write {
    bool wrap = false;
    std::string table;
    std::string command;
    bool at_execute = false;  // a write over the extended protocol: judged again at each Execute
  };
  Write write;
};

// What the gate needs of the front end whose statement it judges.
class GateCaller {
 public:
  virtual ~GateCaller() = default;
  // Who is asking, with a statement's comment overrides applied.
  virtual guards::RequestContext requestContext(bool extended, const guards::AgentOverrides& ov) const = 0;
  // The caller's policy group (null: none, everything passes).
  virtual const guards::PolicyGroup* policyGroup() const = 0;
  // Runs the cost gate's EXPLAIN text on the caller's server connection and later reports
  // through explainDone() or explainFailed(). False: no connection to run it on.
  virtual bool runExplain(const std::string& sql, bool extended, const ExplainArgs& args) = 0;
  // A guarded_writes session's transaction state (docs/writes.md); null: a read-only group. The
  // gate asks it first, before the chain, about every text.
  virtual const WriteTransaction* writeTransaction() const { return nullptr; }
  // Asks the server to parse a text libpg_query could not: a Parse of `sql` (with the client's
  // parameter types) under pgwarden's own statement name, closed again, so nothing runs and
  // nothing is left behind; for a simple Query (extended false) with a Sync, for a client's Parse
  // with a Flush, so that an error leaves the server skipping to the client's Sync as the
  // client's Parse would. The answer comes later through parseChecked(). False: no connection to
  // ask on, or the caller's state forbids it (then pgwarden's own syntax error answers).
  virtual bool runParseCheck(const std::string& /*sql*/, bool /*extended*/,
                             const std::vector<uint32_t>& /*param_types*/) {
    return false;
  }
  // The caller holds a server connection for one transaction at a time (pool_mode transaction):
  // statements that would leave session state behind are refused (SESSION_STATE).
  virtual bool transactionPooled() const { return false; }
};

// The process-wide services a gate uses (any may be null: that feature is off).
struct GateServices {
  PolicyEngine* policy = nullptr;
  net::WebhookClient* webhooks = nullptr;
  budgets::BudgetLedger* budgets = nullptr;
  std::function<std::shared_ptr<const analysis::TableStatsSnapshot>()> stats;
  // The conversations that have read untrusted content (the data-flow rule, docs/untrusted.md).
  guards::ConversationMarks* marks = nullptr;
};

class StatementGate {
 public:
  using Done = std::function<void(GateVerdict)>;
  StatementGate(GateServices services, GateCaller& caller, Done done)
      : services_(std::move(services)), caller_(caller), done_(std::move(done)) {}
  ~StatementGate() { cancel(); }
  StatementGate(const StatementGate&) = delete;
  StatementGate& operator=(const StatementGate&) = delete;

  // Judges one statement. True: decided at once, `out` holds the verdict. False: waiting; the
  // verdict comes through `done` later, on the loop, never inside this call. One statement at a
  // time: the caller holds its next statement until then.
  [[nodiscard]] bool decide(GateRequest&& request, GateVerdict& out);
  bool waiting() const { return stage_ != Stage::kIdle; }
  // The verdict waits on something other than the caller's server connection (a webhook's
  // answer, the shared budget store): the caller need hold no connection meanwhile.
  bool waitingOutside() const {
    return waiting_ && (stage_ == Stage::kWebhook || stage_ == Stage::kBudget);
  }

  // The caller's answers to runExplain().
  void explainDone(std::string plan_json);
  void explainFailed(std::string error_response);
  // The caller's answer to runParseCheck(): the server's ErrorResponse (the whole message), or
  // "" when the server parsed the text (then pgwarden's own syntax error stands: a text it
  // cannot analyse never runs).
  void parseChecked(std::string error_response);
  // Drops the statement being judged (its session ended, or the server skips it): no verdict
  // comes; a budget it was admitted to is given back.
  void cancel();
  // Gives back the budget of a verdict that will not run after all.
  void discard(GateVerdict& verdict);

  void setServices(GateServices services) { services_ = std::move(services); }

 private:
  enum class Stage : uint8_t { kIdle, kChain, kParse, kWebhook, kExplain, kBudget, kDone };
  // Runs stages from the current one until one waits (false) or the verdict is reached (true).
  bool advance();
  // Who is asking, as the caller says, and whether the request declared its parameters' types.
  guards::RequestContext requestContext() const;
  void resume();
  bool startWebhook();
  void onWebhookAnswer(guards::WebhookOutcome outcome);
  bool startExplain();
  // A text the chain refused because libpg_query could not parse it goes to the server's parser.
  // True: nothing to ask (or no way to); false: waiting for parseChecked().
  bool startParseCheck();
  // Guarded writes: the write mode's judgement of the text, before the chain. True: denied
  // (plan_ holds the denial).
  bool judgeWrite(const guards::RequestContext& ctx, const analysis::TableStatsSnapshot* stats);
  // A verdict reached outside the chain, with the group's reasons when there is a group.
  // Transaction pooling: the chain's verdict turned into SESSION_STATE for a statement whose
  // effect would outlive its transaction.
  void judgeSessionState();
  // The data-flow rule: a conversation that has read the group's untrusted content may not act
  // (UNTRUSTED_FLOW); a statement that reads it marks its conversation (UNTRUSTED_READ).
  void judgeUntrusted();
  guards::Verdict renderOutside(std::string_view kind, guards::GuardResult r) const;
  // The plan_check's verdict on the plan EXPLAIN returned ("" when it could not run).
  void runPlanCheck(guards::Decision& d, std::string_view plan_json);
  bool admit();
  GateVerdict takeVerdict();
  void resetRequest();

  GateServices services_;
  GateCaller& caller_;
  Done done_;
  Stage stage_ = Stage::kIdle;
  bool waiting_ = false;  // a stage waits for an answer from outside
  GateRequest request_;
  std::string sql_;  // request_'s text, which request_.sql views; its storage is kept
  std::shared_ptr<const StatementPlan> plan_;
  std::shared_ptr<const budgets::BudgetKey> key_;
  std::string explain_error_;
  GateVerdict::Write write_;
  uint64_t webhook_id_ = 0;
  uint64_t budget_ticket_ = 0;
  int64_t webhook_started_ns_ = 0;
};

}  // namespace pgwarden::session
