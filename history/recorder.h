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

// What a record that the loop has handed over survives before the store has it.
enum class Durability {
  kOff,      // an in-memory queue: lost if the process dies
  kProcess,  // a memory-mapped spool file: survives the process dying (not a power loss)
};

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
  Durability durability = Durability::kProcess;
  // The spool file (durability: process). "": `path` + ".spool" (sqlite, jsonl); the postgres
  // store has no path, so parseHistoryConfig always names one for it.
  std::string spool_path;
  uint64_t spool_size = 64ull << 20;  // ring bytes in the spool
  // The tamper-evident chain (history/chain.h): on unless `chain: false`; its keys in
  // chain_key_file (default: history_chain.key in daemon.state_dir), created at first start.
  bool chain = true;
  std::string chain_key_file;
  // writer_priority: background (the default) lets the writer run in the background (SCHED_BATCH
  // at nice 19) while it keeps up with a spool (history/writer_priority.h); normal keeps it under
  // the normal policy.
  bool background_writer = true;
};

// The spool file a config uses ("" with durability off or store off).
std::string spoolPath(const HistoryConfig& config);

// When the writer must parse a statement's text (redact_literals, or no fingerprint yet), submit
// cuts it only at this much larger bound (a text cut here no longer parses: it is stored
// redacted, or without a fingerprint).
inline constexpr size_t kMaxRawSqlBytes = 1 << 20;

// The smallest history.spool_size for a max_sql_bytes: room for four of the largest records.
uint64_t minSpoolSize(size_t max_sql_bytes);

// Parses the `history:` section (absent node -> defaults with the given default sqlite path).
// Throws config::ConfigError.
HistoryConfig parseHistoryConfig(const YAML::Node& node, const std::string& default_path);

struct RecorderStats {
  uint64_t submitted = 0;
  uint64_t written = 0;
  uint64_t dropped = 0;
  uint64_t write_errors = 0;   // failed write attempts (each retry counts once)
  uint64_t rejected = 0;       // records the store refused even on their own; lost and logged
  // Records found in the spool at start-up, not yet stored by the process before.
  uint64_t recovered = 0;
  // Records accepted (or recovered) and not yet written (queued plus the batch being written).
  // Invariant: submitted + recovered == written + dropped + rejected + queue_depth (store `off`
  // counts nothing).
  size_t queue_depth = 0;
  // durability: process: ring bytes in use, and the ring's size (both 0 without a spool).
  uint64_t spool_used_bytes = 0;
  uint64_t spool_capacity = 0;
  // The writer runs in the background now (history/writer_priority.h), and how many times a
  // backlog has put it back under the normal policy.
  bool writer_background = false;
  uint64_t writer_promotions = 0;
  // The last attempt to reach the store succeeded (false from a failed write or open until the
  // next success: the store is down and records wait in the queue).
  bool store_up = true;
};

class Recorder {
 public:
  virtual ~Recorder() = default;
  // Non-blocking, O(1), no I/O: safe on the event loop (with the spool, a copy into mapped
  // memory). Returns false when the record was dropped (queue or spool full, or after shutdown)
  // or the store is `off` (not counted as a drop).
  virtual bool submit(Record&& record) = 0;
  // The same for a view (the event loop's way): with the spool, the record is encoded where it
  // lands and its id written back into `record`; otherwise it is copied into a Record.
  virtual bool submit(RecordView& record) = 0;
  // Flushes what is queued (waiting up to `timeout`) and stops the writer thread. With the
  // spool, what the store did not take by then stays in the file for the next start.
  virtual void shutdown(std::chrono::milliseconds timeout) = 0;
  virtual RecorderStats stats() const = 0;
};

// Starts the writer thread for the configured store. Throws std::runtime_error when the store
// cannot be opened at start-up for a reason retrying cannot fix (an unparsable connection string,
// a sqlite or jsonl file that cannot be created, a schema from a newer pgwarden), or the spool
// cannot be opened (see Spool::open). Records recovered from the spool go first. A postgres store
// that is merely unreachable does not stop start-up: the recorder starts with the store down
// (logged as a warning), records queue, and the writer retries with backoff, creating the table
// when the store comes up.
std::unique_ptr<Recorder> makeRecorder(const HistoryConfig& config);

}  // namespace pgwarden::history
