// The recorder: a bounded queue from the event loop to a writer thread that batches records into
// a store (SQLite, PostgreSQL, JSON lines). submit() never blocks; when the queue is full the
// record is dropped and counted.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "history/record.h"

namespace pgwarden::history {

struct HistoryConfig {
  std::string store = "sqlite";   // sqlite | postgres | jsonl | off
  std::string path;               // sqlite file or jsonl file
  int path_line = 0;              // line of history.path in the file (0: the default), for messages
  std::string dsn;                // postgres: libpq connection string (or read from dsn_file)
  std::string dsn_file;           // postgres: file holding the connection string (a secret)
  size_t queue_size = 65536;
  size_t batch_size = 512;
  std::chrono::milliseconds flush_interval{200};
  size_t max_sql_bytes = 4096;
  bool redact_literals = false;
  std::chrono::milliseconds max_age{0};  // 0: keep forever
  int64_t max_rows = 0;                  // 0: no row cap
  std::string instance_id;               // "" : the host name, filled in by makeRecorder
};

// Parses the `history:` section (absent node -> defaults with the given default sqlite path).
// Throws config::ConfigError.
HistoryConfig parseHistoryConfig(const YAML::Node& node, const std::string& default_path);

struct RecorderStats {
  uint64_t submitted = 0;
  uint64_t written = 0;
  uint64_t dropped = 0;
  uint64_t write_errors = 0;   // failed write attempts (each retry counts once)
  uint64_t rejected = 0;       // records the store refused even on their own; lost and logged
  // Records accepted and not yet written (queued plus the batch being written). Invariant:
  // submitted == written + dropped + rejected + queue_depth (store `off` counts nothing).
  size_t queue_depth = 0;
  // The last attempt to reach the store succeeded (false from a failed write or open until the
  // next success: the store is down and records wait in the queue).
  bool store_up = true;
};

class Recorder {
 public:
  virtual ~Recorder() = default;
  // Non-blocking, O(1), no I/O: safe on the event loop. Returns false when the record was
  // dropped (queue full, or after shutdown) or the store is `off` (not counted as a drop).
  virtual bool submit(Record&& record) = 0;
  // Flushes what is queued (waiting up to `timeout`) and stops the writer thread.
  virtual void shutdown(std::chrono::milliseconds timeout) = 0;
  virtual RecorderStats stats() const = 0;
};

// Starts the writer thread for the configured store. Throws std::runtime_error when the store
// cannot be opened at start-up for a reason retrying cannot fix (an unparsable connection string,
// a sqlite or jsonl file that cannot be created, a schema from a newer pgwarden). A postgres store
// that is merely unreachable does not stop start-up: the recorder starts with the store down
// (logged as a warning), records queue, and the writer retries with backoff, creating the table
// when the store comes up.
std::unique_ptr<Recorder> makeRecorder(const HistoryConfig& config);

}  // namespace pgwarden::history
