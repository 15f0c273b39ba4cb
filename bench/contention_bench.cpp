// What the worker loops share per statement, and what sharing it costs as loops are added: the
// three critical sections every statement enters on a lock the loops share (the history
// recorder's submit, the per-statement metrics series, the budget ledger's admit and release),
// each timed with 1 to 16 threads entering it in a tight loop. One thread gives the time the lock
// is held; more threads than cores show the lock handed between threads that are not running,
// the worst case a loaded host meets. docs/performance.md ("Past one core") turns these into
// the expected wait per statement for N loops. Figures are measured and reported, never asserted.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "bench/bench_record.h"
#include "budgets/budget.h"
#include "history/recorder.h"
#include "metrics/metrics.h"

namespace {

using pgwarden::history::Durability;
using pgwarden::history::HistoryConfig;
using pgwarden::history::Record;
namespace metrics = pgwarden::metrics;
namespace guards = pgwarden::guards;
namespace budgets = pgwarden::budgets;

Record statementRecord(uint64_t i) {
  Record r = pgwarden::bench::agentRecord(i, 1, 120);
  r.tables = {"public.pgbench_accounts"};
  r.sql_text = "SELECT abalance FROM pgbench_accounts WHERE aid = " + std::to_string(i % 100000);
  r.rows_returned = 1;
  r.protocol = "simple";
  return r;
}

// Building the record happens on the loop before the lock; timed alone so the section's own
// share of BM_RecorderSubmit can be told apart.
void BM_RecordBuild(benchmark::State& state) {
  uint64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(statementRecord(i++));
}
BENCHMARK(BM_RecordBuild);

// Room for every record the bench submits (16 threads x kSubmits), so none is dropped: a drop is
// cheaper than a submit and would flatter the figure.
constexpr int64_t kSubmits = 100000;
constexpr size_t kQueueRoom = 16 * kSubmits + 1024;

// The recorder as the daemon shares it: one queue, one producer at a time (Daemon::submitRecord).
// Durability off: the bench times the section, not the spool.
struct SharedRecorder {
  std::string dir;
  std::unique_ptr<pgwarden::history::Recorder> recorder;
  std::mutex mu;
  SharedRecorder() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pgw-contention-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) std::abort();
    dir = tmpl;
    HistoryConfig c;
    c.store = "jsonl";
    c.path = dir + "/history.jsonl";
    c.durability = Durability::kOff;
    c.queue_size = kQueueRoom;
    c.chain = false;
    recorder = pgwarden::history::makeRecorder(c);
  }
  ~SharedRecorder() {
    recorder->shutdown(std::chrono::seconds(30));
    std::filesystem::remove_all(dir);
  }
};

void BM_RecorderSubmit(benchmark::State& state) {
  static SharedRecorder* shared = nullptr;
  if (state.thread_index() == 0) shared = new SharedRecorder();
  uint64_t i = static_cast<uint64_t>(state.thread_index()) << 32;
  for (auto _ : state) {
    Record r = statementRecord(i++);
    std::lock_guard lock(shared->mu);
    benchmark::DoNotOptimize(shared->recorder->submit(std::move(r)));
  }
  if (state.thread_index() == 0) {
    delete shared;
    shared = nullptr;
  }
}
BENCHMARK(BM_RecorderSubmit)->ThreadRange(1, 16)->Iterations(kSubmits)->UseRealTime();

// The same at a statement's pace: each iteration first spends 25 us of its own (a loop's work
// on a statement, about what it costs today), then submits; only the submit is timed (manual
// time). The writer keeps up at that pace, so the queue stays short, as it does in the daemon:
// this is the steady-state hold time, without the first touch of a queue growing to hold every
// record that BM_RecorderSubmit pays. The time is the thread's CPU time, so a thread
// descheduled while it holds the lock (a loaded host) does not count as holding it longer.
double threadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

void spinMicros(int64_t us) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
}

void BM_RecorderSubmitPaced(benchmark::State& state) {
  static SharedRecorder* shared = nullptr;
  if (state.thread_index() == 0) shared = new SharedRecorder();
  uint64_t i = static_cast<uint64_t>(state.thread_index()) << 32;
  for (auto _ : state) {
    spinMicros(25);
    Record r = statementRecord(i++);
    const double t0 = threadCpuSeconds();
    {
      std::lock_guard lock(shared->mu);
      benchmark::DoNotOptimize(shared->recorder->submit(std::move(r)));
    }
    state.SetIterationTime(threadCpuSeconds() - t0);
  }
  if (state.thread_index() == 0) {
    delete shared;
    shared = nullptr;
  }
}
BENCHMARK(BM_RecorderSubmitPaced)->Threads(1)->Threads(2)->Iterations(20000)->UseManualTime();

// DaemonMetrics::onStatement's updates, under the lock it takes when several loops record.
struct SharedMetrics {
  metrics::Metrics m{metrics::BuildInfo{"bench", "0"}};
  metrics::GroupSeries agents{m, "agents"};
  std::mutex mu;
};

void BM_MetricsStatement(benchmark::State& state) {
  static SharedMetrics* shared = nullptr;
  if (state.thread_index() == 0) shared = new SharedMetrics();
  for (auto _ : state) {
    std::lock_guard lock(shared->mu);
    shared->agents.statements(pgwarden::history::Outcome::kOk, metrics::StatementIntent::kLookup).inc();
    shared->agents.duration(pgwarden::history::Outcome::kOk).observe(std::chrono::microseconds(120));
    shared->agents.rowsReturned().inc(1);
  }
  if (state.thread_index() == 0) {
    delete shared;
    shared = nullptr;
  }
}
BENCHMARK(BM_MetricsStatement)->ThreadRange(1, 16)->UseRealTime();

// The budget ledger every loop admits through (exact budgets across loops): admit, the rows,
// release, one conversation per thread as sessions on different loops have.
struct SharedLedger {
  budgets::BudgetGuard guard{budgets::BudgetLimits{}, budgets::BudgetStoreConfig{}};
  budgets::BudgetLedger ledger;
};

void BM_LedgerStatement(benchmark::State& state) {
  static SharedLedger* shared = nullptr;
  if (state.thread_index() == 0) shared = new SharedLedger();
  const budgets::BudgetKey key{"agent", "conv-" + std::to_string(state.thread_index())};
  for (auto _ : state) {
    benchmark::DoNotOptimize(shared->ledger.admit(shared->guard, key));
    shared->ledger.addRows(shared->guard, key, 1);
    shared->ledger.release(key);
  }
  if (state.thread_index() == 0) {
    delete shared;
    shared = nullptr;
  }
}
BENCHMARK(BM_LedgerStatement)->ThreadRange(1, 16)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::off);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
