// The Guard interface every guard kind implements, and what the chain hands it. A guard looks
// at the analysed text (once per text and once per statement) and answers with a GuardResult;
// it never touches sockets or the server. Guard kinds are registered by name in a GuardRegistry
// so kinds added later (Lua scripts, HTTP webhooks, budgets) plug into the same config parser.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/plan.h"
#include "common/config_util.h"
#include "common/recycling_allocator.h"
#include "guards/policy.h"

namespace pgwarden::guards {

// Group-wide settings a guard may need when it is built or run.
struct GroupSettings {
  std::string name;
  std::vector<std::string> search_path;         // as configured; empty = server default
  std::vector<std::string> protected_settings;  // lower case; read_only and functions deny changes
  // result_screens: code -> action (kAllow: off); a code not listed warns.
  std::map<std::string, Action, std::less<>> result_screens;
  Action screenAction(std::string_view code) const {
    auto it = result_screens.find(code);
    return it == result_screens.end() ? Action::kWarn : it->second;
  }
  // Declared in the group's config (guards/result_assertions.h).
  std::vector<DeclaredColumn> soft_delete_columns = {};
  std::vector<ResultAssertion> result_assertions = {};
  // screen_probe_timeout in ms: the screens' indexed probe (screens/probe.h); 0: off.
  int screen_probe_ms = 0;
  // The group's operator-written reasons (null: none), so that a guard can leave out facts no
  // one will read: a rewrite's detail is never sent, so its facts serve only such a reason.
  const ReasonOverrides* reasons = nullptr;
  bool hasReason(std::string_view code) const { return reasons && reasons->find(code) != reasons->end(); }
};

// Facts about a verdict, in order. Rendered as the compact JSON object in Verdict::detail and
// available to operator-written reasons as {key} placeholders.
class Facts {
 public:
  Facts& add(std::string key, std::string_view text);  // JSON string
  Facts& add(std::string key, const char* text) { return add(std::move(key), std::string_view(text)); }
  Facts& add(std::string key, int64_t n);
  Facts& add(std::string key, double n);
  Facts& add(std::string key, bool b);
  Facts& add(std::string key, const std::vector<std::string>& list);
  Facts& addNull(std::string key);  // JSON null: a fact that is not known
  // {"code":CODE, ...facts...} as one line of JSON.
  std::string json(std::string_view code) const;
  // The plain-text value of a fact (numbers as digits, lists comma-separated); nullptr if absent.
  const std::string* text(std::string_view key) const;
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }

 private:
  // Only the plain text is kept for strings and scalars: most verdicts (a rewrite) are never
  // rendered as JSON, so the encoding is done by json(), when a verdict is sent.
  enum class Encoding { kString, kRaw, kPrebuilt };
  struct Item {
    std::string key;
    std::string text;  // for placeholders; the value itself unless kPrebuilt
    Encoding encoding = Encoding::kString;
    std::string json;  // kPrebuilt only (lists)
  };
  Item& push(std::string key, Encoding encoding);
  std::vector<Item> items_;
};

// A guard's answer. kAllow with nothing else set means "no objection" and is not recorded.
struct GuardResult {
  Action action = Action::kAllow;
  std::string code;
  std::string sqlstate;  // filled from the code's documented SQLSTATE when left empty
  std::string message;
  std::string hint;
  Facts facts;           // becomes Verdict::detail
  std::string subject;   // the table/function/setting the verdict is about (for per-table reasons)
  // kRewrite: edits of the text, the row cap the session enforces, the notice it sends on a cut.
  TextEdits edits;
  int64_t max_rows = -1;
  std::string truncation_notice;
  // cost_gate: the statement must be planned (EXPLAIN) before it may run.
  bool wants_plan = false;
  // http_webhook: the chain pauses here until the daemon has POSTed webhook_body to the guard's
  // service; PolicyGroup::resumeWebhook hands the answer to checkWebhookAnswer and goes on.
  bool wants_webhook = false;
  std::string webhook_body;

  static GuardResult allow() { return {}; }
  // Back to allow() with every string and list emptied, their storage kept.
  void clear();
  bool objects() const {
    return action != Action::kAllow || wants_plan || wants_webhook || !edits.empty() || max_rows >= 0;
  }
};

// Everything a guard may read while checking one text. The analysis is the cached one.
struct GuardInput {
  const analysis::Analysis& analysis;
  std::string_view sql;
  const RequestContext& ctx;
  const analysis::TableStatsSnapshot* stats;  // null until the first catalog refresh
  const GroupSettings& group;
};

struct PlanInput {
  const analysis::PlanSummary& plan;
  const analysis::TableStatsSnapshot* stats;
  const GroupSettings& group;
};

class Guard {
 public:
  virtual ~Guard() = default;
  // The config `kind:` of this guard, e.g. "require_predicate".
  virtual std::string_view kind() const = 0;
  // The codes this guard can answer with (for validating `reasons:`); {"*"} for any code.
  virtual std::vector<std::string_view> codes() const = 0;

  // Called once per text before the per-statement checks (multi-statement rules).
  virtual GuardResult checkText(const GuardInput& in) const {
    (void)in;
    return {};
  }
  // Called once for every statement of the text.
  virtual GuardResult checkStatement(const GuardInput& in,
                                     const analysis::StatementInfo& st) const {
    (void)in;
    (void)st;
    return {};
  }
  // checkStatement written over `out`, which the chain hands in cleared (GuardResult::clear) and
  // reuses from statement to statement: a guard that answers most statements with texts of its
  // own (row_limit caps every read without a LIMIT) overrides it and writes into `out`'s
  // storage, so steady traffic costs it no allocation.
  virtual void checkStatementInto(const GuardInput& in, const analysis::StatementInfo& st,
                                  GuardResult& out) const {
    out = checkStatement(in, st);
  }
  // Called by PolicyGroup::evaluatePlan for guards that set wants_plan.
  virtual GuardResult checkPlan(const PlanInput& in) const {
    (void)in;
    return {};
  }
  // Called by PolicyGroup::planUnavailable for guards that set wants_plan: what to do when no
  // plan could be had (deny with PLAN_UNAVAILABLE, or allow).
  virtual GuardResult planUnavailable() const { return {}; }
  // Called by PolicyGroup::resumeWebhook for a guard that set wants_webhook: the service's answer
  // (or why there is none) becomes this guard's verdict.
  virtual GuardResult checkWebhookAnswer(const WebhookOutcome& outcome) const {
    (void)outcome;
    return {};
  }
  // What this guard enforces, for a caller to read before it tries (the MCP `policy` tool): one
  // compact JSON object of its settings, or "" when it has nothing to say beyond its kind.
  virtual std::string describe() const { return {}; }
  // Whether a statement may read "schema.table" as far as this guard is concerned (nullopt: it
  // does not judge tables by name). Used to list only what a caller may read.
  virtual std::optional<bool> allowsTable(std::string_view qualified) const {
    (void)qualified;
    return std::nullopt;
  }
  // True when every answer of this guard follows from its input alone (the analysis, the text,
  // the catalog snapshot and the group's settings) and its own configuration: no clock, no
  // script, no outside service, no budget counter, nothing of who is asking. A group whose
  // guards all say so gets the same decision for the same text, so the policy engine may keep it
  // (session/statement_policy.h). A kind that cannot promise it keeps the default.
  virtual bool deterministic() const { return false; }
  // True when whether this guard objects to a text (GuardResult::objects, from checkText and
  // every statement's check) follows only from what all texts of one shape template share
  // (analysis/shape_template.h): the analysis without the fields a template rebuilds from each
  // text's literals (analysis/shape_template.cpp, forEachField: the statements' and LIMIT's
  // spans, the LIMIT's value, function calls' constant arguments, the screens' compared values),
  // the catalog snapshot and the group's settings. It never reads those fields nor the text to
  // decide; what it says once it objects may quote them. A deterministic group runs such guards
  // once per shape when they have nothing to say (PolicyGroup::BlindGuards). A kind that reads a
  // literal, or cannot promise it, keeps the default.
  virtual bool literalBlind() const { return false; }
  // `action: warn` in config turns this guard's denials into warnings (a dry run).
  bool warnOnly() const { return warn_only_; }
  void setWarnOnly(bool w) { warn_only_ = w; }

 private:
  bool warn_only_ = false;
};

// Builds a guard from its config node. `path` is the dotted config path of the node, for errors.
using GuardFactory = std::function<std::unique_ptr<Guard>(
    const YAML::Node& node, const std::string& path, const GroupSettings& group)>;

class GuardRegistry {
 public:
  // The built-in kinds: read_only, functions, tables, multi_statement, require_predicate,
  // row_limit, cost_gate.
  static const GuardRegistry& builtin();
  GuardRegistry() = default;
  void add(std::string kind, GuardFactory factory) { factories_[std::move(kind)] = std::move(factory); }
  const GuardFactory* find(std::string_view kind) const;
  std::vector<std::string> kinds() const;

 private:
  std::map<std::string, GuardFactory, std::less<>> factories_;
};

// Guard config keys every kind accepts besides its own.
inline constexpr const char* kCommonGuardKeys[] = {"kind", "action"};
// Checks `node`'s keys against `own` plus the common keys (ConfigError with line and key).
void checkGuardKeys(const YAML::Node& node, const std::string& path,
                    std::initializer_list<const char*> own,
                    config::SourceSite site = config::SourceSite::current());

}  // namespace pgwarden::guards
