// analysis: the statement walker (statement_walker.cpp, with query_walker.cpp and predicates.cpp)
// through analyzeUncached: one text into StatementInfo, over every statement kind and flag the
// guards decide on. Each case is a SQL text and a list of expectations in a small notation:
//   kind=select inner=delete intent=lookup cmd=CREATE_TABLE (underscore = space) n=2
//   rel=public.t:pred:w:unb:bounded:triv:reach:noreach   norel=x   nrel=0
//   fn=pg_sleep  nfn=0  limit=none|all|param|other|const:N  limtext=10
//   set=statement_timeout  val=0  setcfg=role  nsetcfg=0  maxp=1  err  errpos=1
//   flags: rows agg pagg lock into mcte ea hold rec unbrec rw cf ctf 2pc  ('!' in front: must be false)
//   s1.kind=delete  (a prefix sN. applies the check to statement N; default statement 0)
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/analysis.h"

namespace pgwarden::guards {
namespace {

struct Case {
  const char* sql;
  const char* expect;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.sql; }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    if (!cur.empty()) out.push_back(cur);
  }
  return out;
}

std::string spaces(std::string s) {
  for (auto& c : s) {
    if (c == '_') c = ' ';
  }
  return s;
}

const analysis::RelationRef* findRel(const analysis::StatementInfo& st,
                                     const std::string& qualified) {
  const size_t dot = qualified.rfind('.');
  const std::string schema = dot == std::string::npos ? "" : qualified.substr(0, dot);
  const std::string name = dot == std::string::npos ? qualified : qualified.substr(dot + 1);
  for (const auto& r : st.relations) {
    if (r.schema == schema && r.name == name) return &r;
  }
  return nullptr;
}

std::string describe(const analysis::Analysis& a) {
  std::ostringstream os;
  os << "ok=" << a.ok << " error='" << a.error << "' statements=" << a.statements.size();
  for (size_t i = 0; i < a.statements.size(); ++i) {
    const auto& s = a.statements[i];
    os << "\n  [" << i << "] kind=" << analysis::kindName(s.kind) << " cmd='" << s.command
       << "' inner=" << analysis::kindName(s.inner_kind)
       << " intent=" << analysis::intentName(s.intent) << " limit=" << int(s.limit) << "/"
       << s.limit_value << " setting='" << s.setting << "'='" << s.setting_value << "'";
    for (const auto& r : s.relations) {
      os << "\n      rel " << r.schema << "." << r.name << " pred=" << r.has_predicate
         << " w=" << r.written << " reach=" << r.reaches_client << " unb=" << r.unbounded_read
         << " triv=" << r.trivial_predicate;
    }
    for (const auto& f : s.functions) os << "\n      fn " << f;
  }
  return os.str();
}

class AnalysisCase : public ::testing::TestWithParam<Case> {};

TEST_P(AnalysisCase, Matches) {
  const Case& c = GetParam();
  const auto a = analysis::analyzeUncached(c.sql);
  SCOPED_TRACE(describe(*a));
  for (std::string check : split(c.expect, ' ')) {
    SCOPED_TRACE(check);
    if (check == "err") {
      EXPECT_FALSE(a->ok);
      EXPECT_FALSE(a->error.empty());
      continue;
    }
    size_t index = 0;
    if (check.size() > 2 && check[0] == 's' && std::isdigit(static_cast<unsigned char>(check[1])) &&
        check[2] == '.') {
      index = static_cast<size_t>(check[1] - '0');
      check = check.substr(3);
    }
    const size_t eq = check.find('=');
    const std::string key = check.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : check.substr(eq + 1);
    if (key == "errpos") {
      EXPECT_FALSE(a->ok);
      EXPECT_EQ(a->error_position, std::stoi(value));
      continue;
    }
    ASSERT_TRUE(a->ok) << a->error;
    if (key == "n") {
      EXPECT_EQ(a->statements.size(), std::stoul(value));
      continue;
    }
    ASSERT_LT(index, a->statements.size());
    const analysis::StatementInfo& st = a->statements[index];
    if (key == "kind") {
      EXPECT_STREQ(analysis::kindName(st.kind), value.c_str());
    } else if (key == "inner") {
      EXPECT_STREQ(analysis::kindName(st.inner_kind), value.c_str());
    } else if (key == "intent") {
      EXPECT_STREQ(analysis::intentName(st.intent), value.c_str());
    } else if (key == "cmd") {
      EXPECT_EQ(st.command, spaces(value));
    } else if (key == "rel") {
      const auto parts = split(value, ':');
      ASSERT_FALSE(parts.empty());
      const analysis::RelationRef* r = findRel(st, parts[0]);
      ASSERT_NE(r, nullptr) << "relation " << parts[0] << " not found";
      for (size_t i = 1; i < parts.size(); ++i) {
        const std::string& f = parts[i];
        if (f == "pred") EXPECT_TRUE(r->has_predicate);
        else if (f == "nopred") EXPECT_FALSE(r->has_predicate);
        else if (f == "w") EXPECT_TRUE(r->written);
        else if (f == "r") EXPECT_FALSE(r->written);
        else if (f == "unb") EXPECT_TRUE(r->unbounded_read);
        else if (f == "bounded") EXPECT_FALSE(r->unbounded_read);
        else if (f == "triv") EXPECT_TRUE(r->trivial_predicate);
        else if (f == "notriv") EXPECT_FALSE(r->trivial_predicate);
        else if (f == "reach") EXPECT_TRUE(r->reaches_client);
        else if (f == "noreach") EXPECT_FALSE(r->reaches_client);
        else ADD_FAILURE() << "unknown relation flag " << f;
      }
    } else if (key == "norel") {
      EXPECT_EQ(findRel(st, value), nullptr);
    } else if (key == "nrel") {
      EXPECT_EQ(st.relations.size(), std::stoul(value));
    } else if (key == "from") {
      EXPECT_EQ(st.from_items, std::stoi(value));
    } else if (key == "fn") {
      EXPECT_NE(std::find(st.functions.begin(), st.functions.end(), value), st.functions.end());
    } else if (key == "nfn") {
      EXPECT_EQ(st.functions.size(), std::stoul(value));
    } else if (key == "limit") {
      if (value == "none")
        EXPECT_EQ(st.limit, analysis::LimitKind::kNone);
      else if (value == "all")
        EXPECT_EQ(st.limit, analysis::LimitKind::kAll);
      else if (value == "param")
        EXPECT_EQ(st.limit, analysis::LimitKind::kParameter);
      else if (value == "other")
        EXPECT_EQ(st.limit, analysis::LimitKind::kOther);
      else if (value.rfind("const:", 0) == 0) {
        EXPECT_EQ(st.limit, analysis::LimitKind::kConstant);
        EXPECT_EQ(st.limit_value, std::stoll(value.substr(6)));
      } else {
        ADD_FAILURE() << "unknown limit " << value;
      }
    } else if (key == "limtext") {
      ASSERT_GE(st.limit_location, 0);
      EXPECT_EQ(std::string(c.sql).substr(st.limit_location, st.limit_length), value);
    } else if (key == "set") {
      EXPECT_EQ(st.setting, value);
    } else if (key == "val") {
      EXPECT_EQ(st.setting_value, spaces(value));
    } else if (key == "setcfg") {
      EXPECT_NE(std::find(st.set_config_names.begin(), st.set_config_names.end(), value),
                st.set_config_names.end());
    } else if (key == "nsetcfg") {
      EXPECT_EQ(st.set_config_names.size(), std::stoul(value));
    } else if (key == "maxp") {
      EXPECT_EQ(st.max_param, std::stoi(value));
    } else if (key == "loc") {
      EXPECT_EQ(st.location, std::stoi(value));
    } else if (key == "len") {
      EXPECT_EQ(st.length, std::stoi(value));
    } else {
      const bool want = key[0] != '!';
      const std::string flag = want ? key : key.substr(1);
      bool got = false;
      if (flag == "rows") got = st.returns_rows;
      else if (flag == "agg") got = st.has_aggregate;
      else if (flag == "pagg") got = st.plain_aggregate;
      else if (flag == "lock") got = st.locking_clause;
      else if (flag == "into") got = st.select_into;
      else if (flag == "mcte") got = st.modifying_cte;
      else if (flag == "ea") got = st.explain_analyze;
      else if (flag == "hold") got = st.with_hold;
      else if (flag == "rec") got = st.recursive_cte;
      else if (flag == "unbrec") got = st.unbounded_recursion;
      else if (flag == "rw") got = st.read_write_requested;
      else if (flag == "cf") got = st.copy_from;
      else if (flag == "ctf") got = st.copy_to_file;
      else if (flag == "2pc") got = st.two_phase;
      else {
        ADD_FAILURE() << "unknown check " << check;
        continue;
      }
      EXPECT_EQ(got, want) << flag;
    }
  }
}

// ---- SELECT, relations and predicates ----
const Case kSelect[] = {
    {"SELECT 1", "kind=select cmd=SELECT rows nrel=0 limit=none intent=lookup !agg"},
    {"SELECT * FROM t", "kind=select rel=t:nopred:unb:reach:notriv nrel=1"},
    {"SELECT * FROM public.t WHERE id = 1", "rel=public.t:pred:bounded"},
    {"select * from T", "rel=t"},
    {"select * from \"T\"", "rel=T norel=t"},
    {"select * from \"Public\".\"Orders\"", "rel=Public.Orders"},
    {"SELECT * FROM db.s.t", "rel=s.t"},
    {"SELECT * FROM ONLY t", "rel=t:unb"},
    {"SELECT t.* FROM s.t WHERE s.t.id = 1", "rel=s.t:pred"},
    {"SELECT * FROM t WHERE t.a = 1", "rel=t:pred"},
    {"SELECT * FROM t x WHERE y.a = 1", "rel=t:unb"},
    {"SELECT * FROM t WHERE a = ANY(ARRAY[1, 2])", "rel=t:pred"},
    {"SELECT x FROM t WHERE x BETWEEN 1 AND 10", "rel=t:pred"},
    {"SELECT * FROM t WHERE a = 1 OR b = 2", "rel=t:pred"},
    {"SELECT * FROM t WHERE (a = 1 OR true) AND b = 2", "rel=t:pred"},
    {"SELECT * FROM t WHERE NOT (a = 1)", "rel=t:pred"},
    {"SELECT * FROM t WHERE x <> x", "rel=t:pred"},
    {"SELECT * FROM t WHERE x LIKE 'a%'", "rel=t:pred"},
    {"SELECT * FROM t WHERE id = $1", "rel=t:pred maxp=1"},
    {"SELECT * FROM t WHERE id = $1 AND b = $3", "rel=t:pred maxp=3"},
    {"VALUES (1), (2)", "kind=select cmd=VALUES rows nrel=0"},
    {"TABLE t", "kind=select rel=t:unb rows"},
    {"SELECT * FROM generate_series(1, 10) g", "nrel=0 fn=generate_series"},
};
INSTANTIATE_TEST_SUITE_P(Select, AnalysisCase, ::testing::ValuesIn(kSelect));

// ---- trivial predicates: they do not count as a filter ----
const Case kTrivial[] = {
    {"SELECT * FROM t WHERE 1=1", "rel=t:nopred:unb:triv"},
    {"SELECT * FROM t WHERE true", "rel=t:nopred:unb:triv"},
    {"SELECT * FROM t WHERE 'a'='a'", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x = x", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE t.id = t.id", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE NOT false", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x = 1 OR true", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x = 1 OR 1=1", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE 2 > 1", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE now() > '2000-01-01'", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE random() < 0.5", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE 1=1 AND true", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x = 1 AND 1=1", "rel=t:pred:bounded:notriv"},
    {"SELECT * FROM t WHERE x IS NULL OR x IS NOT NULL", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x LIKE '%'", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x ILIKE '%%'", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x ~ '.*'", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE $1::bool", "rel=t:unb:triv maxp=1"},
    {"SELECT * FROM t WHERE (a, b) = (a, b)", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE coalesce(x, 0) = coalesce(x, 0)", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x IS NOT DISTINCT FROM x", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE x >= x", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE NOT (a = 1 OR true)", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE CASE WHEN true THEN true END", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE EXISTS (SELECT 1)", "rel=t:unb:triv"},
    {"SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.a = 1)", "rel=t:unb:triv rel=u:pred:noreach"},
    {"SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)", "rel=t:pred:bounded"},
    {"SELECT * FROM t WHERE id IN (SELECT id FROM u)", "rel=t:pred rel=u:bounded:noreach"},
    {"SELECT * FROM t WHERE x = (SELECT max(x) FROM t)", "rel=t:bounded"},
};
INSTANTIATE_TEST_SUITE_P(Trivial, AnalysisCase, ::testing::ValuesIn(kTrivial));

// ---- joins: an outer join's ON does not filter its preserved side ----
const Case kJoins[] = {
    {"SELECT * FROM a JOIN b ON a.id = b.aid", "rel=a:pred rel=b:pred"},
    {"SELECT * FROM a JOIN b ON true", "rel=a:unb rel=b:unb"},
    {"SELECT * FROM a LEFT JOIN b ON a.id = b.aid", "rel=a:unb rel=b:pred"},
    {"SELECT * FROM a RIGHT JOIN b ON a.id = b.aid", "rel=a:pred rel=b:unb"},
    {"SELECT * FROM a FULL JOIN b ON a.id = b.aid", "rel=a:unb rel=b:unb"},
    {"SELECT * FROM a JOIN b USING (id)", "rel=a:pred rel=b:pred"},
    {"SELECT * FROM a NATURAL JOIN b", "rel=a:pred rel=b:pred"},
    {"SELECT * FROM a, b WHERE a.id = b.id", "rel=a:pred rel=b:pred"},
    {"SELECT * FROM a, b WHERE b.x = 1", "rel=a:unb rel=b:pred"},
    {"SELECT * FROM a CROSS JOIN b", "rel=a:unb rel=b:unb"},
    {"SELECT * FROM a JOIN b ON a.id = b.id JOIN c ON c.id = b.cid", "rel=a:pred rel=b:pred rel=c:pred"},
    {"SELECT * FROM a x JOIN b y ON x.id = y.id", "rel=a:pred rel=b:pred"},
    {"SELECT * FROM t, LATERAL (SELECT * FROM u WHERE u.tid = t.id) s", "rel=t:unb rel=u:pred"},
    {"SELECT * FROM (SELECT * FROM big) s WHERE s.x > 1", "rel=big:pred:bounded"},
    {"SELECT * FROM (SELECT * FROM big) s", "rel=big:unb"},
    {"SELECT * FROM (SELECT * FROM big WHERE y = 2) s", "rel=big:pred"},
    {"SELECT (SELECT max(x) FROM big) AS m", "rel=big:bounded:reach"},
    {"SELECT (SELECT array_agg(x) FROM big) AS m", "rel=big:unb:reach"},
    {"SELECT * FROM t WHERE id = (SELECT max(x) FROM big)", "rel=big:bounded"},
    {"SELECT ARRAY(SELECT x FROM big)", "rel=big:unb:reach"},
    {"SELECT * FROM big TABLESAMPLE SYSTEM (1)", "rel=big:pred"},
    {"SELECT * FROM big TABLESAMPLE SYSTEM (100)", "rel=big:unb"},
};
INSTANTIATE_TEST_SUITE_P(Joins, AnalysisCase, ::testing::ValuesIn(kJoins));

// ---- FROM items: what the cost gate's `plan: joins` counts (every level, self-joins twice) ----
const Case kFromItems[] = {
    {"SELECT 1", "from=0"},
    {"SELECT count(*) FROM t", "from=1 nrel=1"},
    {"SELECT * FROM big TABLESAMPLE SYSTEM (1)", "from=1"},
    {"SELECT count(*) FROM t a, t b", "from=2 nrel=1"},
    {"SELECT count(*) FROM t a CROSS JOIN t b JOIN u ON u.id = a.id", "from=3"},
    {"SELECT * FROM t WHERE id IN (SELECT id FROM u)", "from=2"},
    {"SELECT * FROM t WHERE id = (SELECT max(id) FROM t)", "from=2 nrel=1"},
    {"WITH s AS (SELECT * FROM t) SELECT count(*) FROM s a, s b", "from=3 nrel=1"},
    {"SELECT count(*) FROM t, generate_series(1, 10) g", "from=2"},
    {"SELECT count(*) FROM (SELECT * FROM t) x", "from=2"},
    {"SELECT * FROM t JOIN (VALUES (1)) v(id) ON v.id = t.id", "from=2"},
};
INSTANTIATE_TEST_SUITE_P(FromItems, AnalysisCase, ::testing::ValuesIn(kFromItems));

// ---- CTEs: names told apart from tables, scoped as PostgreSQL scopes them ----
const Case kCtes[] = {
    {"WITH x AS (SELECT * FROM big) SELECT * FROM x", "rel=big:unb norel=x nrel=1"},
    {"WITH x AS (SELECT * FROM big) SELECT * FROM x WHERE x.a = 1", "rel=big:pred:bounded"},
    {"WITH x AS (SELECT * FROM big) SELECT count(*) FROM x", "rel=big:bounded agg intent=aggregation"},
    {"WITH x AS (SELECT * FROM big) SELECT 1", "rel=big:bounded"},
    {"WITH x AS (SELECT * FROM big), y AS (SELECT * FROM x WHERE x.a = 1) SELECT * FROM y",
     "rel=big:pred:bounded norel=x norel=y"},
    {"WITH x AS (SELECT * FROM big) SELECT * FROM x WHERE x.a = 1 UNION ALL SELECT * FROM x",
     "rel=big:unb"},
    {"WITH pg_authid AS (SELECT 1) SELECT * FROM pg_authid", "nrel=0"},
    {"WITH a AS (SELECT * FROM pg_authid), pg_authid AS (SELECT 1) SELECT * FROM a", "rel=pg_authid:unb"},
    {"WITH x AS (SELECT 1) SELECT * FROM public.x", "rel=public.x"},
    {"WITH x AS (SELECT 1) SELECT * FROM (WITH y AS (SELECT 2) SELECT * FROM y) s, x", "nrel=0"},
    {"SELECT * FROM (WITH x AS (SELECT 1) SELECT * FROM x) s, x", "rel=x nrel=1"},
    {"WITH x AS MATERIALIZED (SELECT * FROM big WHERE a = 1) SELECT * FROM x", "rel=big:pred"},
    {"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) SELECT * FROM r",
     "rec !unbrec nrel=0"},
    {"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r", "rec unbrec"},
    {"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE true) SELECT count(*) FROM r",
     "rec unbrec"},
    {"WITH RECURSIVE t(id) AS (SELECT id FROM nodes WHERE id = 1 UNION SELECT e.dst FROM edges e "
     "JOIN t ON e.src = t.id) SELECT * FROM t",
     "rec !unbrec rel=nodes rel=edges norel=t"},
    {"WITH RECURSIVE r AS (SELECT 1 AS n) SELECT * FROM r", "rec !unbrec nrel=0"},
    {"WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", "mcte rel=t:w intent=write"},
    {"WITH x AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM x", "mcte rel=t:w"},
    {"WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT 1", "mcte rel=t:w"},
    {"SELECT * FROM (WITH x AS (DELETE FROM t RETURNING 1) SELECT * FROM x) s", "mcte rel=t:w"},
    {"WITH w AS (SELECT * FROM t WHERE a = 1) DELETE FROM u WHERE u.id IN (SELECT id FROM w)",
     "kind=delete rel=u:w:pred rel=t norel=w"},
};
INSTANTIATE_TEST_SUITE_P(Ctes, AnalysisCase, ::testing::ValuesIn(kCtes));

// ---- set operations and aggregates ----
const Case kSetOpsAggregates[] = {
    {"SELECT a FROM t UNION SELECT b FROM u", "rel=t:unb rel=u:unb rows"},
    {"SELECT a FROM t UNION ALL SELECT b FROM u WHERE u.b = 1", "rel=t:unb rel=u:pred"},
    {"SELECT a FROM t INTERSECT SELECT a FROM u", "rel=t rel=u"},
    {"SELECT a FROM t EXCEPT SELECT a FROM u ORDER BY 1 LIMIT 5", "limit=const:5"},
    {"(SELECT a FROM t LIMIT 5) UNION (SELECT b FROM u)", "limit=none"},
    {"SELECT count(*) FROM t UNION ALL SELECT count(*) FROM u",
     "agg !pagg rel=t:bounded rel=u:bounded"},
    {"SELECT count(*) FROM big", "agg pagg rel=big:bounded:nopred intent=aggregation"},
    {"SELECT coalesce(sum(x), 0) FROM big WHERE y = 1", "agg pagg"},
    {"SELECT max(x) FROM big HAVING count(*) > 1", "agg pagg"},
    {"SELECT x FROM big WHERE id = 7", "!agg !pagg"},
    {"SELECT sum(x) OVER () FROM big WHERE id = 7", "!pagg"},
    {"SELECT x FROM big WHERE x > (SELECT avg(x) FROM big)", "!pagg"},
    {"SELECT status, count(*) FROM big GROUP BY status", "agg !pagg rel=big:bounded"},
    {"SELECT count(*) FROM big GROUP BY ()", "agg !pagg"},
    {"SELECT DISTINCT status FROM big", "agg !pagg rel=big:bounded"},
    {"SELECT DISTINCT count(*) FROM big", "agg !pagg"},
    {"SELECT array_agg(x) FROM big", "!agg pagg rel=big:unb"},
    {"SELECT string_agg(x, ',') FROM big", "!agg rel=big:unb"},
    {"SELECT json_agg(b) FROM big b", "!agg rel=big:unb"},
    {"SELECT count(*), array_agg(x) FROM big", "!agg rel=big:unb"},
    {"SELECT count(*) OVER (), * FROM big", "!agg rel=big:unb"},
    {"SELECT sum(x) FILTER (WHERE y > 1) FROM big", "agg rel=big:bounded"},
    {"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM big", "agg rel=big:bounded"},
    {"SELECT count(*) FROM (SELECT * FROM big) s", "agg rel=big:bounded"},
    {"SELECT lower(max(x)) FROM big", "agg rel=big:bounded"},
    {"SELECT count(DISTINCT x) FROM big", "agg"},
};
INSTANTIATE_TEST_SUITE_P(SetOpsAggregates, AnalysisCase, ::testing::ValuesIn(kSetOpsAggregates));

// ---- the outermost LIMIT ----
const Case kLimits[] = {
    {"SELECT * FROM t LIMIT 10", "limit=const:10 limtext=10"},
    {"SELECT * FROM t LIMIT ALL", "limit=all limtext=ALL"},
    {"SELECT * FROM t LIMIT NULL", "limit=all limtext=NULL"},
    {"SELECT * FROM t LIMIT $1", "limit=param maxp=1"},
    {"SELECT * FROM t LIMIT 10 + 5", "limit=other"},
    {"SELECT * FROM t LIMIT (SELECT 5)", "limit=other"},
    {"SELECT * FROM t LIMIT '5'", "limit=other"},
    {"SELECT * FROM t FETCH FIRST 5 ROWS ONLY", "limit=const:5 limtext=5"},
    {"SELECT * FROM t FETCH FIRST ROW ONLY", "limit=const:1"},
    {"SELECT * FROM t ORDER BY a FETCH NEXT 7 ROWS WITH TIES", "limit=const:7 limtext=7"},
    {"SELECT * FROM t OFFSET 5", "limit=none"},
    {"SELECT * FROM t LIMIT 1e3", "limit=const:1000 limtext=1e3"},
    {"SELECT * FROM t LIMIT 5 OFFSET 10", "limit=const:5 limtext=5"},
    {"SELECT * FROM t OFFSET 10 LIMIT 50000", "limit=const:50000 limtext=50000"},
    {"SELECT * FROM (SELECT * FROM t LIMIT 5) s", "limit=none"},
    {"SELECT * FROM t LIMIT 99999999999999999999999", "limit=const:9223372036854775807"},
};
INSTANTIATE_TEST_SUITE_P(Limits, AnalysisCase, ::testing::ValuesIn(kLimits));

// ---- locking, SELECT INTO ----
const Case kLockingInto[] = {
    {"SELECT * FROM t FOR UPDATE", "lock kind=select"},
    {"SELECT * FROM t FOR SHARE", "lock"},
    {"SELECT * FROM t FOR NO KEY UPDATE SKIP LOCKED", "lock"},
    {"SELECT * FROM t FOR KEY SHARE NOWAIT", "lock"},
    {"SELECT * FROM t LIMIT 10 FOR UPDATE", "lock limit=const:10"},
    {"SELECT * FROM (SELECT * FROM t FOR UPDATE) s", "lock"},
    {"SELECT * FROM t WHERE id IN (SELECT id FROM u FOR UPDATE)", "lock"},
    {"SELECT a FROM t UNION SELECT a FROM u FOR UPDATE", "lock"},
    {"SELECT * FROM t", "!lock !into"},
    {"SELECT * INTO newt FROM t", "into kind=select cmd=SELECT_INTO rel=newt:w rel=t !rows intent=write"},
    {"SELECT * INTO TEMP newt FROM t", "into rel=newt:w"},
    {"SELECT 1 INTO UNLOGGED x", "into rel=x:w"},
};
INSTANTIATE_TEST_SUITE_P(LockingInto, AnalysisCase, ::testing::ValuesIn(kLockingInto));

// ---- writes ----
const Case kWrites[] = {
    {"INSERT INTO t VALUES (1)", "kind=insert cmd=INSERT rel=t:w intent=write !rows"},
    {"INSERT INTO s.t SELECT * FROM u", "kind=insert rel=s.t:w rel=u:noreach"},
    {"UPDATE t SET a = 1 WHERE id = 2", "kind=update rel=t:w:pred"},
    {"UPDATE t SET a = 1", "kind=update rel=t:w:nopred"},
    {"DELETE FROM t WHERE id = 1", "kind=delete cmd=DELETE rel=t:w:pred"},
    {"DELETE FROM t", "kind=delete rel=t:w:nopred"},
    {"DELETE FROM t USING u WHERE t.id = u.id", "kind=delete rel=t:w rel=u"},
    {"INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET a = excluded.a", "kind=insert rel=t:w"},
    {"MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "kind=merge cmd=MERGE rel=t:w rel=s intent=write"},
    {"MERGE INTO t USING (SELECT * FROM s) src ON t.id = src.id WHEN NOT MATCHED THEN INSERT VALUES (src.id)",
     "kind=merge rel=t:w rel=s"},
    {"TRUNCATE t", "kind=delete cmd=TRUNCATE rel=t:w intent=write"},
    {"TRUNCATE a, b CASCADE", "rel=a:w rel=b:w"},
    {"INSERT INTO t SELECT nextval('s')", "fn=nextval"},
    {"UPDATE t SET a = (SELECT max(b) FROM u)", "rel=u rel=t:w"},
    {"DELETE FROM t WHERE 1=1", "rel=t:w:nopred"},
};
INSTANTIATE_TEST_SUITE_P(Writes, AnalysisCase, ::testing::ValuesIn(kWrites));

// ---- DDL ----
const Case kDdl[] = {
    {"CREATE TABLE x (a int)", "kind=ddl cmd=CREATE_TABLE rel=x:w intent=ddl"},
    {"CREATE TEMP TABLE x (a int)", "kind=ddl cmd=CREATE_TABLE rel=x:w"},
    {"CREATE TEMPORARY TABLE x AS SELECT * FROM t", "kind=ddl cmd=CREATE_TABLE_AS inner=select rel=x:w rel=t:noreach"},
    {"CREATE MATERIALIZED VIEW m AS SELECT 1", "kind=ddl cmd=CREATE_MATERIALIZED_VIEW"},
    {"CREATE VIEW v AS SELECT * FROM t", "kind=ddl cmd=CREATE_VIEW rel=v:w rel=t"},
    {"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$", "kind=ddl cmd=CREATE_FUNCTION"},
    {"CREATE OR REPLACE FUNCTION f() RETURNS void AS $body$ BEGIN DELETE FROM t; END $body$ LANGUAGE plpgsql",
     "kind=ddl cmd=CREATE_FUNCTION n=1"},
    {"DROP TABLE t", "kind=ddl cmd=DROP"},
    {"ALTER TABLE t ADD COLUMN b int", "kind=ddl cmd=ALTER_TABLE"},
    {"CREATE INDEX ON t (a)", "kind=ddl cmd=CREATE_INDEX"},
    {"COMMENT ON TABLE t IS 'x'", "kind=ddl cmd=COMMENT"},
    {"GRANT SELECT ON t TO bob", "kind=ddl cmd=GRANT"},
    {"CREATE EXTENSION dblink", "kind=ddl cmd=CREATE_EXTENSION"},
    {"CREATE SERVER s FOREIGN DATA WRAPPER postgres_fdw", "kind=ddl cmd=CREATE_SERVER"},
    {"CREATE USER MAPPING FOR CURRENT_USER SERVER s OPTIONS (user 'x')", "kind=ddl cmd=CREATE_USER_MAPPING"},
    {"IMPORT FOREIGN SCHEMA public FROM SERVER s INTO x", "kind=ddl cmd=IMPORT_FOREIGN_SCHEMA"},
    {"CREATE ROLE r", "kind=ddl cmd=CREATE_ROLE"},
    {"CREATE SCHEMA s", "kind=ddl cmd=CREATE_SCHEMA"},
    {"CREATE SEQUENCE s", "kind=ddl cmd=CREATE_SEQUENCE"},
    {"ALTER ROLE r SET statement_timeout = 0", "kind=ddl"},
};
INSTANTIATE_TEST_SUITE_P(Ddl, AnalysisCase, ::testing::ValuesIn(kDdl));

// ---- transaction control ----
const Case kTransactions[] = {
    {"BEGIN", "kind=transaction cmd=BEGIN !rw intent=other"},
    {"BEGIN READ WRITE", "kind=transaction rw"},
    {"BEGIN READ ONLY", "kind=transaction !rw"},
    {"BEGIN ISOLATION LEVEL SERIALIZABLE, READ WRITE", "rw"},
    {"BEGIN TRANSACTION ISOLATION LEVEL SERIALIZABLE", "!rw"},
    {"START TRANSACTION READ WRITE", "cmd=START_TRANSACTION rw"},
    {"SET TRANSACTION READ WRITE", "kind=transaction cmd=SET_TRANSACTION rw"},
    {"SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "kind=transaction !rw"},
    {"SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "kind=set cmd=SET_SESSION_CHARACTERISTICS rw"},
    {"SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "kind=set !rw"},
    {"COMMIT", "kind=transaction cmd=COMMIT"},
    {"ROLLBACK", "kind=transaction cmd=ROLLBACK"},
    {"SAVEPOINT a", "cmd=SAVEPOINT"},
    {"RELEASE a", "cmd=RELEASE"},
    {"ROLLBACK TO SAVEPOINT a", "cmd=ROLLBACK_TO_SAVEPOINT"},
    {"COMMIT AND CHAIN", "kind=transaction !2pc"},
    {"PREPARE TRANSACTION 'x'", "kind=transaction 2pc"},
    {"COMMIT PREPARED 'x'", "2pc"},
    {"ROLLBACK PREPARED 'x'", "2pc"},
};
INSTANTIATE_TEST_SUITE_P(Transactions, AnalysisCase, ::testing::ValuesIn(kTransactions));

// ---- SET / RESET / SHOW and set_config ----
const Case kSettings[] = {
    {"SET statement_timeout = 0", "kind=set cmd=SET set=statement_timeout val=0 intent=admin"},
    {"SET LOCAL statement_timeout TO '5s'", "set=statement_timeout val=5s"},
    {"SET Statement_Timeout = 0", "set=statement_timeout"},
    {"SET \"statement_timeout\" = 0", "set=statement_timeout"},
    {"SET search_path TO evil, public", "set=search_path val=evil,_public"},
    {"SET SCHEMA 'evil'", "set=search_path"},
    {"SET ROLE admin", "set=role val=admin"},
    {"SET SESSION AUTHORIZATION admin", "set=session_authorization"},
    {"SET default_transaction_read_only = off", "set=default_transaction_read_only val=off"},
    {"SET transaction_read_only TO off", "set=transaction_read_only"},
    {"SET TIME ZONE 'UTC'", "set=timezone"},
    {"SET work_mem TO DEFAULT", "set=work_mem val=default"},
    {"RESET statement_timeout", "kind=reset set=statement_timeout"},
    {"RESET ALL", "kind=reset set=all"},
    {"RESET ROLE", "kind=reset set=role"},
    {"RESET SESSION AUTHORIZATION", "kind=reset set=session_authorization"},
    {"SHOW search_path", "kind=show set=search_path"},
    {"SHOW ALL", "kind=show set=all"},
    {"SELECT set_config('statement_timeout', '0', false)", "setcfg=statement_timeout nsetcfg=1"},
    {"SELECT pg_catalog.set_config('Role', 'x', true)", "setcfg=role"},
    {"SELECT set_config(name, '0', false) FROM t", "setcfg=*"},
    {"SELECT set_config(lower('ROLE'), 'x', false)", "setcfg=*"},
    {"SELECT * FROM (SELECT set_config('lock_timeout', '0', false)) s", "setcfg=lock_timeout"},
    {"SELECT current_setting('statement_timeout')", "nsetcfg=0 fn=current_setting"},
    {"SELECT myschema.set_config('statement_timeout', '0', false)", "nsetcfg=0"},
};
INSTANTIATE_TEST_SUITE_P(Settings, AnalysisCase, ::testing::ValuesIn(kSettings));

// ---- EXPLAIN, PREPARE / EXECUTE, cursors ----
const Case kWrappers[] = {
    {"EXPLAIN SELECT * FROM t", "kind=explain cmd=EXPLAIN inner=select !ea rel=t:noreach !rows"},
    {"EXPLAIN ANALYZE SELECT 1", "kind=explain cmd=EXPLAIN_ANALYZE ea inner=select"},
    {"EXPLAIN ANALYZE DELETE FROM t", "ea inner=delete intent=write rel=t:w"},
    {"EXPLAIN (ANALYZE, BUFFERS) UPDATE t SET a = 1", "ea inner=update"},
    {"EXPLAIN (ANALYZE false) DELETE FROM t", "!ea inner=delete"},
    {"EXPLAIN (ANALYZE off) SELECT 1", "!ea"},
    {"EXPLAIN (ANALYZE on) INSERT INTO t VALUES (1)", "ea inner=insert"},
    {"EXPLAIN (ANALYZE 1) INSERT INTO t VALUES (1)", "ea inner=insert"},
    {"EXPLAIN DELETE FROM t", "!ea inner=delete intent=other"},
    {"EXPLAIN ANALYZE CREATE TABLE x AS SELECT 1", "ea inner=ddl"},
    {"EXPLAIN ANALYZE EXECUTE p", "ea inner=execute"},
    {"EXPLAIN ANALYZE WITH x AS (DELETE FROM t RETURNING 1) SELECT * FROM x", "ea inner=select mcte"},
    {"PREPARE p AS SELECT * FROM t WHERE id = $1", "kind=prepare inner=select maxp=1 rel=t:pred"},
    {"PREPARE p (int) AS DELETE FROM t WHERE id = $1", "kind=prepare inner=delete intent=write"},
    {"PREPARE p AS INSERT INTO t VALUES (1)", "inner=insert"},
    {"PREPARE p AS SELECT * FROM big", "rel=big:unb limit=none"},
    {"PREPARE p AS SELECT * FROM big LIMIT 5", "limit=const:5"},
    {"EXECUTE p(1)", "kind=execute cmd=EXECUTE rows"},
    {"DEALLOCATE p", "kind=deallocate"},
    {"DEALLOCATE ALL", "kind=deallocate"},
    {"DECLARE c CURSOR FOR SELECT * FROM t", "kind=declare_cursor !hold inner=select rel=t:unb"},
    {"DECLARE c CURSOR WITH HOLD FOR SELECT 1", "kind=declare_cursor hold"},
    {"DECLARE c SCROLL CURSOR WITHOUT HOLD FOR SELECT 1", "!hold"},
    {"DECLARE c BINARY CURSOR WITH HOLD FOR SELECT 1", "hold"},
    {"FETCH 10 FROM c", "kind=fetch cmd=FETCH rows"},
    {"FETCH ALL IN c", "kind=fetch"},
    {"MOVE NEXT IN c", "kind=fetch cmd=MOVE"},
    {"CLOSE c", "kind=close cmd=CLOSE"},
};
INSTANTIATE_TEST_SUITE_P(Wrappers, AnalysisCase, ::testing::ValuesIn(kWrappers));

// ---- COPY ----
const Case kCopy[] = {
    {"COPY t TO STDOUT", "kind=copy cmd=COPY rows !cf !ctf rel=t:unb"},
    {"COPY t FROM STDIN", "kind=copy cf !rows rel=t:w intent=write"},
    {"COPY t TO '/tmp/x'", "ctf !cf !rows intent=admin"},
    {"COPY t FROM '/etc/passwd'", "cf"},
    {"COPY (SELECT * FROM t WHERE a = 1) TO STDOUT", "inner=select rel=t:pred rows"},
    {"COPY (SELECT 1) TO PROGRAM 'id'", "ctf"},
    {"COPY t FROM PROGRAM 'id'", "cf"},
    {"COPY (DELETE FROM t RETURNING *) TO STDOUT", "inner=delete"},
    {"COPY t (a, b) TO STDOUT WITH (FORMAT csv)", "rows rel=t"},
    {"COPY (SELECT * FROM t LIMIT 5) TO STDOUT", "limit=const:5"},
};
INSTANTIATE_TEST_SUITE_P(Copy, AnalysisCase, ::testing::ValuesIn(kCopy));

// ---- procedural, notifications, maintenance, server administration ----
const Case kAdmin[] = {
    {"CALL p(1)", "kind=call cmd=CALL fn=p intent=admin"},
    {"CALL s.p(pg_sleep(5))", "kind=call fn=s.p fn=pg_sleep"},
    {"DO $$ BEGIN PERFORM 1; END $$", "kind=do cmd=DO"},
    {"DO LANGUAGE plpgsql $x$ BEGIN DELETE FROM t; END $x$", "kind=do n=1"},
    {"LISTEN ch", "kind=listen intent=admin"},
    {"NOTIFY ch, 'x'", "kind=notify"},
    {"UNLISTEN *", "kind=unlisten"},
    {"SELECT pg_notify('ch', 'x')", "kind=select fn=pg_notify"},
    {"VACUUM t", "kind=maintenance cmd=VACUUM rel=t"},
    {"VACUUM (FULL, ANALYZE) t", "kind=maintenance cmd=VACUUM"},
    {"ANALYZE t", "kind=maintenance cmd=ANALYZE"},
    {"CLUSTER t", "kind=maintenance cmd=CLUSTER"},
    {"REINDEX TABLE t", "kind=maintenance cmd=REINDEX"},
    {"CHECKPOINT", "kind=maintenance cmd=CHECKPOINT"},
    {"REFRESH MATERIALIZED VIEW m", "kind=maintenance"},
    {"LOCK TABLE t IN ACCESS EXCLUSIVE MODE", "kind=lock cmd=LOCK_TABLE rel=t"},
    {"LOCK t", "kind=lock"},
    {"ALTER SYSTEM SET work_mem = '1GB'", "kind=alter_system set=work_mem intent=admin"},
    {"ALTER SYSTEM RESET ALL", "kind=alter_system set=all"},
    {"LOAD 'plpgsql'", "kind=load"},
    {"DISCARD ALL", "kind=discard"},
    {"DISCARD PLANS", "kind=discard"},
    {"DISCARD TEMP", "kind=discard"},
};
INSTANTIATE_TEST_SUITE_P(Admin, AnalysisCase, ::testing::ValuesIn(kAdmin));

// ---- functions, quoting, U&, dollar quotes and comments ----
const Case kLexical[] = {
    {"SELECT pg_sleep(1)", "fn=pg_sleep"},
    {"SELECT pg_catalog.pg_sleep(1)", "fn=pg_catalog.pg_sleep"},
    {"SELECT \"pg_sleep\"(1)", "fn=pg_sleep"},
    {"SELECT U&\"pg_sl\\0065ep\"(1)", "fn=pg_sleep"},
    {"SELECT U&\"\\0070g_sleep\"(1)", "fn=pg_sleep"},
    {"SELECT U&\"!0070g_sleep\" UESCAPE '!'(1)", "fn=pg_sleep"},
    {"SELECT \"PG_SLEEP\"(1)", "fn=PG_SLEEP"},
    {"SELECT PG_SLEEP(1)", "fn=pg_sleep"},
    {"SELECT * FROM pg_sleep(1)", "fn=pg_sleep"},
    {"SELECT * FROM ROWS FROM (pg_sleep(1), generate_series(1, 2))", "fn=pg_sleep fn=generate_series"},
    {"SELECT lower(upper('x'))", "fn=lower fn=upper"},
    {"SELECT 'pg_sleep(10); DELETE FROM t'", "n=1 nfn=0 nrel=0"},
    {"SELECT $$DELETE FROM t$$", "n=1 nrel=0"},
    {"SELECT $tag$ DROP TABLE t; $tag$ AS x", "n=1 nrel=0"},
    {"SELECT 1 -- ; DELETE FROM t", "n=1 nrel=0"},
    {"SELECT 1 /* ; DELETE FROM t */", "n=1 nrel=0"},
    {"SELECT 1 /* nested /* ; DELETE FROM t */ still comment */", "n=1 nrel=0"},
    {"/* leading */ SELECT 1", "n=1 kind=select"},
    {"SELECT 'a'';DELETE FROM t;--'", "n=1 nrel=0"},
    {"SELECT E'it\\'s; DELETE FROM t'", "n=1 nrel=0"},
    {"select dblink('host=x', 'select 1')", "fn=dblink"},
    {"SELECT lo_import('/etc/passwd')", "fn=lo_import"},
    {"SELECT query_to_xml('select * from pg_authid', true, true, '')", "fn=query_to_xml nrel=0"},
    {"SELECT * FROM t WHERE id = nextval('s')", "fn=nextval"},
    {"SELECT \"t\".\"a\" FROM \"t\"", "rel=t"},
    {"SELECT * FROM U&\"\\0070g_authid\"", "rel=pg_authid"},
    {"SELECT * FROM pg_catalog . pg_authid", "rel=pg_catalog.pg_authid"},
};
INSTANTIATE_TEST_SUITE_P(Lexical, AnalysisCase, ::testing::ValuesIn(kLexical));

// ---- several statements, locations, syntax errors ----
const Case kTexts[] = {
    {"SELECT 1; SELECT 2", "n=2 s0.loc=0 s0.len=8 s1.loc=9 s1.kind=select"},
    {"SELECT 1; DELETE FROM t", "n=2 s0.kind=select s1.kind=delete s1.rel=t:w"},
    {"COMMIT; DROP TABLE t", "n=2 s0.kind=transaction s1.kind=ddl"},
    {"SELECT 1;", "n=1"},
    {"SELECT 1;;SELECT 2", "n=2"},
    {"", "n=0"},
    {"   ", "n=0"},
    {"-- only a comment", "n=0"},
    {"SELEC 1", "err errpos=1"},
    {"SELECT * FORM t", "err errpos=10"},
    {"SELECT 'unterminated", "err"},
    {"SELECT 1; SELEC 2", "err"},
};
INSTANTIATE_TEST_SUITE_P(Texts, AnalysisCase, ::testing::ValuesIn(kTexts));

// ---- inferred intent ----
const Case kIntent[] = {
    {"SELECT * FROM pg_catalog.pg_class", "intent=catalog"},
    {"SELECT * FROM information_schema.tables", "intent=catalog"},
    {"SELECT relname FROM pg_class WHERE relkind = 'r'", "intent=catalog"},
    {"SELECT version()", "intent=catalog"},
    {"SELECT current_database()", "intent=catalog"},
    {"SELECT * FROM t WHERE id = 5", "intent=lookup"},
    {"SELECT count(*) FROM t", "intent=aggregation"},
    {"SELECT c.relname, t.x FROM pg_class c JOIN t ON true", "intent=lookup"},
    {"DECLARE c CURSOR FOR SELECT count(*) FROM t", "intent=aggregation"},
    {"COPY (SELECT * FROM information_schema.columns) TO STDOUT", "intent=catalog"},
};
INSTANTIATE_TEST_SUITE_P(Intent, AnalysisCase, ::testing::ValuesIn(kIntent));

}  // namespace
}  // namespace pgwarden::guards
