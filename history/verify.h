// `pgwarden history verify` and `pgwarden history export`: read a store's records back in the
// order they were stored, walk each instance's chain (history/chain.h) and name the first record
// that was edited, deleted, inserted or moved; or write them as a JSON-lines file that keeps the
// chain, which verify can walk again (--input).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>

#include "common/result.h"
#include "history/chain.h"
#include "history/recorder.h"

namespace pgwarden::history {

// One stored record: its place in the store (the row id; a file's line number) and its fields'
// canonical text (chain.h).
struct StoredRow {
  int64_t id = 0;
  bool unreadable = false;  // a line that is not a JSON object
  ChainFields fields;
};
using RowSink = std::function<void(const StoredRow&)>;

// The records of the configured store in storage order. since_us > 0: from the first record
// stored that started at or after it. Never throws.
[[nodiscard]] Status readStoredRows(const HistoryConfig& config, int64_t since_us,
                                    const RowSink& sink);
[[nodiscard]] Status readJsonlRows(const std::string& path, int64_t since_us, const RowSink& sink);
[[nodiscard]] Status readSqliteRows(const std::string& path, int64_t since_us, const RowSink& sink);
[[nodiscard]] Status readPostgresRows(const std::string& dsn, int64_t since_us,
                                      const RowSink& sink);
// The record as one line of the jsonl store (without the newline).
std::string jsonLine(const StoredRow& row);

enum class ChainProblem { kNone, kEdited, kMissing, kInserted, kReordered };
const char* chainProblemName(ChainProblem p);  // "edited", "missing", "inserted", "reordered"

struct ChainVerdict {
  ChainProblem problem = ChainProblem::kNone;
  int64_t id = 0;    // the record named
  uint64_t seq = 0;  // its chain_seq
  std::string instance;
  std::string detail;      // what is wrong, in a sentence
  uint64_t records = 0;    // rows read
  uint64_t unchained = 0;  // rows without chain fields, before their instance's chain began
  struct Chain {
    uint64_t first = 0;
    uint64_t last = 0;
    std::string keys;  // the key ids seen, in order, comma-separated
  };
  std::map<std::string, Chain> chains;  // by instance
};

// Walks rows in storage order. The first record of an instance's chain is checked against a
// zero hash when its chain_seq is 1; otherwise it is the walk's starting point (retention, a
// rotated file or --since left out what came before) and the verdict says so.
class ChainVerifier {
 public:
  explicit ChainVerifier(const ChainKeyring& keys) : keys_(keys) {}
  void add(const StoredRow& row);
  ChainVerdict finish();

 private:
  struct Walk {
    uint64_t next = 0;  // the chain_seq the next record must have
    ChainHash prev{};
    int64_t prev_id = 0;
    std::string key_id;  // the last record's
  };
  void fail(ChainProblem p, const StoredRow& row, uint64_t seq, std::string detail);
  void checkHash(const StoredRow& row, Walk& w, uint64_t seq, const ChainKey& key);
  void finishGap();

  const ChainKeyring& keys_;
  ChainVerdict verdict_;
  std::map<std::string, Walk> walks_;
  std::string scratch_;
  // A gap seen: the records lo..hi are not where they should be. Missing, unless one of them
  // turns up later (reordered).
  struct Gap {
    std::string instance;
    uint64_t lo = 0;
    uint64_t hi = 0;
    std::string moved;  // where one of them turned up, if it did
  };
  std::optional<Gap> gap_;
};

struct HistoryCommandOptions {
  int64_t since_us = 0;  // 0: everything
  std::string input;     // verify: a JSON-lines export instead of the configured store
  std::string output;    // export: the file to write ("": stdout)
};

// Exit codes: 0 the chain holds, 1 a record is named (or the store cannot be read), 2 no key.
int verifyHistoryCommand(const HistoryConfig& config, const HistoryCommandOptions& options,
                         std::ostream& out, std::ostream& err);
int exportHistoryCommand(const HistoryConfig& config, const HistoryCommandOptions& options,
                         std::ostream& out, std::ostream& err);
int rotateChainKeyCommand(const HistoryConfig& config, std::ostream& out, std::ostream& err);
// "24h"-style durations back from now, or a timestamp "2026-12-06T10:00:00Z"; nullopt when
// neither.
std::optional<int64_t> parseSince(const std::string& text, int64_t now_us);

}  // namespace pgwarden::history
