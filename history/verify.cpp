// Walks each instance's chain in storage order and names the first record that breaks it; the
// `history verify`, `history export` and `history rotate-key` commands (see verify.h).
#include "history/verify.h"

#include <charconv>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>

#include "common/config_util.h"
#include "history/record.h"

namespace pgwarden::history {

namespace {

uint64_t seqOf(const StoredRow& row) {
  const std::string& f = row.fields[kChainSeqField];
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  return ec == std::errc() && p == f.data() + f.size() ? v : 0;
}

std::string where(int64_t id) { return "record id " + std::to_string(id); }

}  // namespace

const char* chainProblemName(ChainProblem p) {
  switch (p) {
    case ChainProblem::kNone:
      return "ok";
    case ChainProblem::kEdited:
      return "edited";
    case ChainProblem::kMissing:
      return "missing";
    case ChainProblem::kInserted:
      return "inserted";
    case ChainProblem::kReordered:
      return "reordered";
  }
  return "?";
}

void ChainVerifier::fail(ChainProblem p, const StoredRow& row, uint64_t seq, std::string detail) {
  verdict_.problem = p;
  verdict_.id = row.id;
  verdict_.seq = seq;
  verdict_.instance = row.unreadable ? std::string() : row.fields[kInstanceIdField];
  verdict_.detail = std::move(detail);
}

void ChainVerifier::checkHash(const StoredRow& row, Walk& w, uint64_t seq, const ChainKey& key) {
  ChainHash stored{};
  const bool readable = parseChainHash(row.fields[kChainHashField], &stored);
  if (!readable || chainHash(key.secret, w.prev, row.fields, scratch_) != stored) {
    fail(ChainProblem::kEdited, row, seq,
         "its fields do not match its chain_hash: changed after it was written, or forged");
    return;
  }
  w.prev = stored;
  w.prev_id = row.id;
  w.next = seq + 1;
}

void ChainVerifier::add(const StoredRow& row) {
  ++verdict_.records;
  if (gap_) {
    // Only looking for the records the gap left out: the first of them, else any.
    const uint64_t seq = row.unreadable ? 0 : seqOf(row);
    if (!row.unreadable && row.fields[kInstanceIdField] == gap_->instance && seq >= gap_->lo &&
        seq <= gap_->hi && (seq == gap_->lo || gap_->moved.empty())) {
      gap_->moved = "it is stored before chain_seq " + std::to_string(seq) + " (" + where(row.id) +
                    "): records were moved";
      if (seq == gap_->lo) finishGap();
    }
    return;
  }
  if (verdict_.problem != ChainProblem::kNone) return;
  if (row.unreadable) {
    fail(ChainProblem::kEdited, row, 0, "it is not a JSON object");
    return;
  }
  const std::string& instance = row.fields[kInstanceIdField];
  const uint64_t seq = seqOf(row);
  auto it = walks_.find(instance);
  if (seq == 0) {
    if (it == walks_.end()) {
      ++verdict_.unchained;  // written before the chain began
    } else {
      fail(ChainProblem::kInserted, row, 0, "it has no chain fields, in the middle of the chain");
    }
    return;
  }
  const std::string& key_id = row.fields[kChainKeyField];
  const ChainKey* key = keys_.find(key_id);
  if (key == nullptr) {
    fail(ChainProblem::kInserted, row, seq,
         "its key id \"" + key_id + "\" is not in the key file: forged");
    return;
  }
  auto& chain = verdict_.chains[instance];
  if (it == walks_.end()) {
    it = walks_.emplace(instance, Walk{}).first;
    chain.first = seq;
    if (seq > 1) {
      // The walk starts here: take its hash as given.
      if (!parseChainHash(row.fields[kChainHashField], &it->second.prev)) {
        fail(ChainProblem::kEdited, row, seq, "its chain_hash is not a hash");
        return;
      }
      it->second.next = seq + 1;
      it->second.prev_id = row.id;
    } else {
      checkHash(row, it->second, seq, *key);
    }
  } else {
    Walk& w = it->second;
    if (seq == w.next) {
      checkHash(row, w, seq, *key);
    } else if (seq < w.next) {
      fail(ChainProblem::kInserted, row, seq,
           "chain_seq " + std::to_string(seq) +
               " is taken by an earlier record: a copy or a forgery");
    } else {
      fail(ChainProblem::kMissing, row, seq,
           "chain_seq " + std::to_string(w.next) +
               (seq - 1 > w.next ? ".." + std::to_string(seq - 1) : std::string()) +
               " should come between " + where(w.prev_id) + " and this one");
      gap_ = Gap{instance, w.next, seq - 1, {}};
    }
  }
  if (verdict_.problem != ChainProblem::kNone) return;
  chain.last = seq;
  if (it->second.key_id != key_id) {
    if (!chain.keys.empty()) chain.keys += ",";
    chain.keys += key_id;
    it->second.key_id = key_id;
  }
}

void ChainVerifier::finishGap() {
  if (!gap_) return;
  if (gap_->moved.empty()) {
    verdict_.detail += ", and is not in the store: deleted";
  } else {
    verdict_.problem = ChainProblem::kReordered;
    verdict_.detail = gap_->moved;
  }
  gap_.reset();
}

ChainVerdict ChainVerifier::finish() {
  finishGap();
  return verdict_;
}

std::optional<int64_t> parseSince(const std::string& text, int64_t now_us) {
  if (const auto d = config::parseDuration(text)) {
    return now_us - std::chrono::duration_cast<std::chrono::microseconds>(*d).count();
  }
  std::tm tm{};
  char zone = 0;
  const int n = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon,
                            &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &zone);
  if (n < 6 || (n == 7 && zone != 'Z')) return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const time_t t = timegm(&tm);
  if (t < 0) return std::nullopt;
  return static_cast<int64_t>(t) * 1000000;
}

namespace {

Result<ChainKeyring> keysFor(const HistoryConfig& config) {
  return loadChainKeys(config.chain_key_file, false);
}

Status readRows(const HistoryConfig& config, const HistoryCommandOptions& o, const RowSink& sink) {
  if (!o.input.empty()) return readJsonlRows(o.input, o.since_us, sink);
  return readStoredRows(config, o.since_us, sink);
}

}  // namespace

int verifyHistoryCommand(const HistoryConfig& config, const HistoryCommandOptions& options,
                         std::ostream& out, std::ostream& err) {
  auto keys = keysFor(config);
  if (!keys.ok()) {
    err << "pgwarden history verify: " << keys.error() << "\n";
    return 2;
  }
  ChainVerifier verifier(*keys);
  const Status read = readRows(config, options, [&](const StoredRow& r) { verifier.add(r); });
  const ChainVerdict v = verifier.finish();
  const std::string source = options.input.empty() ? config.store + " store" : options.input;
  if (!read.ok()) {
    err << "pgwarden history verify: cannot read the " << source << ": " << read.error() << "\n";
    return 1;
  }
  if (v.problem != ChainProblem::kNone) {
    out << "pgwarden history verify: " << chainProblemName(v.problem) << ": "
        << (options.input.empty() && config.store != "jsonl" ? "record id " : "line ") << v.id
        << " (instance " << v.instance << ", chain_seq " << v.seq << "): " << v.detail << "\n";
    return 1;
  }
  out << "pgwarden history verify: ok: " << v.records << " records in the " << source << "\n";
  for (const auto& [instance, c] : v.chains) {
    out << "  instance " << instance << ": chain_seq " << c.first << ".." << c.last << ", keys "
        << c.keys;
    if (c.first > 1) {
      out << " (the walk starts at chain_seq " << c.first
          << ": what came before is not here: retention, --since, a rotated file, or deleted; "
             "compare with the checkpoints in the log)";
    }
    out << "\n";
  }
  if (v.unchained > 0) {
    out << "  " << v.unchained
        << " records carry no chain fields (written before the chain began)\n";
  }
  return 0;
}

int exportHistoryCommand(const HistoryConfig& config, const HistoryCommandOptions& options,
                         std::ostream& out, std::ostream& err) {
  std::ofstream file;
  if (!options.output.empty()) {
    file.open(options.output, std::ios::binary | std::ios::trunc);
    if (!file) {
      err << "pgwarden history export: cannot write " << options.output << "\n";
      return 1;
    }
  }
  std::ostream& sink = options.output.empty() ? out : file;
  uint64_t n = 0;
  const Status read = readRows(config, options, [&](const StoredRow& r) {
    if (r.unreadable) return;
    sink << jsonLine(r) << "\n";
    ++n;
  });
  sink.flush();
  if (!read.ok()) {
    err << "pgwarden history export: cannot read the " << config.store << " store: " << read.error()
        << "\n";
    return 1;
  }
  if (!sink) {
    err << "pgwarden history export: writing failed\n";
    return 1;
  }
  if (!options.output.empty()) err << "pgwarden history export: " << n << " records\n";
  return 0;
}

int rotateChainKeyCommand(const HistoryConfig& config, std::ostream& out, std::ostream& err) {
  auto id = rotateChainKey(config.chain_key_file);
  if (!id.ok()) {
    err << "pgwarden history rotate-key: " << id.error() << "\n";
    return 1;
  }
  out << "pgwarden history rotate-key: new key " << *id << " in " << config.chain_key_file
      << "; records use it after the next start (older keys stay in the file for verify)\n";
  return 0;
}

}  // namespace pgwarden::history
