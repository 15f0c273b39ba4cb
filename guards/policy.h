// Policy groups and the guard chain. A group is an ordered list of guards built once from config;
// evaluate() runs a statement text through it exactly once and returns one Decision the session
// acts on. Guards never touch sockets; anything that needs the server (catalog statistics, EXPLAIN)
// comes in as data.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "guards/analysis.h"

namespace pgwarden::guards {

enum class Action { kAllow, kWarn, kDeny, kRewrite };
const char* actionName(Action a);

// One guard's verdict, as history records it and as the client sees it.
struct Verdict {
  std::string guard;     // guard kind, e.g. "require_predicate"
  Action action = Action::kAllow;
  std::string code;      // e.g. "MISSING_PREDICATE"
  std::string sqlstate;  // for deny: 42501 policy, 54000 limits, 42601 syntax, ...
  std::string message;   // one sentence: what was wrong and what to do next
  std::string detail;    // compact JSON object with the facts
  std::string hint;      // an example query that would pass
};

struct Decision {
  bool denied = false;
  Verdict deny;                          // valid when denied
  std::vector<Verdict> warnings;         // sent as NoticeResponse before the result
  std::vector<Verdict> actions;          // every non-allow verdict, in order, for history
  std::optional<std::string> rewritten_sql;  // forward this text instead of the original
  int64_t max_rows = -1;                 // >= 0: the client receives at most this many rows
  std::string truncation_notice;         // message to send when max_rows cut the result
};

// What the catalog says about tables, refreshed by the daemon on its own server connection.
struct TableStats {
  int64_t estimated_rows = 0;
  std::vector<std::string> indexed_columns;  // leading column of each index, best first
};
class TableStatsSnapshot {
 public:
  // The query the daemon runs (read-only, catalog only); each row: schema, table, reltuples,
  // comma-separated leading index columns.
  static const char* catalogQuery();
  // Builds a snapshot from that query's text-format rows.
  static std::shared_ptr<const TableStatsSnapshot> fromRows(
      const std::vector<std::vector<std::string>>& rows);
  const TableStats* find(std::string_view schema, std::string_view table) const;
  size_t size() const { return tables_.size(); }

 private:
  std::map<std::string, TableStats, std::less<>> tables_;  // key "schema.table"
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
};

class Guard;  // defined in guards/guard.h

class PolicyGroup {
 public:
  PolicyGroup(std::string name, std::vector<std::unique_ptr<Guard>> guards,
              std::vector<std::string> search_path);
  ~PolicyGroup();
  const std::string& name() const { return name_; }
  const std::vector<std::string>& searchPath() const { return search_path_; }
  const std::vector<std::unique_ptr<Guard>>& guards() const { return guards_; }
  // Runs the chain once over all statements of the text. `stats` may be null (not loaded yet).
  Decision evaluate(const Analysis& analysis, std::string_view sql, const RequestContext& ctx,
                    const TableStatsSnapshot* stats) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Guard>> guards_;
  std::vector<std::string> search_path_;
};

using PolicyMap = std::map<std::string, std::shared_ptr<const PolicyGroup>, std::less<>>;

// Parses the `groups:` section. Throws config::ConfigError with line and key on any problem.
PolicyMap parsePolicyGroups(const YAML::Node& groups);

// The denial for text libpg_query cannot parse (SQLSTATE 42601, parser message and position).
Verdict syntaxErrorVerdict(const Analysis& analysis);

}  // namespace pgwarden::guards
