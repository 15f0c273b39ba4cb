// guards against a real PostgreSQL made with initdb on a free port: the catalog query the daemon
// runs, the cost gate on the plans the server really produces, and rewritten reads that the
// server really runs and stops at the cap. Skipped (with a message) where no server binaries exist.
#include <libpq-fe.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/unit/guards/guard_test_util.h"
#include "local_server.h"
#include "require_tool.h"

namespace pgwarden::guards {
namespace {

namespace fs = std::filesystem;

using ::pgwarden::test::freePort;

// A throwaway cluster owned by the `postgres` OS user when running as root (initdb refuses root).
class Cluster {
 public:
  bool start() {
    bin_ = ::pgwarden::test::findPgBin();
    if (bin_.empty()) return false;
    std::string tmpl = (fs::temp_directory_path() / "pgw-guards-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return false;
    dir_ = tmpl;
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("postgres");
      if (!pw) return false;
      if (chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) return false;
      as_ = "runuser -u postgres -- ";
    }
    port_ = freePort();
    const std::string data = (dir_ / "data").string();
    if (!run(bin_ / "initdb", "-D " + data + " -U postgres -A trust -E UTF8 --locale=C --no-sync > " +
                                  (dir_ / "initdb.log").string() + " 2>&1")) {
      return false;
    }
    return run(bin_ / "pg_ctl", "-D " + data + " -l " + (dir_ / "server.log").string() + " -w -o \"-p " +
                                    std::to_string(port_) + " -k " + dir_.string() +
                                    " -c listen_addresses=127.0.0.1 -c fsync=off -c autovacuum=off\" start > /dev/null");
  }
  ~Cluster() {
    if (!dir_.empty()) {
      run(bin_ / "pg_ctl", "-D " + (dir_ / "data").string() + " -m immediate stop > /dev/null 2>&1");
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  std::string conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres";
  }

 private:
  bool run(const fs::path& tool, const std::string& args) {
    return std::system((as_ + tool.string() + " " + args).c_str()) == 0;
  }
  fs::path bin_, dir_;
  std::string as_;
  int port_ = 0;
};

class Connection {
 public:
  explicit Connection(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {}
  ~Connection() { PQfinish(conn_); }
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  // Runs one statement; returns the rows (text) or throws the server's error.
  std::vector<std::vector<std::string>> query(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const auto status = PQresultStatus(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      const std::string err = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error(err);
    }
    std::vector<std::vector<std::string>> rows;
    for (int i = 0; i < PQntuples(r); ++i) {
      std::vector<std::string> row;
      for (int j = 0; j < PQnfields(r); ++j) row.emplace_back(PQgetvalue(r, i, j));
      rows.push_back(std::move(row));
    }
    PQclear(r);
    return rows;
  }

 private:
  PGconn* conn_;
};

class LivePostgres : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    if (!cluster_->start()) return;
    Connection c(cluster_->conninfo());
    if (!c.ok()) return;
    c.query("CREATE TABLE fct_shipments (id bigint PRIMARY KEY, carrier text, status text, ship_date date, "
            "region text, weight numeric)");
    c.query("INSERT INTO fct_shipments SELECT g, (ARRAY['UPS','DHL','FEDEX'])[1 + g % 3], "
            "CASE WHEN g % 20 = 0 AND g > 1000 THEN 'DELAYED' WHEN g % 7 = 0 THEN 'RETURNED' ELSE 'DELIVERED' END, "
            "date '2023-01-01' + (g % 700), (ARRAY['north','south','east','west'])[1 + g % 4], (g % 100) / 3.0 "
            "FROM generate_series(1, 200000) g");
    c.query("CREATE INDEX ON fct_shipments (ship_date)");
    c.query("ANALYZE fct_shipments");
    c.query("CREATE TABLE fresh AS SELECT g AS id, md5(g::text) AS payload FROM generate_series(1, 50000) g");
    c.query("CREATE TABLE t (a int, b int)");
    c.query("CREATE TABLE u (b int)");
    c.query("INSERT INTO t SELECT g, g FROM generate_series(1, 5000) g");
    c.query("INSERT INTO u SELECT g FROM generate_series(1, 5000) g");
    ready_ = true;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!ready_) PGW_MISSING_TOOL("no PostgreSQL server binaries (initdb, pg_ctl) usable here; set PGW_PGBIN");
  }
  static std::shared_ptr<const analysis::TableStatsSnapshot> snapshot() {
    Connection c(cluster_->conninfo());
    return analysis::TableStatsSnapshot::fromRows(
        c.query(analysis::TableStatsSnapshot::catalogQuery()));
  }

  static Cluster* cluster_;
  static bool ready_;
};
Cluster* LivePostgres::cluster_ = nullptr;
bool LivePostgres::ready_ = false;

TEST_F(LivePostgres, CatalogQueryReadsSizesAndIndexColumns) {
  Connection c(cluster_->conninfo());
  c.query("SET default_transaction_read_only = on");
  const auto rows = c.query(analysis::TableStatsSnapshot::catalogQuery());
  const auto stats = analysis::TableStatsSnapshot::fromRows(rows);
  const analysis::TableStats* f = stats->find("public", "fct_shipments");
  ASSERT_NE(f, nullptr);
  EXPECT_GT(f->estimated_rows, 180000);
  EXPECT_LT(f->estimated_rows, 220000);
  ASSERT_EQ(f->indexed_columns.size(), 2u);
  EXPECT_EQ(f->indexed_columns[0], "ship_date");  // the non-unique index first
  EXPECT_EQ(f->indexed_column_types[0], "date");
  EXPECT_EQ(f->indexed_columns[1], "id");
  EXPECT_EQ(f->indexed_column_types[1], "bigint");
  // Never analysed: the size on disk still says it is not small.
  const analysis::TableStats* fresh = stats->find("public", "fresh");
  ASSERT_NE(fresh, nullptr);
  EXPECT_GT(fresh->estimated_rows, 10000);
  EXPECT_TRUE(fresh->indexed_columns.empty());
  EXPECT_EQ(stats->find("pg_catalog", "pg_class"), nullptr);
}

TEST_F(LivePostgres, CostGateOnRealPlans) {
  const auto stats = snapshot();
  const auto groups = test::groupsFromYaml(
      "g:\n  search_path: [public]\n  guards:\n"
      "    - kind: cost_gate\n      seq_scan_rows: 100000\n      max_cost: 1000000\n"
      "    - kind: row_limit\n      max_rows: 1000\n"
      "tight:\n  guards:\n    - kind: cost_gate\n      tables: [public.fct_shipments]\n      max_cost: 1\n");
  Connection c(cluster_->conninfo());
  auto decide = [&](const PolicyGroup& g, const std::string& sql) {
    const Decision pending = test::evaluate(g, sql, stats.get());
    EXPECT_TRUE(pending.explain_sql.has_value()) << sql;
    if (!pending.explain_sql) return pending;
    const auto plan = c.query(*pending.explain_sql);
    EXPECT_EQ(plan.size(), 1u);
    return g.evaluatePlan(pending, plan.at(0).at(0), stats.get());
  };
  const Decision scan = decide(*groups.at("g"), "SELECT * FROM fct_shipments WHERE status = 'DELAYED'");
  ASSERT_TRUE(scan.denied);
  EXPECT_EQ(scan.deny.code, "SEQ_SCAN");
  EXPECT_NE(scan.deny.message.find("ship_date"), std::string::npos) << scan.deny.message;

  const Decision indexed = decide(*groups.at("g"), "SELECT * FROM fct_shipments WHERE ship_date = '2024-01-05'");
  EXPECT_FALSE(indexed.denied) << indexed.deny.message;
  ASSERT_TRUE(indexed.rewritten_sql.has_value());
  EXPECT_LE(c.query(*indexed.rewritten_sql).size(), 1001u);

  const Decision costly = decide(*groups.at("tight"), "SELECT * FROM fct_shipments WHERE ship_date = '2024-01-05'");
  ASSERT_TRUE(costly.denied);
  EXPECT_EQ(costly.deny.code, "COST_TOO_HIGH");
}

// A decision held for a plan, completed with the plan this server gives for its EXPLAIN.
Decision withPlan(const PolicyGroup& group, const Decision& d, Connection& c,
                  const analysis::TableStatsSnapshot* stats) {
  if (!d.explain_sql) return d;
  const auto plan = c.query(*d.explain_sql);
  EXPECT_EQ(plan.size(), 1u);
  return group.evaluatePlan(d, plan.at(0).at(0), stats);
}

TEST_F(LivePostgres, AllowedReadsRunAndCappedOnesStopAtTheCap) {
  const auto stats = snapshot();
  const auto& agents = *test::exampleGroups().at("agents");
  Connection c(cluster_->conninfo());
  c.query("SET default_transaction_read_only = on");  // as every server connection of the daemon
  int planned = 0;
  for (const auto& l : test::loadCorpus("tests/security/allowed_reads.tsv")) {
    SCOPED_TRACE("allowed_reads.tsv:" + std::to_string(l.number) + ": " + l.sql);
    const Decision pending = test::evaluate(agents, l.sql, stats.get());
    planned += pending.explain_sql ? 1 : 0;
    const Decision d = withPlan(agents, pending, c, stats.get());
    ASSERT_FALSE(d.denied) << d.deny.message;
    const std::string run = d.rewritten_sql ? *d.rewritten_sql : l.sql;
    std::vector<std::vector<std::string>> rows;
    EXPECT_NO_THROW(rows = c.query(run)) << run;
    if (d.max_rows >= 0) {
      EXPECT_LE(rows.size(), static_cast<size_t>(d.max_rows + 1));
    }
  }
  EXPECT_GE(planned, 5) << "the example's cost gate plans the joins of big tables";
  c.query("ROLLBACK");
}

// The corpus lines only a plan can deny, denied from this server's plans with their code.
TEST_F(LivePostgres, RunawayJoinsOfTheCorpusAreDeniedFromTheirPlans) {
  const auto stats = snapshot();
  const auto& agents = *test::exampleGroups().at("agents");
  Connection c(cluster_->conninfo());
  int checked = 0;
  for (const auto& l : test::loadCorpus("tests/security/bypass_corpus.tsv")) {
    if (!test::decidedByPlan(l.expect)) continue;
    SCOPED_TRACE("bypass_corpus.tsv:" + std::to_string(l.number) + ": " + l.sql);
    const Decision pending = test::evaluate(agents, l.sql, stats.get());
    ASSERT_TRUE(pending.explain_sql.has_value());
    const Decision d = withPlan(agents, pending, c, stats.get());
    ASSERT_TRUE(d.denied);
    EXPECT_EQ(d.deny.code, l.expect) << d.deny.message;
    EXPECT_EQ(d.deny.sqlstate, "54000");
    if (l.expect == "JOIN_EXPLOSION") {
      EXPECT_EQ(d.deny.message.rfind("The plan joins ", 0), 0u) << d.deny.message;
      EXPECT_NE(d.deny.message.find("a LIMIT does not make the join smaller"), std::string::npos);
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST_F(LivePostgres, TrickyRewritesRunAndTheEngineStops) {
  const auto groups = test::groupsFromYaml("g:\n  guards:\n    - kind: row_limit\n      max_rows: 100\n");
  const auto& g = *groups.at("g");
  Connection c(cluster_->conninfo());
  for (const char* sql : {"SELECT * FROM t", "SELECT * FROM t;", "SELECT * FROM t -- trailing comment",
                          "SELECT * FROM t -- comment\n;", "SELECT * FROM t LIMIT 5000", "SELECT * FROM t LIMIT ALL",
                          "SELECT * FROM t OFFSET 5", "SELECT a FROM t UNION SELECT b FROM u",
                          "SELECT a FROM t UNION ALL SELECT b FROM u ORDER BY 1",
                          "SELECT * FROM t FETCH FIRST 5000 ROWS ONLY", "SELECT * FROM t ORDER BY a DESC /* c */",
                          "WITH x AS (SELECT * FROM t) SELECT * FROM x",
                          "SELECT 'it''s -- not a comment', $$ ; LIMIT 5 $$ FROM t"}) {
    SCOPED_TRACE(sql);
    const Decision d = test::evaluate(g, sql, nullptr);
    ASSERT_FALSE(d.denied);
    ASSERT_TRUE(d.rewritten_sql.has_value());
    std::vector<std::vector<std::string>> rows;
    ASSERT_NO_THROW(rows = c.query(*d.rewritten_sql)) << *d.rewritten_sql;
    EXPECT_EQ(rows.size(), 101u);  // max_rows + 1: the session sees the cut and sends the notice
  }
}

}  // namespace
}  // namespace pgwarden::guards
