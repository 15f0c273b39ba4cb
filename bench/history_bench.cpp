// Query-history throughput: how many records per second each writer stores when it always has
// a full queue (submit everything, then shutdown flushes), and what submit() costs the caller;
// each with the memory queue (spool 0, history.durability: off) and the memory-mapped spool
// (spool 1, durability: process, the default).
// PostgreSQL figures need a connection string in PGWARDEN_BENCH_DSN (rows go to its
// pgwarden_history table). Figures are measured and reported, never asserted.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "bench/bench_record.h"
#include "history/recorder.h"
#include "history/schema.h"

namespace {

using pgwarden::history::Durability;
using pgwarden::history::HistoryConfig;
using pgwarden::history::makeRecorder;
using pgwarden::history::Outcome;
using pgwarden::history::Record;

Record sampleRecord(uint64_t i) {
  Record r = pgwarden::bench::agentRecord(i, 1000, 1800);
  r.client_addr = "10.1.2.3:51234";
  r.application_name = "langchain";
  r.query_intent_sent = "lookup";
  r.query_intent_inferred = "lookup";
  r.tables = {"public.shipments", "public.customers"};
  r.sql_text =
      "SELECT s.id, s.status, c.name FROM shipments s JOIN customers c ON c.id = s.customer_id "
      "WHERE s.status = 'late' AND s.shipped_at > now() - interval '7 days' ORDER BY s.id LIMIT " +
      std::to_string(100 + i % 50);
  r.guard_actions =
      R"([{"guard":"row_limit","action":"rewrite","code":"limit_added","reason":"LIMIT 1000 added"}])";
  r.rows_returned = 42;
  r.bytes_sent = 4096;
  r.protocol = "extended";
  return r;
}

std::string tempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "pgw-history-bench-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) std::abort();
  return tmpl;
}

// Submits `n` records to a recorder that has room for all of them, then flushes: the elapsed time
// is the writer's, from the first record to the last stored.
double processCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// CPU of the calling thread only: with the process's, it tells the writer thread's share apart.
double threadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// Room for every record of a case, so none is dropped whatever the writer's pace.
constexpr uint64_t kSpoolBytes = 256ull << 20;

void setDurability(HistoryConfig& c, int64_t spool) {
  c.durability = spool != 0 ? Durability::kProcess : Durability::kOff;
  c.spool_size = kSpoolBytes;
}

void writeAll(benchmark::State& state, HistoryConfig config, int64_t spool) {
  const auto n = static_cast<uint64_t>(state.range(0));
  config.queue_size = n;
  config.batch_size = static_cast<size_t>(state.range(1));
  setDurability(config, spool);
  config.flush_interval = std::chrono::milliseconds(50);
  uint64_t written = 0;
  const double cpu0 = processCpuSeconds();
  const double own0 = threadCpuSeconds();
  for (auto _ : state) {
    auto rec = makeRecorder(config);
    for (uint64_t i = 0; i < n; ++i) {
      if (!rec->submit(sampleRecord(i))) state.SkipWithError("record dropped");
    }
    rec->shutdown(std::chrono::minutes(5));
    written += rec->stats().written;
  }
  const double cpu = processCpuSeconds() - cpu0;
  // Everything but this thread (building and submitting the records, opening the store) is the
  // writer thread's: decoding, preparing and storing.
  const double writer = cpu - (threadCpuSeconds() - own0);
  state.SetItemsProcessed(static_cast<int64_t>(written));
  // Wall-clock rates depend on what else runs on the machine; records per CPU-second of the
  // whole process (loop-side submit and writer thread together) does not, as much.
  state.counters["records_per_cpu_s"] = cpu > 0 ? static_cast<double>(written) / cpu : 0;
  state.counters["writer_ns_per_record"] =
      written > 0 ? writer * 1e9 / static_cast<double>(written) : 0;
  state.counters["records_per_s"] =
      benchmark::Counter(static_cast<double>(written), benchmark::Counter::kIsRate);
}

// `chain` 1: the tamper-evident chain on (history.chain, the daemon's default), its key file in
// the bench's directory; 0: off, as history.chain: false.
void setChain(HistoryConfig& c, const std::string& dir, int64_t chain) {
  c.chain = chain != 0;
  c.chain_key_file = chain != 0 ? dir + "/history_chain.key" : std::string();
}

void BM_SqliteWriter(benchmark::State& state) {
  const std::string dir = tempDir();
  HistoryConfig c;
  c.store = "sqlite";
  c.path = dir + "/history.db";
  c.redact_literals = state.range(2) != 0;
  setChain(c, dir, state.range(4));
  writeAll(state, c, state.range(3));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SqliteWriter)
    ->ArgNames({"records", "batch", "redact", "spool", "chain"})
    ->Args({100000, 64, 0, 1, 0})
    ->Args({100000, 512, 0, 0, 0})
    ->Args({100000, 512, 0, 1, 0})
    ->Args({100000, 4096, 0, 1, 0})
    ->Args({100000, 512, 1, 1, 0})
    ->Args({100000, 64, 0, 1, 1})
    ->Args({100000, 512, 0, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

// A SQLite store behind the spool at `path`, room for `records` records, the chain as `chain`
// says: what BM_SqliteWriterSteady and BM_SqliteFloor write through.
HistoryConfig spooledSqlite(const std::string& dir, const std::string& path, int64_t records,
                            int64_t chain) {
  HistoryConfig c;
  c.store = "sqlite";
  c.path = path;
  c.queue_size = static_cast<size_t>(records);
  setDurability(c, 1);
  setChain(c, dir, chain);
  return c;
}

// The writer as traffic meets it: records arrive at a steady pace (bursts of 250 every 5 ms,
// 50,000 a second) that it keeps up with, so it wakes on its own (batch_size waiting, or
// flush_interval) rather than always finding a full queue. What it costs per record then
// depends on how many records each wake-up, and so each transaction, takes.
void BM_SqliteWriterSteady(benchmark::State& state) {
  const std::string dir = tempDir();
  HistoryConfig c = spooledSqlite(dir, dir + "/history.db", state.range(0), state.range(2));
  c.batch_size = static_cast<size_t>(state.range(1));
  const auto n = static_cast<uint64_t>(state.range(0));
  constexpr uint64_t kBurst = 250;
  uint64_t written = 0;
  const double cpu0 = processCpuSeconds();
  const double own0 = threadCpuSeconds();
  for (auto _ : state) {
    auto rec = makeRecorder(c);
    auto next = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < n; ++i) {
      if (i % kBurst == 0) {
        next += std::chrono::milliseconds(5);
        std::this_thread::sleep_until(next);
      }
      if (!rec->submit(sampleRecord(i))) state.SkipWithError("record dropped");
    }
    rec->shutdown(std::chrono::minutes(5));
    written += rec->stats().written;
  }
  const double writer = processCpuSeconds() - cpu0 - (threadCpuSeconds() - own0);
  state.SetItemsProcessed(static_cast<int64_t>(written));
  state.counters["writer_ns_per_record"] =
      written > 0 ? writer * 1e9 / static_cast<double>(written) : 0;
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SqliteWriterSteady)
    ->ArgNames({"records", "batch", "chain"})
    ->Args({100000, 512, 0})
    ->Args({100000, 4096, 0})
    ->Args({100000, 512, 1})
    ->Args({100000, 4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

// SQLite's own floor for the same rows: the writer stores `records` records (chain on or off)
// into one store; then, into an empty store the daemon's code made (its schema, indexes, page
// size and pragmas), SQLite alone copies them over in transactions of `batch` rows (`INSERT ...
// SELECT` from the first store attached: no binding, no decoding, none of pgwarden's code).
// `sqlite_ns_per_row` is that thread's CPU per row: the part of writer_ns_per_record that no
// change to the writer can remove while a record is a row of this table.
void execOrDie(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "history_bench: %s: %s\n", sql.c_str(), err != nullptr ? err : "?");
    std::abort();
  }
}

void BM_SqliteFloor(benchmark::State& state) {
  const std::string dir = tempDir();
  HistoryConfig c = spooledSqlite(dir, dir + "/source.db", state.range(0), state.range(2));
  const auto n = static_cast<uint64_t>(state.range(0));
  const auto batch = static_cast<uint64_t>(state.range(1));
  {
    auto rec = makeRecorder(c);
    for (uint64_t i = 0; i < n; ++i) (void)rec->submit(sampleRecord(i));
    rec->shutdown(std::chrono::minutes(5));
  }
  const std::string table = pgwarden::history::kHistoryTable;
  const std::string cols = pgwarden::history::columnList();
  uint64_t rows = 0;
  double cpu = 0;
  for (auto _ : state) {
    c.path = dir + "/history.db";
    std::filesystem::remove(c.path);
    std::filesystem::remove(c.path + "-wal");
    std::filesystem::remove(c.path + "-shm");
    makeRecorder(c)->shutdown(std::chrono::seconds(10));  // an empty store of the daemon's making
    sqlite3* db = nullptr;
    if (sqlite3_open(c.path.c_str(), &db) != SQLITE_OK) std::abort();
    // The store's own connection settings (history/sqlite_store.cpp): with 8 KiB pages, a
    // checkpoint every 4,096 pages is its 32 MiB.
    execOrDie(db,
              "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-16384; PRAGMA wal_autocheckpoint=4096; "
              "PRAGMA journal_size_limit=67108864; ATTACH '" + dir + "/source.db' AS src");
    sqlite3_stmt* copy = nullptr;
    const std::string sql = "INSERT INTO main." + table + " (" + cols + ") SELECT " + cols +
                            " FROM src." + table + " WHERE id > ?1 AND id <= ?2";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &copy, nullptr) != SQLITE_OK) std::abort();
    const double t0 = threadCpuSeconds();
    for (uint64_t lo = 0; lo < n; lo += batch) {
      execOrDie(db, "BEGIN IMMEDIATE");
      sqlite3_bind_int64(copy, 1, static_cast<sqlite3_int64>(lo));
      sqlite3_bind_int64(copy, 2, static_cast<sqlite3_int64>(lo + batch));
      if (sqlite3_step(copy) != SQLITE_DONE) std::abort();
      sqlite3_reset(copy);
      execOrDie(db, "COMMIT");
    }
    cpu += threadCpuSeconds() - t0;
    rows += n;
    sqlite3_finalize(copy);
    sqlite3_close(db);
  }
  state.SetItemsProcessed(static_cast<int64_t>(rows));
  state.counters["sqlite_ns_per_row"] = rows > 0 ? cpu * 1e9 / static_cast<double>(rows) : 0;
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SqliteFloor)
    ->ArgNames({"records", "batch", "chain"})
    ->Args({100000, 512, 1})
    ->Args({100000, 4096, 1})
    ->Args({100000, 8192, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

void BM_JsonlWriter(benchmark::State& state) {
  const std::string dir = tempDir();
  HistoryConfig c;
  c.store = "jsonl";
  c.path = dir + "/history.jsonl";
  setChain(c, dir, state.range(3));
  writeAll(state, c, state.range(2));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_JsonlWriter)
    ->ArgNames({"records", "batch", "spool", "chain"})
    ->Args({100000, 512, 0, 0})
    ->Args({100000, 512, 1, 0})
    ->Args({100000, 512, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

void BM_PostgresWriter(benchmark::State& state) {
  const char* dsn = std::getenv("PGWARDEN_BENCH_DSN");
  if (dsn == nullptr || *dsn == '\0') {
    state.SkipWithError("set PGWARDEN_BENCH_DSN to a libpq connection string to measure this");
    for (auto _ : state) {
    }
    return;
  }
  const std::string dir = tempDir();
  HistoryConfig c;
  c.store = "postgres";
  c.dsn = dsn;
  c.spool_path = dir + "/history.spool";
  writeAll(state, c, state.range(2));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_PostgresWriter)
    ->ArgNames({"records", "batch", "spool"})
    ->Args({100000, 64, 1})
    ->Args({100000, 512, 0})
    ->Args({100000, 512, 1})
    ->Args({100000, 4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

// What the event loop pays per statement: copying a record in and queueing it, into memory or
// serialized into the spool (the writer runs meanwhile; the queue is large enough that nothing
// is dropped).
void BM_Submit(benchmark::State& state) {
  const std::string dir = tempDir();
  HistoryConfig c;
  c.store = "sqlite";
  c.path = dir + "/history.db";
  c.queue_size = 1 << 20;
  setDurability(c, state.range(0));
  auto rec = makeRecorder(c);
  const Record sample = sampleRecord(1);
  for (auto _ : state) {
    Record r = sample;
    benchmark::DoNotOptimize(rec->submit(std::move(r)));
  }
  state.counters["dropped"] = static_cast<double>(rec->stats().dropped);
  rec->shutdown(std::chrono::minutes(5));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_Submit)->ArgNames({"spool"})->Arg(0)->Arg(1)->Iterations(200000);

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
