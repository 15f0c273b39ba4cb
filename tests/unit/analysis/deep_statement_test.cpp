// analysis: statements PostgreSQL runs with its default max_stack_depth are analysed, however
// deep (nested scalar subqueries, long UNION ALL chains, long operator chains, nested calls),
// and a statement deeper than the server accepts is refused with an honest message, never a crash.
#include <gtest/gtest.h>
#include <pthread.h>

#include <string>

#include "analysis/analysis.h"

namespace pgwarden::guards {
namespace {

std::string nestedSubqueries(int n) {
  std::string sql = "SELECT ";
  for (int i = 0; i < n; ++i) sql += "(SELECT ";
  sql += "1";
  for (int i = 0; i < n; ++i) sql += ")";
  return sql;
}

std::string unionArms(int n) {
  std::string sql = "SELECT 1";
  for (int i = 1; i < n; ++i) sql += " UNION ALL SELECT " + std::to_string(i + 1);
  return sql;
}

std::string plusChain(int n) {
  std::string sql = "SELECT 1";
  for (int i = 1; i < n; ++i) sql += "+1";
  return sql;
}

std::string nestedCoalesce(int n) {
  std::string sql = "SELECT ";
  for (int i = 0; i < n; ++i) sql += "coalesce(";
  sql += "1";
  for (int i = 0; i < n; ++i) sql += ", 2)";
  return sql;
}

void expectAnalysed(const std::string& sql) {
  const auto a = analyzeUncached(sql);
  ASSERT_TRUE(a->ok) << a->error << " (" << sql.substr(0, 60) << "...)";
  ASSERT_EQ(a->statements.size(), 1u);
  EXPECT_EQ(a->statements[0].kind, StatementKind::kSelect);
}

// The figures of statements PostgreSQL 15 runs with max_stack_depth = 2MB.
TEST(DeepStatements, NestedScalarSubqueries) { expectAnalysed(nestedSubqueries(145)); }
TEST(DeepStatements, UnionAllArms) { expectAnalysed(unionArms(1009)); }
TEST(DeepStatements, PlusChain) { expectAnalysed(plusChain(508)); }
TEST(DeepStatements, NestedCoalesce) { expectAnalysed(nestedCoalesce(338)); }

// Analyses `sql` on a thread with a stack of `stack_mib` MiB.
void analyseOnStack(size_t stack_mib, const std::string& sql, bool expect_ok) {
  struct Job {
    const std::string* sql;
    bool ok;
    std::string error;
  } job{&sql, false, {}};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_mib << 20), 0);
  pthread_t t;
  ASSERT_EQ(pthread_create(
                &t, &attr,
                [](void* p) -> void* {
                  auto* j = static_cast<Job*>(p);
                  const auto a = analyzeUncached(*j->sql);
                  j->ok = a->ok;
                  j->error = a->error;
                  return nullptr;
                },
                &job),
            0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's frames are several times larger: the depth the stack allows is lower, so
  // a deep statement may be refused here, never analysed past the stack.
  if (!job.ok) expect_ok = false;
#endif
  EXPECT_EQ(job.ok, expect_ok) << job.error << " (" << sql.substr(0, 60) << "...)";
  if (!expect_ok) {
    EXPECT_NE(job.error.find("nested deeper than pgwarden analyses"), std::string::npos)
        << job.error;
  }
}

// The most PostgreSQL 15 runs with max_stack_depth = 2MB, on a loop thread's 8 MiB stack.
TEST(DeepStatements, ServerMaximaOnALoopThread) {
  analyseOnStack(8, nestedSubqueries(2111), true);
  analyseOnStack(8, unionArms(12000), true);
  analyseOnStack(8, plusChain(4092), true);
  analyseOnStack(8, nestedCoalesce(4515), true);
}

// Beyond the bound, or beyond what a small stack can walk: an honest refusal, never a crash.
TEST(DeepStatements, DeeperThanTheStackHoldsRefused) {
  analyseOnStack(8, nestedSubqueries(2400), false);
  analyseOnStack(8, plusChain(9000), false);
  analyseOnStack(1, nestedSubqueries(2111), false);
  analyseOnStack(1, nestedCoalesce(4515), false);
  analyseOnStack(1, nestedSubqueries(100), true);
}

}  // namespace
}  // namespace pgwarden::guards
