// The statement walker's state and methods, shared by the two files that define them:
// statement_walker.cpp (statement kinds: transaction, SET, COPY, DML, DDL) and query_walker.cpp
// (WITH, SELECT, FROM, LIMIT, the generic walk, and the results). Internal to analysis/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/pg_json.h"
#include "analysis/predicates.h"

namespace pgwarden::analysis::detail {

class Walker {
 public:
  Walker(std::string_view sql, StatementInfo& out) : sql_(sql), out_(out) {}

  void run(element stmt);

 private:
  struct Ctx {
    bool filtered = false;  // an enclosing level filters these rows
    bool reaches = true;    // rows can reach the client
    int cte = -1;           // innermost CTE body being walked
  };
  // One mention of a relation (cte_target < 0) or of a CTE name (cte_target = its id).
  struct Ref {
    std::string_view schema, name;
    bool filtered = false, aggregated = false, reaches = false, written = false;
    bool trivial_where = false;
    int owner = -1;
    int cte_target = -1;
  };
  // How the rows of a CTE are used, summed over its references.
  struct Cte {
    std::string_view name;
    bool visiting = false, done = false;
    bool filtered = true, aggregated = true, reaches = false, unbounded = false;
  };
  struct Level {
    bool aggregate = false;
    bool collecting = false;
  };

  // ---- statements (statement_walker.cpp) ----

  void setCommand(bool top, std::string c);
  StatementKind walkStmt(element node, Ctx ctx, bool outermost, bool top);
  // The families of statement kinds walkStmt dispatches to: each gives nothing for a type that
  // is not one of its own.
  std::optional<StatementKind> walkSelectOrDml(Node n, Ctx ctx, bool outermost, bool top);
  std::optional<StatementKind> walkExplainOrPrepare(element node, Node n, bool top);
  std::optional<StatementKind> walkCreateRelation(Node n, bool top);
  std::optional<StatementKind> walkSessionSetting(Node n, bool top);
  std::optional<StatementKind> walkCallOrNotify(Node n, bool top);
  std::optional<StatementKind> walkAdmin(element node, Node n, bool top);
  static bool isDdl(std::string_view t);
  static std::string commandFromType(std::string_view t);
  static bool defBool(object def);
  static bool readWriteIn(object body, std::string_view key);
  StatementKind walkTransaction(object b, bool top);
  StatementKind walkVariableSet(object b, bool top);
  std::string numberAt(element a) const;
  StatementKind walkCopy(object b, bool top);
  StatementKind walkDml(std::string_view t, object b, Ctx ctx);

  // ---- queries (query_walker.cpp) ----

  void walkWith(object with, Ctx ctx);
  int newCte(std::string_view name);

  // The fields of a SelectStmt that the walk looks at, gathered in one pass over the object
  // (key lookups are linear scans; doing them one by one cost more than the rest of the walk).
  struct SelectFields {
    object with, larg, rarg, into;
    bool has_with = false, has_larg = false, has_rarg = false, has_into = false;
    array from;
    bool has_from = false;
    element where;
    bool has_where = false;
    bool locking = false, group = false, distinct = false, having = false;
    std::string_view op;
  };

  static SelectFields selectFields(object sel);
  bool walkSelect(object sel, Ctx ctx, bool outermost);
  void walkFrom(element item, Ctx ctx, const std::vector<Refs>& filters, bool wild,
                bool trivial_where);
  void readLimit(object sel);

  // ---- the generic walk (query_walker.cpp) ----

  void walkAny(array a, Ctx ctx);
  void walkAny(element e, Ctx ctx);
  void recordRangeVar(object rv, Ctx ctx, bool filtered, bool written, bool trivial_where);
  void recordFunc(object fc);

  // ---- results (query_walker.cpp) ----

  const Cte& effective(int id);
  void finish();
  static bool isWrite(StatementKind k);
  Intent readIntent() const;
  Intent inferIntent() const;

  std::string_view sql_;
  StatementInfo& out_;
  std::vector<Ref> refs_;
  std::vector<Cte> ctes_;
  std::vector<std::pair<std::string_view, int>> visible_;  // CTE names in scope, innermost last
  Level* level_ = nullptr;  // the query level whose target list is being walked
};

}  // namespace pgwarden::analysis::detail
