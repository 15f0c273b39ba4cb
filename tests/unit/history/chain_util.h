// Shared by the chain and verify tests: a store with the chain on, written by the real recorder.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "history/recorder.h"
#include "test_util.h"

namespace pgwarden::history::test {

inline HistoryConfig chainedConfig(const TempDir& dir, const std::string& store) {
  HistoryConfig c;
  c.store = store;
  c.path = dir.file(store == "sqlite" ? "history.db" : "history.jsonl");
  c.chain_key_file = dir.file("history_chain.key");
  c.batch_size = 8;
  c.flush_interval = std::chrono::milliseconds(10);
  return c;
}

// Records `from`..`from + n - 1` ("SELECT i", session i, one guard action) through a recorder
// that is then shut down: a start and a clean stop of the writer.
inline void writeChained(const HistoryConfig& c, int from, int n) {
  auto rec = makeRecorder(c);
  for (int i = from; i < from + n; ++i) {
    Record r = makeRecord(static_cast<uint64_t>(i), "SELECT " + std::to_string(i));
    r.guard_actions = R"([{"guard":"row_cap","action":"allow","code":"","reason":"ok"}])";
    ASSERT_TRUE(rec->submit(std::move(r)));
  }
  rec->shutdown(std::chrono::seconds(10));
  ASSERT_EQ(rec->stats().written, static_cast<uint64_t>(n));
}

}  // namespace pgwarden::history::test
