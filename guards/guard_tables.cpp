// tables: allow and deny lists of "schema.table" glob patterns over every relation a statement
// names (read or written, CTE names excluded). An unqualified name is checked under every schema
// it could resolve to: denied if any of them is denied, allowed only if all of them are allowed.
#include "common/config_util.h"
#include "guards/builtin_guards.h"
#include "guards/codes.h"
#include "guards/guard_util.h"

namespace pgwarden::guards {

namespace {

// Readable views that answer what an agent usually wants from a catalog that holds secrets.
const char* alternativeFor(const std::string& qualified) {
  if (qualified == "pg_catalog.pg_authid" || qualified == "pg_catalog.pg_shadow") {
    return "pg_catalog.pg_roles";
  }
  return nullptr;
}

class TablesGuard final : public Guard {
 public:
  TablesGuard(std::vector<std::string> allow, std::vector<std::string> deny)
      : allow_(std::move(allow)), deny_(std::move(deny)) {}

  std::string_view kind() const override { return "tables"; }
  bool deterministic() const override { return true; }
  bool literalBlind() const override { return true; }
  std::vector<std::string_view> codes() const override { return {codes::kTableDenied}; }

  GuardResult checkStatement(const GuardInput& in,
                             const analysis::StatementInfo& st) const override {
    // Each name the relation could resolve to, matched in place: a name is built only for a denial.
    for (const auto& rel : st.relations) {
      std::string_view bad;
      bool found = false;
      util::forEachCandidateSchema(rel.schema, rel.name, in.group, [&](std::string_view schema) {
        for (const auto& p : deny_) {
          if (util::globMatch(p, schema, rel.name, true)) {
            bad = schema;
            return found = true;
          }
        }
        return false;
      });
      if (!found && !allow_.empty()) {
        util::forEachCandidateSchema(rel.schema, rel.name, in.group, [&](std::string_view schema) {
          bool ok = false;
          for (const auto& p : allow_) ok = ok || util::globMatch(p, schema, rel.name, false);
          if (!ok) bad = schema;
          return found = !ok;
        });
      }
      if (found) return denied(rel, std::string(bad).append(".").append(rel.name));
    }
    return {};
  }

  std::string describe() const override {
    Facts f;
    if (!allow_.empty()) f.add("allow", allow_);
    if (!deny_.empty()) f.add("deny", deny_);
    return f.json(kind());
  }

  std::optional<bool> allowsTable(std::string_view qualified) const override {
    const std::string n(qualified);
    for (const auto& p : deny_) {
      if (util::globMatch(p, n, true)) return false;
    }
    if (allow_.empty()) return true;
    for (const auto& p : allow_) {
      if (util::globMatch(p, n, false)) return true;
    }
    return false;
  }

 private:
  GuardResult denied(const analysis::RelationRef& rel, const std::string& resolved) const {
    GuardResult r;
    r.action = Action::kDeny;
    r.code = std::string(codes::kTableDenied);
    r.subject = resolved;
    const std::string shown = rel.schema.empty() ? resolved : util::displayName(rel.schema, rel.name);
    const char* alt = alternativeFor(util::lower(resolved));
    std::string next;
    if (alt) {
      next = std::string("use ") + alt + " instead";
      r.hint = std::string("SELECT * FROM ") + alt + " LIMIT 100";
    } else if (!allow_.empty()) {
      next = "query only the tables listed as allowed";
    } else {
      next = "query other tables";
    }
    r.message = shown + " is not available through this connection; " + next + ".";
    r.facts.add("table", resolved);
    if (!allow_.empty()) r.facts.add("allowed", allow_);
    r.facts.add("next_step", next);
    return r;
  }

  std::vector<std::string> allow_;
  std::vector<std::string> deny_;
};

}  // namespace

std::unique_ptr<Guard> makeTablesGuard(const YAML::Node& node, const std::string& path,
                                       const GroupSettings& group) {
  (void)group;
  checkGuardKeys(node, path, {"allow", "deny"});
  std::vector<std::string> allow = config::getStringList(node, path, "allow");
  std::vector<std::string> deny = config::getStringList(node, path, "deny");
  if (allow.empty() && deny.empty()) {
    config::fail(node, path, "a tables guard needs an allow or a deny list");
  }
  for (const auto* list : {&allow, &deny}) {
    for (const auto& p : *list) {
      if (p.find('.') == std::string::npos) {
        config::fail(node, path, "pattern '" + p + "' must be schema-qualified (\"schema.table\" or \"schema.*\")");
      }
    }
  }
  return std::make_unique<TablesGuard>(std::move(allow), std::move(deny));
}

}  // namespace pgwarden::guards
