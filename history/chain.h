// The tamper-evident chain over the history: each stored record carries chain_seq (its place in
// its instance's chain) and chain_hash = HMAC-SHA256(key, previous chain_hash || the record's
// fields in a canonical form). The keys live in a file in daemon.state_dir; docs/history-chain.md
// has the format and the threat model.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/string_hash.h"
#include "history/schema.h"

struct evp_mac_st;
struct evp_mac_ctx_st;

namespace pgwarden::history {

inline constexpr size_t kChainHashBytes = 32;
using ChainHash = std::array<unsigned char, kChainHashBytes>;
// How often the writer logs a checkpoint (instance, key id, chain_seq, chain_hash) of its chain.
inline constexpr uint64_t kChainCheckpointEvery = 10000;

struct ChainKey {
  std::string id;      // 8 hex digits of the secret's SHA-256: names the key in every record
  std::string secret;  // 32 random bytes
};

// The keys of the key file, oldest first; the last one signs new records.
struct ChainKeyring {
  std::vector<ChainKey> keys;
  const ChainKey& current() const { return keys.back(); }
  const ChainKey* find(std::string_view id) const;
};

// Reads the key file: one key a line, "<id> <64 hex digits>", oldest first. With `create`, a
// file that does not exist is made (mode 0600, one new key; written under a temporary name and
// linked into place, so a crash or a second process never leaves half a key).
Result<ChainKeyring> loadChainKeys(const std::string& path, bool create);
// For --check-config: "" when loadChainKeys(path, true) would succeed (the file holds keys, or
// does not exist and can be created), else why not. Creates nothing.
std::string chainKeyProblem(const std::string& path);
// Appends a new key to the file (created when missing); returns its id. Records written after the
// daemon's next start use it; their chain goes on from the last record made with the old one.
Result<std::string> rotateChainKey(const std::string& path);

// The canonical text of each column of a record, in kColumns order: timestamps as stored in
// SQLite ("2026-12-06T10:00:00.000001Z"), integers in decimal, booleans "0"/"1", JSON re-encoded
// compactly with sorted keys (PostgreSQL's jsonb keeps neither the text nor the key order), a
// missing record_uid "". Every store's reader can rebuild these from what it stored.
using ChainFields = std::array<std::string, kColumns.size()>;
std::string canonicalJson(std::string_view text);
void canonicalFields(const RowValues& row, ChainFields& out);

// The message the HMAC covers: prev, then each field but chain_hash as a 4-byte little-endian
// length and its bytes (the fields after chain_hash but before record_uid only when not empty).
void chainMessage(const ChainHash& prev, const ChainFields& fields, std::string& out);

// The same message written straight from a row, without the fields' copies (the writer's path).
// Keeps the last JSON text of each JSON column and its canonical form: the same guard_actions and
// tables come back again and again.
class RowChainMessage {
 public:
  // The message for `row` after `prev`; valid until the next call.
  const std::string& build(const ChainHash& prev, const RowValues& row);

 private:
  struct JsonCanon {
    std::string text;
    std::string canonical;
  };
  std::array<JsonCanon, kColumns.size()> json_;
  std::string out_;
};

// HMAC-SHA256(key, chainMessage(prev, fields)). `scratch` is reused between calls.
ChainHash chainHash(std::string_view secret, const ChainHash& prev, const ChainFields& fields,
                    std::string& scratch);
// HMAC-SHA256 of a built message with the key's state kept between records (the writer's path).
class ChainMac {
 public:
  ChainMac();
  ~ChainMac();
  ChainMac(const ChainMac&) = delete;
  ChainMac& operator=(const ChainMac&) = delete;
  ChainHash compute(const ChainKey& key, std::string_view message);

 private:
  evp_mac_st* mac_ = nullptr;
  evp_mac_ctx_st* ctx_ = nullptr;
  std::string key_id_;  // the key ctx_ holds
};

std::string hexOf(const ChainHash& h);
bool parseChainHash(std::string_view hex, ChainHash* out);

// Where one instance's chain ends in a store: 0 when it has no chained record yet.
struct ChainTail {
  uint64_t seq = 0;
  ChainHash hash{};
  std::string key_id;
};

// The writer's side, used by a store inside write(): link() for each record just before it is
// stored (so a record the store skips as already stored takes no place in the chain), then
// commit() when the batch is stored, or reset() when it is not: the next link() reads the chain's
// end back from the store, which holds exactly what was stored.
class Chainer {
 public:
  // Reads the end of an instance's chain from the store, the first time the instance is seen.
  using TailLookup = std::function<Result<ChainTail>(std::string_view instance)>;

  explicit Chainer(ChainKeyring keys) : keys_(std::move(keys)) {}

  // Sets row's chain fields. The text they point to stays valid until the next link().
  [[nodiscard]] Status link(RowValues& row, const TailLookup& lookup);
  // Logs the checkpoints the batch reached (every kChainCheckpointEvery records, and the first
  // record under a new key).
  void commit();
  void reset() {
    states_.clear();
    checkpoints_.clear();
  }
  const ChainKeyring& keys() const { return keys_; }

 private:
  struct State {
    uint64_t seq = 0;
    ChainHash hash{};
    std::string key_id;
  };
  struct Checkpoint {
    std::string instance;
    uint64_t seq;
    std::string key_id;
    std::string hash_hex;
  };

  const ChainKeyring keys_;
  // Found by the row's string_view: no key built per record.
  std::unordered_map<std::string, State, StringViewHash, StringViewEqual> states_;
  std::vector<Checkpoint> checkpoints_;
  RowChainMessage message_;
  std::string hash_hex_;
  ChainMac mac_;
};

}  // namespace pgwarden::history
