// Shared pieces of the history tests: temp directories, a direct SQLite reader for checking what
// a store holds, a record factory, polling with a deadline, the seed the report tests use, and
// a spool made to look as a crash at the worst moment leaves it.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "history/record.h"
#include "history/spool.h"

namespace pgwarden::history::test {

// What the kernel lets a thread of this process do after nice 19 (history/writer_priority.h),
// worked out apart from the code under test: come back to its nice value with CAP_SYS_NICE
// (/proc/self/status's CapEff, bit 23) or an RLIMIT_NICE of at least 20 - nice. A host that
// allows neither keeps the writer under the normal policy, and the tests check that instead.
inline bool threadsMayComeBackFromNice19() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) == 0 && (std::stoull(line.substr(7), nullptr, 16) >> 23) & 1) {
      return true;
    }
  }
  rlimit limit{};
  const int nice = getpriority(PRIO_PROCESS, 0);
  return getrlimit(RLIMIT_NICE, &limit) == 0 && limit.rlim_cur >= static_cast<rlim_t>(20 - nice);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pgw-history-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

using Rows = std::vector<std::vector<std::string>>;

// Runs `sql` on its own connection (NULL reads as "<null>").
inline Rows sqliteQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("cannot open " + path);
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    std::string err = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw std::runtime_error(err);
  }
  Rows rows;
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      const auto* t = sqlite3_column_text(st, c);
      row.emplace_back(t != nullptr ? std::string(reinterpret_cast<const char*>(t),
                                                   sqlite3_column_bytes(st, c))
                                    : "<null>");
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

// What a process killed between the store's commit and the spool's consumed mark leaves: every
// record still in the ring and nothing marked consumed.
inline void forgetConsumedMarks(const std::string& spool) {
  std::fstream f(spool, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(spool_layout::kMarksOffset));
  const std::string zeros(2 * spool_layout::kMarkSize, '\0');
  f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
}

inline int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Polls `done` every 10 ms until it holds or `timeout` passes; returns its last value.
inline bool waitFor(const std::function<bool()>& done,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

inline Record makeRecord(uint64_t session, const std::string& sql) {
  Record r;
  r.started_at_us = nowUs();
  r.finished_at_us = r.started_at_us + 1500;
  r.duration_us = 1500;
  r.instance_id = "test-instance";
  r.session_id = session;
  r.user = "agent";
  r.database = "analytics";
  r.policy_group = "agents";
  r.client_addr = "127.0.0.1:50000";
  r.application_name = "pytest";
  r.agent_id = "agent-7";
  r.conversation_id = "conv-" + std::to_string(session % 5);
  r.statement_kind = "select";
  r.tables = {"public.orders"};
  r.sql_text = sql;
  r.fingerprint = "0123456789abcdef";
  r.outcome = Outcome::kOk;
  r.rows_returned = 3;
  r.protocol = "simple";
  return r;
}

// The data the report tests read, from both stores. Times are minutes before `now_us`.
inline std::vector<Record> reportSeed(int64_t now_us) {
  std::vector<Record> out;
  auto add = [&](const std::string& conv, uint64_t session, int minutes_ago, const std::string& fp,
                 const std::string& sql, Outcome outcome, int64_t rows,
                 std::vector<std::string> tables) -> Record& {
    Record r;
    r.started_at_us = now_us - int64_t{minutes_ago} * 60'000'000;
    r.finished_at_us = r.started_at_us + 2000;
    r.duration_us = 2000;
    r.instance_id = "i1";
    r.session_id = session;
    r.user = "agent";
    r.database = "analytics";
    r.policy_group = "agents";
    r.agent_id = conv.empty() ? "" : "agent-" + conv;
    r.conversation_id = conv;
    r.statement_kind = "select";
    r.tables = std::move(tables);
    r.sql_text = sql;
    r.fingerprint = fp;
    r.outcome = outcome;
    r.rows_returned = rows;
    r.protocol = "simple";
    out.push_back(r);
    return out.back();
  };
  const std::vector<std::string> orders = {"public.orders"};
  const std::vector<std::string> users = {"public.users"};
  // c1 guesses the status literal: 6 attempts, 5 different texts, 4 of them empty.
  add("c1", 1, 60, "f1", "SELECT count(*) FROM orders WHERE status = 'late'", Outcome::kOk, 1,
      orders).single_zero = true;
  out.back().guard_actions =
      R"([{"guard":"result_screen","action":"warn","code":"UNKNOWN_VALUE","reason":"no status 'late'"}])";
  add("c1", 1, 59, "f1", "SELECT count(*) FROM orders WHERE status = 'Late'", Outcome::kOk, 1,
      orders).single_zero = true;
  add("c1", 1, 58, "f1", "SELECT count(*) FROM orders WHERE status = 'LATE'", Outcome::kOk, 1,
      orders).single_zero = true;
  add("c1", 1, 57, "f1", "SELECT count(*) FROM orders WHERE status = 'overdue'", Outcome::kOk, 1,
      orders).single_zero = true;
  add("c1", 1, 56, "f1", "SELECT count(*) FROM orders WHERE status = 'late'", Outcome::kOk, 1,
      orders).single_zero = true;
  add("c1", 1, 55, "f1", "SELECT count(*) FROM orders WHERE status = 'DELAYED'", Outcome::kOk, 1,
      orders);
  // c2 runs the same shape twice with one text, and finds no rows once.
  add("c2", 2, 50, "f1", "SELECT count(*) FROM orders WHERE status = 'DELAYED'", Outcome::kOk, 1,
      orders);
  add("c2", 2, 49, "f2", "SELECT id FROM orders WHERE customer = 'acme'", Outcome::kOk, 0, orders);
  // c3 and c4 are denied reading users without a predicate.
  add("c3", 3, 40, "f3", "SELECT * FROM users", Outcome::kDenied, 0, users).deny_code =
      "require_predicate";
  out.back().error_message = "users needs a WHERE on id or email (first reason)";
  add("c3", 3, 39, "f3", "select * from users", Outcome::kDenied, 0, users).deny_code =
      "require_predicate";
  out.back().error_message = "users needs a WHERE on id or email";
  add("c3", 3, 38, "f3", "SELECT *  FROM users", Outcome::kDenied, 0, users).deny_code =
      "require_predicate";
  out.back().error_message = "users needs a WHERE on id or email";
  add("c4", 4, 30, "f3", "SELECT * FROM users", Outcome::kDenied, 0, users).deny_code =
      "require_predicate";
  out.back().error_message = "users needs a WHERE on id or email (latest)";
  // A budget denial naming two tables counts under each.
  add("c4", 4, 29, "f4", "SELECT * FROM orders JOIN customers USING (cid)", Outcome::kBudget, 0,
      {"public.orders", "public.customers"})
      .deny_code = "budget_exhausted";
  out.back().error_message = "the conversation's row budget is spent";
  // A psql session without a conversation id retries three texts: keyed by its session.
  add("", 77, 20, "f5", "SELECT 1 FROM shipments WHERE region = 'EU'", Outcome::kError, 0, {})
      .sqlstate = "42P01";
  add("", 77, 19, "f5", "SELECT 1 FROM shipments WHERE region = 'eu'", Outcome::kOk, 0, {});
  add("", 77, 18, "f5", "SELECT 1 FROM shipments WHERE region = 'Europe'", Outcome::kOk, 2, {});
  // Ten days old: only seen without --since.
  add("c9", 9, 10 * 24 * 60, "f1", "SELECT count(*) FROM orders WHERE status = 'old'",
      Outcome::kOk, 1, orders);
  return out;
}

}  // namespace pgwarden::history::test
