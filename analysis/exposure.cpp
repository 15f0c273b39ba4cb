// The walk behind columnExposure (exposure.h): libpg_query's JSON parse tree, each node visited
// with the position its value has in the result. Unknown node types are walked field by field as
// expressions, so a construct this file does not name errs towards "reveals".
#include "analysis/exposure.h"

#include <pg_query.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "analysis/pg_json.h"

namespace pgwarden::analysis {

namespace {

using namespace pgjson;

// Where a value stands. kPlain: a target of a SELECT whose columns keep their origin (the
// statement's own, a subquery in FROM, a CTE); kReveal: inside something that shows it with no
// origin; kHidden: it only decides which rows or how many (WHERE, GROUP BY, ORDER BY, JOIN ON,
// count(), a sublink in a condition).
enum class Pos { kPlain, kReveal, kHidden };

constexpr int kMaxDepth = 400;

class ExposureWalker {
 public:
  explicit ExposureWalker(ColumnExposure& out) : out_(out) {}

  bool value(element e, Pos pos, std::string_view how, int depth) {
    if (depth > kMaxDepth) return false;
    array a;
    if (e.get_array().get(a) == simdjson::SUCCESS) {
      for (element item : a) {
        if (!value(item, pos, how, depth + 1)) return false;
      }
      return true;
    }
    object o;
    if (e.get_object().get(o) != simdjson::SUCCESS) return true;  // a scalar field
    Node n = asNode(e);
    if (n) return node(n.type, n.body, pos, how, depth + 1);
    return fields(o, pos, how, depth + 1);
  }

 private:
  static Pos expression(Pos pos) { return pos == Pos::kPlain ? Pos::kReveal : pos; }

  bool fields(object o, Pos pos, std::string_view how, int depth) {
    for (auto f : o) {
      if (!value(f.value, pos, how, depth)) return false;
    }
    return true;
  }
  bool field(object o, std::string_view key, Pos pos, std::string_view how, int depth) {
    element e;
    return !get(o, key, e) || value(e, pos, how, depth);
  }

  void columnRef(object body, Pos pos, std::string_view how) {
    array names;
    if (!getArray(body, "fields", names)) return;
    size_t count = 0;
    std::string_view last;
    bool star = false;
    for (element f : names) {
      ++count;
      Node n = asNode(f);
      star = n.type == "A_Star";
      last = star ? std::string_view() : stringNode(f);
    }
    if (pos == Pos::kHidden) return;
    if (star) {
      if (pos == Pos::kReveal) out_.star_revealed = true;
      return;
    }
    if (count == 1) out_.whole_rows.emplace_back(last);
    if (pos == Pos::kReveal) out_.revealed.push_back({std::string(last), std::string(how)});
    if (collecting_) collected_.emplace_back(last);
  }

  void relationName(object o) {
    if (auto name = str(o, "relname"); !name.empty()) out_.relation_names.emplace_back(name);
    object alias;
    if (getObject(o, "alias", alias)) {
      if (auto name = str(alias, "aliasname"); !name.empty())
        out_.relation_names.emplace_back(name);
    }
  }

  // A body whose columns a list of names renames: each name stands for any column it selects.
  bool renamedBody(element body, object alias_holder, std::string_view key, Pos pos, int depth) {
    const bool was = collecting_;
    std::vector<std::string> saved;
    saved.swap(collected_);
    const bool star_saved = collected_star_;
    collecting_ = true;
    collected_star_ = false;
    const bool ok = value(body, pos, "a subquery", depth);
    const bool body_star = collected_star_;
    collected_star_ = star_saved || body_star;
    std::vector<std::string> mentioned;
    mentioned.swap(collected_);
    collected_.swap(saved);
    collecting_ = was;
    array names;
    if (getArray(alias_holder, key, names)) {
      for (element n : names) {
        out_.aliases.push_back({std::string(stringNode(n)), mentioned, body_star});
      }
    }
    if (collecting_) collected_.insert(collected_.end(), mentioned.begin(), mentioned.end());
    return ok;
  }

  bool select(object body, Pos pos, int depth) {
    // A set operation's columns have no origin: its arms' targets show their values as is.
    const Pos arm = pos == Pos::kHidden ? pos : Pos::kReveal;
    for (const char* key : {"larg", "rarg"}) {
      object o;
      if (getObject(body, key, o) && !select(o, arm, depth + 1)) return false;
    }
    array targets;
    if (getArray(body, "targetList", targets)) {
      for (element t : targets) {
        Node rt = asNode(t);
        if (rt.type != "ResTarget") continue;
        element v;
        if (!get(rt.body, "val", v)) continue;
        Node vn = asNode(v);
        if (vn.type == "ColumnRef") {
          array f;
          if (getArray(vn.body, "fields", f)) {
            for (element x : f) collected_star_ = collected_star_ || asNode(x).type == "A_Star";
          }
          if (auto alias = str(rt.body, "name"); !alias.empty()) {
            std::vector<std::string> names;
            for (element x : f) names.emplace_back(stringNode(x));
            if (!names.empty()) out_.aliases.push_back({std::string(alias), {names.back()}, false});
          }
        }
        if (!value(v, pos, pos == Pos::kReveal ? "a set operation or subquery" : "an expression",
                   depth + 1)) {
          return false;
        }
      }
    }
    const Pos from = pos == Pos::kHidden ? pos : Pos::kPlain;
    if (!field(body, "fromClause", from, "a FROM item", depth + 1)) return false;
    if (!field(body, "withClause", from, "a CTE", depth + 1)) return false;
    if (!field(body, "valuesLists", expression(pos), "VALUES", depth + 1)) return false;
    for (const char* key : {"whereClause", "havingClause", "groupClause", "sortClause",
                            "distinctClause", "windowClause", "limitCount", "limitOffset"}) {
      if (!field(body, key, Pos::kHidden, "", depth + 1)) return false;
    }
    return true;
  }

  bool node(std::string_view type, object body, Pos pos, std::string_view how, int depth) {
    if (type == "ColumnRef") {
      columnRef(body, pos, how);
      return true;
    }
    if (type == "SelectStmt") return select(body, pos, depth);
    if (type == "RangeVar") {
      relationName(body);
      return true;
    }
    if (type == "FuncCall") {
      array names;
      std::string_view fn;
      if (getArray(body, "funcname", names)) {
        for (element n : names) fn = stringNode(n);
      }
      if (fn == "count") return fields(body, Pos::kHidden, "", depth);
      return fields(body, expression(pos), "an expression", depth);
    }
    if (type == "RangeSubselect" || type == "CommonTableExpr") {
      object alias;
      const bool has_alias = getObject(body, "alias", alias);
      if (has_alias) relationName(body);
      if (auto name = str(body, "ctename"); !name.empty()) out_.relation_names.emplace_back(name);
      element inner;
      const char* key = type == "RangeSubselect" ? "subquery" : "ctequery";
      if (!get(body, key, inner)) return true;
      const Pos p = pos == Pos::kHidden ? pos : Pos::kPlain;
      if (type == "RangeSubselect") {
        return has_alias ? renamedBody(inner, alias, "colnames", p, depth)
                         : value(inner, p, how, depth);
      }
      return renamedBody(inner, body, "aliascolnames", p, depth);
    }
    if (type == "RangeFunction" || type == "RangeTableFunc") {
      object alias;
      if (getObject(body, "alias", alias)) relationName(body);
      return fields(body, expression(pos == Pos::kPlain ? Pos::kReveal : pos), "a FROM function",
                    depth);
    }
    if (type == "JoinExpr") {
      if (!field(body, "larg", pos, how, depth) || !field(body, "rarg", pos, how, depth)) {
        return false;
      }
      return field(body, "quals", Pos::kHidden, "", depth);
    }
    if (type == "SubLink") {
      // A scalar or ARRAY subquery in a target shows its values; in a condition it only filters.
      return fields(body, pos == Pos::kHidden ? pos : Pos::kReveal, "a subquery", depth);
    }
    if (type == "InsertStmt" || type == "UpdateStmt" || type == "DeleteStmt" ||
        type == "MergeStmt") {
      // What a write stores can be read back later: its values count as shown.
      for (auto f : body) {
        const bool shows = f.key == "returningList" || f.key == "selectStmt" ||
                           f.key == "targetList" || f.key == "mergeWhenClauses";
        const std::string_view what = f.key == "returningList" ? "RETURNING" : "a write's values";
        if (!value(f.value, shows ? Pos::kReveal : Pos::kHidden, what, depth)) return false;
      }
      return true;
    }
    if (type == "ExplainStmt") return fields(body, Pos::kHidden, "", depth);
    return fields(body, expression(pos), how.empty() ? "an expression" : how, depth);
  }

  ColumnExposure& out_;
  bool collecting_ = false;
  bool collected_star_ = false;
  std::vector<std::string> collected_;
};

}  // namespace

ColumnExposure columnExposure(std::string_view sql) {
  ColumnExposure out;
  const std::string text(sql);
  PgQueryParseResult parsed = pg_query_parse(text.c_str());
  if (parsed.error) {
    out.error = parsed.error->message ? parsed.error->message : "syntax error";
    pg_query_free_parse_result(parsed);
    return out;
  }
  simdjson::padded_string json(parsed.parse_tree, std::strlen(parsed.parse_tree));
  pg_query_free_parse_result(parsed);
  simdjson::dom::parser parser;
  element root;
  if (parser.allocate(json.size(), kMaxDepth * 2 + 16) != simdjson::SUCCESS ||
      parser.parse(json).get(root) != simdjson::SUCCESS) {
    out.error = "the statement nests too deeply to check its masked columns";
    return out;
  }
  object top;
  array stmts;
  if (root.get_object().get(top) != simdjson::SUCCESS || !getArray(top, "stmts", stmts)) {
    out.ok = true;  // an empty text
    return out;
  }
  ExposureWalker walker(out);
  for (element raw : stmts) {
    object r;
    element stmt;
    if (raw.get_object().get(r) != simdjson::SUCCESS || !get(r, "stmt", stmt)) continue;
    if (!walker.value(stmt, Pos::kPlain, "", 0)) {
      out.error = "the statement nests too deeply to check its masked columns";
      return out;
    }
  }
  out.ok = true;
  return out;
}

std::vector<std::string> taintedNames(const ColumnExposure& e, std::vector<std::string> masked) {
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& a : e.aliases) {
      if (std::find(masked.begin(), masked.end(), a.name) != masked.end()) continue;
      bool taints = a.any;
      for (const auto& f : a.from) {
        taints = taints || std::find(masked.begin(), masked.end(), f) != masked.end();
      }
      if (taints) {
        masked.push_back(a.name);
        grew = true;
      }
    }
  }
  return masked;
}

}  // namespace pgwarden::analysis
