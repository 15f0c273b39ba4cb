// multi_statement: one statement per Query. A second statement is how a write rides along with an
// innocent read ("SELECT 1; DELETE ..."), and an agent reads one result best anyway.
#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

class MultiStatementGuard final : public Guard {
 public:
  explicit MultiStatementGuard(int64_t max) : max_(max) {}

  std::string_view kind() const override { return "multi_statement"; }
  bool deterministic() const override { return true; }
  bool literalBlind() const override { return true; }
  std::vector<std::string_view> codes() const override { return {codes::kMultiStatement}; }

  GuardResult checkText(const GuardInput& in) const override {
    const auto& stmts = in.analysis.statements;
    if (static_cast<int64_t>(stmts.size()) <= max_) return {};
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kMultiStatement);
    const std::string n = std::to_string(stmts.size());
    r.message = "This query holds " + n + " statements and only " +
                (max_ == 1 ? std::string("one is") : std::to_string(max_) + " are") +
                " allowed per query; send the statements one at a time.";
    r.facts.add("statements", static_cast<int64_t>(stmts.size()))
        .add("max_statements", max_)
        .add("next_step", "send each statement in its own query");
    const std::string_view first = util::statementText(in.sql, stmts.front());
    if (first.size() <= 300) r.hint = std::string(first);
    return r;
  }

 private:
  int64_t max_;
};

}  // namespace

std::unique_ptr<Guard> makeMultiStatementGuard(const YAML::Node& node, const std::string& path,
                                               const GroupSettings& group) {
  (void)group;
  checkGuardKeys(node, path, {"max_statements"});
  return std::make_unique<MultiStatementGuard>(
      config::getInt(node, path, "max_statements", 1, 1, 1000));
}

}  // namespace pgwarden::guards
