// The query half of the statement walker: WITH scopes, SELECT levels, FROM items and their
// predicates, the outermost LIMIT, the generic walk (every object is visited, so relations and
// calls hidden in odd places are still found, sublinks included), and the summing of what was
// recorded into the StatementInfo's relations and intent.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analysis/statement_walker.h"
#include "analysis/walker.h"

namespace pgwarden::analysis::detail {

// Makes the CTE names of a WITH clause visible (the caller restores visible_ afterwards) and
// walks each body. Without RECURSIVE a CTE sees only the ones before it, so a later CTE named
// like a table cannot hide a read of that table in an earlier body.
void Walker::walkWith(object with, Ctx ctx) {
  array list;
  if (!pgjson::getArray(with, "ctes", list)) return;
  const bool recursive = pgjson::boolean(with, "recursive");
  std::vector<int> ids;
  if (recursive) {
    out_.recursive_cte = true;
    for (element c : list) {
      Node n = asNode(c);
      const int id = newCte(pgjson::str(n.body, "ctename"));
      visible_.emplace_back(ctes_[id].name, id);
      ids.push_back(id);
    }
  }
  size_t i = 0;
  for (element c : list) {
    Node n = asNode(c);
    const std::string_view name = pgjson::str(n.body, "ctename");
    const int id = recursive ? ids[i] : newCte(name);
    ++i;
    element q;
    if (pgjson::get(n.body, "ctequery", q)) {
      Node qn = asNode(q);
      const Ctx body{false, true, id};
      if (qn.type == "InsertStmt" || qn.type == "UpdateStmt" || qn.type == "DeleteStmt" ||
          qn.type == "MergeStmt") {
        out_.modifying_cte = true;
        walkDml(qn.type, qn.body, body);
      } else if (qn.type == "SelectStmt") {
        Level* saved = level_;
        level_ = nullptr;
        walkSelect(qn.body, body, false);
        level_ = saved;
        if (recursive && armUnbounded(qn.body, name)) out_.unbounded_recursion = true;
      } else {
        walkAny(q, body);
      }
    }
    if (!recursive) visible_.emplace_back(name, id);
  }
  (void)ctx;
}

int Walker::newCte(std::string_view name) {
  ctes_.push_back(Cte{});
  ctes_.back().name = name;
  return static_cast<int>(ctes_.size()) - 1;
}

Walker::SelectFields Walker::selectFields(object sel) {
  SelectFields f;
  for (auto field : sel) {
    const std::string_view k = field.key;
    if (k == "fromClause") {
      f.has_from = !field.value.get_array().get(f.from);
    } else if (k == "whereClause") {
      f.where = field.value;
      f.has_where = true;
    } else if (k == "withClause") {
      f.has_with = !field.value.get_object().get(f.with);
    } else if (k == "op") {
      f.op = field.value.get_string().value_unsafe();
    } else if (k == "larg") {
      f.has_larg = !field.value.get_object().get(f.larg);
    } else if (k == "rarg") {
      f.has_rarg = !field.value.get_object().get(f.rarg);
    } else if (k == "intoClause") {
      f.has_into = !field.value.get_object().get(f.into);
    } else if (k == "lockingClause") {
      f.locking = true;
    } else if (k == "groupClause") {
      f.group = true;
    } else if (k == "distinctClause") {
      f.distinct = true;
    } else if (k == "havingClause") {
      f.having = true;
    }
  }
  return f;
}

// Returns whether this query level reduces its rows (aggregate, GROUP BY, DISTINCT, HAVING).
bool Walker::walkSelect(object sel, Ctx ctx, bool outermost) {
  const size_t visible = visible_.size();
  const SelectFields f = selectFields(sel);
  if (f.has_with) walkWith(f.with, ctx);
  if (f.locking) out_.locking_clause = true;
  bool aggregated = false;
  Level* saved = level_;
  if (!f.op.empty() && f.op != "SETOP_NONE") {
    const bool al = f.has_larg ? walkSelect(f.larg, ctx, false) : true;
    const bool ar = f.has_rarg ? walkSelect(f.rarg, ctx, false) : true;
    aggregated = al && ar;
    level_ = nullptr;
    for (auto field : sel) {
      const std::string_view k = field.key;
      if (k == "sortClause" || k == "limitCount" || k == "limitOffset") {
        walkAny(field.value, Ctx{false, ctx.reaches, ctx.cte});
      }
    }
  } else {
    Names names;
    if (f.has_from) {
      for (element item : f.from) fromNames(item, names);
    }
    std::vector<Refs> filters;
    if (f.has_where) filters = filtersOf(f.where, names);
    const bool trivial_where = f.has_where && filters.empty();

    level_ = nullptr;
    const size_t from_begin = refs_.size();
    if (f.has_from) {
      for (element item : f.from) walkFrom(item, ctx, filters, false, trivial_where);
    }
    const size_t from_end = refs_.size();

    Level level;
    level_ = &level;
    const Ctx expr{false, ctx.reaches, ctx.cte};
    for (auto field : sel) {
      const std::string_view k = field.key;
      if (k == "targetList" || k == "whereClause" || k == "havingClause" || k == "groupClause" ||
          k == "sortClause" || k == "windowClause" || k == "distinctClause" ||
          k == "valuesLists" || k == "limitCount" || k == "limitOffset") {
        walkAny(field.value, expr);
      }
    }
    aggregated = level.aggregate || f.group || f.distinct || f.having;
    if (outermost) out_.plain_aggregate = level.aggregate && !f.group && !f.distinct;
    if (level.collecting) aggregated = false;
    if (aggregated) {
      for (size_t i = from_begin; i < from_end; ++i) refs_[i].aggregated = true;
    }
    object rel;
    if (f.has_into) {
      if (outermost) out_.select_into = true;
      if (pgjson::getObject(f.into, "rel", rel)) recordRangeVar(rel, ctx, false, true, false);
    }
  }
  level_ = saved;
  if (outermost) readLimit(sel);
  visible_.resize(visible);
  return aggregated;
}

void Walker::walkFrom(element item, Ctx ctx, const std::vector<Refs>& filters, bool wild,
                      bool trivial_where) {
  Node n = asNode(item);
  // A join and a sampled table are counted by the items they hold.
  if (n.type != "JoinExpr" && n.type != "RangeTableSample") ++out_.from_items;
  if (n.type == "RangeVar") {
    const std::string_view a = aliasOf(n.body);
    const std::string_view name = a.empty() ? pgjson::str(n.body, "relname") : a;
    const bool filtered = ctx.filtered || wild || matches(filters, name);
    recordRangeVar(n.body, ctx, filtered, false, trivial_where);
    return;
  }
  if (n.type == "RangeSubselect") {
    const std::string_view a = aliasOf(n.body);
    const bool filtered = ctx.filtered || wild || (!a.empty() && matches(filters, a));
    element sub;
    if (pgjson::get(n.body, "subquery", sub)) {
      Node sn = asNode(sub);
      const Ctx c{filtered, ctx.reaches, ctx.cte};
      if (sn.type == "SelectStmt") {
        walkSelect(sn.body, c, false);
      } else {
        walkAny(sub, c);
      }
    }
    return;
  }
  if (n.type == "JoinExpr") {
    const std::string_view jt = pgjson::str(n.body, "jointype");
    Names names;
    fromNames(item, names);
    element quals;
    const bool has_quals = pgjson::get(n.body, "quals", quals);
    std::vector<Refs> qf;
    if (has_quals) qf = filtersOf(quals, names);
    const bool join_wild = pgjson::has(n.body, "usingClause") || pgjson::boolean(n.body, "isNatural");
    const std::string_view a = aliasOf(n.body);
    const bool alias_hit = !a.empty() && matches(filters, a);
    // An outer join's ON clause does not filter its preserved side.
    const bool left_gets = jt.empty() || jt == "JOIN_INNER" || jt == "JOIN_RIGHT";
    const bool right_gets = jt.empty() || jt == "JOIN_INNER" || jt == "JOIN_LEFT";
    auto side = [&](bool gets) {
      std::vector<Refs> v = filters;
      if (gets) v.insert(v.end(), qf.begin(), qf.end());
      return v;
    };
    element l, r;
    if (pgjson::get(n.body, "larg", l)) {
      walkFrom(l, ctx, side(left_gets), wild || alias_hit || (join_wild && left_gets),
               trivial_where);
    }
    if (pgjson::get(n.body, "rarg", r)) {
      walkFrom(r, ctx, side(right_gets), wild || alias_hit || (join_wild && right_gets),
               trivial_where);
    }
    if (has_quals) walkAny(quals, Ctx{false, false, ctx.cte});
    return;
  }
  if (n.type == "RangeTableSample") {
    // TABLESAMPLE with a constant percentage below 100 bounds the rows like a predicate does.
    bool sampled = false;
    array args;
    if (pgjson::getArray(n.body, "args", args)) {
      for (element a : args) {
        const ConstArg c = pgjson::constOf(a);
        sampled = (c.type == ConstArg::Type::kInteger || c.type == ConstArg::Type::kFloat) &&
                  c.number < 100;
        break;
      }
      walkAny(args, Ctx{false, false, ctx.cte});
    }
    element rel;
    if (pgjson::get(n.body, "relation", rel)) {
      walkFrom(rel, Ctx{ctx.filtered || sampled, ctx.reaches, ctx.cte}, filters, wild,
               trivial_where);
    }
    return;
  }
  walkAny(item, ctx);
}

void Walker::readLimit(object sel) {
  element lc;
  if (!pgjson::get(sel, "limitCount", lc)) {
    out_.limit = LimitKind::kNone;
    return;
  }
  Node n = asNode(lc);
  if (n.type == "A_Const") {
    const int loc = static_cast<int>(pgjson::int64(n.body, "location", -1));
    out_.limit_location = loc;
    out_.limit_length = loc >= 0 ? literalLength(sql_, loc) : 0;
    if (pgjson::boolean(n.body, "isnull")) {
      out_.limit = LimitKind::kAll;
      return;
    }
    const ConstArg c = pgjson::constOf(lc);
    if (c.type == ConstArg::Type::kInteger || c.type == ConstArg::Type::kFloat) {
      out_.limit = LimitKind::kConstant;
      out_.limit_value = c.number >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(std::llround(c.number));
      return;
    }
    out_.limit = LimitKind::kOther;
    return;
  }
  out_.limit_location = -1;
  out_.limit = n.type == "ParamRef" ? LimitKind::kParameter : LimitKind::kOther;
}

void Walker::walkAny(array a, Ctx ctx) {
  for (element child : a) walkAny(child, ctx);
}

void Walker::walkAny(element e, Ctx ctx) {
  if (e.type() == simdjson::dom::element_type::ARRAY) {
    array a;
    if (e.get_array().get(a)) return;
    for (element child : a) walkAny(child, ctx);
    return;
  }
  object o;
  if (e.get_object().get(o)) return;
  for (auto field : o) {
    const std::string_view k = field.key;
    if (k == "relname") {
      // A RangeVar written unwrapped (a typed struct field such as COPY's relation). Its
      // fields before relname are scalars, so nothing below it was walked yet.
      recordRangeVar(o, ctx, ctx.filtered, false, false);
      return;
    }
    if (!isContainer(field.value)) continue;
    object body;
    if (k == "ColumnRef" || k == "A_Const" || k == "typeName" || k == "TypeName" ||
        k == "alias" || k == "String") {
      continue;
    }
    if (k == "ParamRef") {
      if (!field.value.get_object().get(body)) {
        out_.max_param = std::max<int>(out_.max_param, static_cast<int>(pgjson::int64(body, "number")));
      }
      continue;
    }
    if (k == "SelectStmt") {
      if (field.value.get_object().get(body)) continue;
      Level* saved = level_;
      level_ = nullptr;
      walkSelect(body, ctx, false);
      level_ = saved;
      continue;
    }
    if (k == "InsertStmt" || k == "UpdateStmt" || k == "DeleteStmt" || k == "MergeStmt") {
      if (!field.value.get_object().get(body)) walkDml(k, body, ctx);
      continue;
    }
    if (k == "FuncCall") {
      if (field.value.get_object().get(body)) continue;
      recordFunc(body);
      walkAny(field.value, ctx);
      continue;
    }
    if (k == "SubLink") {
      if (field.value.get_object().get(body)) continue;
      element test, sub;
      if (pgjson::get(body, "testexpr", test)) walkAny(test, ctx);
      if (pgjson::get(body, "subselect", sub)) {
        // ARRAY(...) hands its rows to the client as one array value, and so does a scalar
        // subquery: (SELECT array_agg(id) FROM big) is one value holding the whole table.
        const std::string_view type = pgjson::str(body, "subLinkType");
        const bool array_sub = type == "ARRAY_SUBLINK" || type == "EXPR_SUBLINK";
        Level* saved = level_;
        level_ = nullptr;
        walkAny(sub, Ctx{false, array_sub && ctx.reaches, ctx.cte});
        level_ = saved;
      }
      continue;
    }
    walkAny(field.value, ctx);
  }
}

void Walker::recordRangeVar(object rv, Ctx ctx, bool filtered, bool written, bool trivial_where) {
  Ref r;
  r.schema = pgjson::str(rv, "schemaname");
  r.name = pgjson::str(rv, "relname");
  r.owner = ctx.cte;
  r.filtered = filtered;
  r.written = written;
  r.reaches = ctx.reaches && !written;
  r.trivial_where = trivial_where;
  if (r.schema.empty()) {
    for (auto it = visible_.rbegin(); it != visible_.rend(); ++it) {
      if (it->first == r.name) {
        r.cte_target = it->second;
        break;
      }
    }
  }
  refs_.push_back(r);
}

void Walker::recordFunc(object fc) {
  array names;
  std::vector<std::string_view> parts;
  if (pgjson::getArray(fc, "funcname", names)) {
    for (element n : names) parts.push_back(pgjson::stringNode(n));
  }
  if (parts.empty()) return;
  FunctionCall call;
  call.name = std::string(parts.back());
  if (parts.size() >= 2) call.schema = std::string(parts[parts.size() - 2]);
  array args;
  if (pgjson::getArray(fc, "args", args)) {
    for (element a : args) call.args.push_back(pgjson::constOf(a));
  }
  call.aggregate_star = pgjson::boolean(fc, "agg_star");
  std::string qualified = call.schema.empty() ? call.name : call.schema + "." + call.name;
  if (std::find(out_.functions.begin(), out_.functions.end(), qualified) == out_.functions.end()) {
    out_.functions.push_back(std::move(qualified));
  }
  const std::string lname = lower(call.name);
  if (lname == "set_config" && (call.schema.empty() || iequals(call.schema, "pg_catalog"))) {
    const bool named = !call.args.empty() && call.args[0].type == ConstArg::Type::kString;
    out_.set_config_names.push_back(named ? lower(call.args[0].text) : "*");
  }
  if (level_ && !pgjson::has(fc, "over")) {
    const bool agg = call.aggregate_star || pgjson::boolean(fc, "agg_distinct") ||
                     pgjson::has(fc, "agg_order") || pgjson::boolean(fc, "agg_within_group") ||
                     pgjson::has(fc, "agg_filter") || aggregateName(lname);
    if (agg) {
      level_->aggregate = true;
      if (collectingName(lname)) level_->collecting = true;
    }
  }
  out_.calls.push_back(std::move(call));
}

const Walker::Cte& Walker::effective(int id) {
  Cte& c = ctes_[id];
  if (c.done) return c;
  if (c.visiting) return c;  // a cycle through recursive CTEs: the partial sums so far
  c.visiting = true;
  bool any_use = false;
  bool f = true, a = true, r = false, u = false;
  for (const Ref& use : refs_) {
    if (use.cte_target != id || use.owner == id) continue;  // self-references add nothing
    any_use = true;
    bool uf = use.filtered, ua = use.aggregated, ur = use.reaches;
    bool uu = ur && !uf && !ua;
    if (use.owner >= 0) {
      const Cte& o = effective(use.owner);
      uf = uf || o.filtered;
      ua = ua || o.aggregated;
      ur = ur && o.reaches;
      uu = uu && o.unbounded;
    }
    f = f && uf;
    a = a && ua;
    r = r || ur;
    u = u || uu;
  }
  if (any_use) {
    c.filtered = f;
    c.aggregated = a;
    c.reaches = r;
    c.unbounded = u;
  }  // else: never read, so never run (a data-modifying CTE is caught by its own flag)
  c.visiting = false;
  c.done = true;
  return c;
}

void Walker::finish() {
  for (const Ref& ref : refs_) {
    if (ref.cte_target >= 0) continue;
    bool filtered = ref.filtered, aggregated = ref.aggregated, reaches = ref.reaches;
    bool unbounded = reaches && !filtered && !aggregated;
    if (ref.owner >= 0) {
      const Cte& c = effective(ref.owner);
      filtered = filtered || c.filtered;
      aggregated = aggregated || c.aggregated;
      reaches = reaches && c.reaches;
      unbounded = unbounded && c.unbounded;
    }
    RelationRef* rel = nullptr;
    for (auto& existing : out_.relations) {
      if (existing.schema == ref.schema && existing.name == ref.name) {
        rel = &existing;
        break;
      }
    }
    if (!rel) {
      out_.relations.push_back(RelationRef{});
      rel = &out_.relations.back();
      rel->schema = std::string(ref.schema);
      rel->name = std::string(ref.name);
      rel->has_predicate = true;
    }
    rel->has_predicate = rel->has_predicate && filtered;
    rel->written = rel->written || ref.written;
    rel->reaches_client = rel->reaches_client || reaches;
    rel->unbounded_read = rel->unbounded_read || unbounded;
    rel->trivial_predicate = rel->trivial_predicate || (ref.trivial_where && !filtered);
  }

  const StatementKind k = out_.kind;
  out_.returns_rows = (k == StatementKind::kSelect && !out_.select_into) ||
                      (k == StatementKind::kCopy && !out_.copy_from && !out_.copy_to_file) ||
                      k == StatementKind::kFetch || k == StatementKind::kExecute;
  out_.intent = inferIntent();
}

bool Walker::isWrite(StatementKind k) {
  return k == StatementKind::kInsert || k == StatementKind::kUpdate ||
         k == StatementKind::kDelete || k == StatementKind::kMerge;
}

Intent Walker::readIntent() const {
  if (out_.relations.empty()) {
    for (const auto& c : out_.calls) {
      const std::string n = lower(c.name);
      if (n.rfind("pg_", 0) == 0 || n.rfind("has_", 0) == 0 || n.rfind("current_", 0) == 0 ||
          n == "version" || n == "obj_description" || n == "col_description" ||
          n == "format_type" || n.rfind("to_reg", 0) == 0) {
        return Intent::kCatalog;
      }
    }
    return Intent::kLookup;
  }
  bool all_catalog = true;
  for (const auto& r : out_.relations) {
    const bool catalog = iequals(r.schema, "pg_catalog") || iequals(r.schema, "information_schema") ||
                         (r.schema.empty() && r.name.rfind("pg_", 0) == 0);
    all_catalog = all_catalog && catalog;
  }
  if (all_catalog) return Intent::kCatalog;
  return out_.has_aggregate ? Intent::kAggregation : Intent::kLookup;
}

Intent Walker::inferIntent() const {
  const bool planned_only = out_.kind == StatementKind::kExplain && !out_.explain_analyze;
  if (out_.modifying_cte || out_.select_into) return planned_only ? Intent::kOther : Intent::kWrite;
  switch (out_.kind) {
    case StatementKind::kInsert:
    case StatementKind::kUpdate:
    case StatementKind::kDelete:
    case StatementKind::kMerge:
      return Intent::kWrite;
    case StatementKind::kDdl:
      return Intent::kDdl;
    case StatementKind::kMaintenance:
    case StatementKind::kLock:
    case StatementKind::kAlterSystem:
    case StatementKind::kLoad:
    case StatementKind::kListen:
    case StatementKind::kNotify:
    case StatementKind::kUnlisten:
    case StatementKind::kDiscard:
    case StatementKind::kCall:
    case StatementKind::kDo:
    case StatementKind::kSet:
    case StatementKind::kReset:
    case StatementKind::kShow:
      return Intent::kAdmin;
    case StatementKind::kTransaction:
    case StatementKind::kDeallocate:
    case StatementKind::kFetch:
    case StatementKind::kClosePortal:
    case StatementKind::kExecute:
    case StatementKind::kOther:
      return Intent::kOther;
    case StatementKind::kCopy:
      if (out_.copy_from) return Intent::kWrite;
      if (out_.copy_to_file) return Intent::kAdmin;
      return isWrite(out_.inner_kind) ? Intent::kWrite : readIntent();
    case StatementKind::kExplain:
      if (isWrite(out_.inner_kind)) return out_.explain_analyze ? Intent::kWrite : Intent::kOther;
      return readIntent();
    case StatementKind::kPrepare:
    case StatementKind::kDeclareCursor:
      if (isWrite(out_.inner_kind)) return Intent::kWrite;
      if (out_.inner_kind == StatementKind::kDdl) return Intent::kDdl;
      return readIntent();
    case StatementKind::kSelect:
      return readIntent();
  }
  return Intent::kOther;
}

}  // namespace pgwarden::analysis::detail
