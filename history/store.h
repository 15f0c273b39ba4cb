// The writer thread's view of a store: write a batch, prune old rows. Each store is used by one
// thread only (the recorder's writer), so it may block; it never throws on the write path.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/result.h"
#include "history/chain.h"
#include "history/record.h"
#include "history/recorder.h"

namespace pgwarden::history {

enum class WriteOutcome {
  kOk,        // every record of the batch is stored
  kRetry,     // nothing stored; the store is down, busy or slow: try the same batch again later
  kRejected,  // nothing stored; the store refused the data itself (retrying will not help)
};

struct WriteResult {
  WriteOutcome outcome = WriteOutcome::kOk;
  std::string error;  // for logs; never holds credentials
};

struct Retention {
  int64_t cutoff_us = 0;  // delete rows that started before this (0: no age limit)
  int64_t max_rows = 0;   // keep at most this many rows, the newest (0: no row cap)
  int64_t chunk = 10000;  // delete at most this many rows per call, so batches are not held up
};

class Store {
 public:
  virtual ~Store() = default;
  virtual const char* name() const = 0;
  // Opens the store and creates its schema if missing. Called once at start-up.
  [[nodiscard]] virtual Status open() = 0;
  // After open() failed: true when the store is only down or unreachable (a database server not
  // up yet), an outage the writer rides out: the recorder starts anyway, records queue, and the
  // store is opened (its schema created) when it comes up. False when retrying cannot help (a
  // connection string that does not parse, a file that cannot be created, a newer schema): that
  // stops start-up.
  virtual bool openFailureIsOutage() const { return false; }
  // Called by the writer while the store is down and no batch is waiting, so the store (and the
  // up gauge) come back without traffic. OK when the store is usable again.
  [[nodiscard]] virtual Status probe() { return {}; }
  // Writes the batch atomically (all or nothing). Records are already sanitized.
  virtual WriteResult write(std::span<const Record> records) = 0;
  // Deletes at most retention.chunk rows past the retention limits; returns how many it deleted.
  // Stores without retention return 0.
  virtual Result<int64_t> prune(const Retention& retention) = 0;
  // From now on write() gives each record it stores its place in the chain (history/chain.h).
  void attachChain(std::unique_ptr<Chainer> chain) { chain_ = std::move(chain); }

 protected:
  std::unique_ptr<Chainer> chain_;  // null: records are stored without chain fields
};

std::unique_ptr<Store> makeSqliteStore(const std::string& path);
std::unique_ptr<Store> makePostgresStore(const std::string& dsn);
std::unique_ptr<Store> makeJsonlStore(const std::string& path);

// Starts a recorder writing to an already-made store (not yet opened): makeRecorder uses it, and
// benchmarks and tests use it to reach a store directly. Throws std::runtime_error when open fails
// in a way retrying cannot fix; a store that is only down (openFailureIsOutage) starts down.
std::unique_ptr<Recorder> makeRecorderWithStore(const HistoryConfig& config,
                                                std::unique_ptr<Store> store);

// The writer thread's preparation of one record: normalize (redact_literals), repair UTF-8, cut
// sql_text and error_message to max_sql_bytes, make guard_actions valid JSON, fill a missing
// fingerprint and the instance id. `known_actions`, when given, holds the last guard_actions
// prepared (the same plan's actions come back record after record): a text equal to it is
// already valid JSON and repaired, so it is not checked again. Exposed for tests.
void prepareRecord(Record& r, const HistoryConfig& config, std::string* known_actions = nullptr);

}  // namespace pgwarden::history
