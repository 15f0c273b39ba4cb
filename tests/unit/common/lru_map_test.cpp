#include "common/lru_map.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

namespace pgwarden {
namespace {

TEST(LruMap, FindsWhatWasInsertedAndEvictsTheLeastRecentlyUsed) {
  LruMap<int> m(3);
  m.insert("a", 1);
  m.insert("b", 2);
  m.insert("c", 3);
  ASSERT_NE(m.find("a"), nullptr);  // a is now the most recent: b is the oldest
  m.insert("d", 4);
  EXPECT_EQ(m.find("b"), nullptr);
  EXPECT_EQ(m.find("a")->value, 1);
  EXPECT_EQ(m.find("c")->value, 3);
  EXPECT_EQ(m.find("d")->value, 4);
  EXPECT_EQ(m.find("d")->key, "d");
  EXPECT_EQ(m.size(), 3u);
  m.clear();
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.find("a"), nullptr);
  m.insert("a", 5);
  EXPECT_EQ(m.find("a")->value, 5);
}

// A caller that hashed the key already (StringViewHash) passes the hash; entries put in one way
// are found the other.
TEST(LruMap, AHashFromTheCallerFindsWhatTheKeyFinds) {
  LruMap<int> m(64);
  const StringViewHash hash;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "key " + std::to_string(i);
    if (i % 2 == 0) {
      m.insert(key, i, hash(key));
    } else {
      m.insert(key, i);
    }
  }
  for (int i = 0; i < 40; ++i) {
    const std::string key = "key " + std::to_string(i);
    ASSERT_NE(m.find(key), nullptr) << key;
    ASSERT_NE(m.find(key, hash(key)), nullptr) << key;
    EXPECT_EQ(m.find(key, hash(key))->value, i);
  }
  EXPECT_EQ(m.find("key 40", hash("key 40")), nullptr);
}

TEST(LruMap, ZeroCapacityKeepsNothing) {
  LruMap<int> m(0);
  m.insert("a", 1);
  EXPECT_EQ(m.find("a"), nullptr);
  EXPECT_EQ(m.size(), 0u);
}

// Eviction shifts probed entries back into the hole it leaves: after any sequence of inserts,
// lookups and evictions, the map answers exactly as a plain model of an LRU cache does.
TEST(LruMap, AgreesWithAModelUnderChurn) {
  for (size_t capacity : {1u, 2u, 7u, 64u}) {
    LruMap<uint64_t> m(capacity);
    std::map<std::string, uint64_t> values;
    std::map<std::string, uint64_t> last_use;  // key -> tick of its last insert or hit
    std::mt19937_64 rng(capacity);
    uint64_t tick = 0;
    for (int step = 0; step < 20000; ++step) {
      const std::string key = "k" + std::to_string(rng() % (capacity * 3 + 1));
      ++tick;
      auto* e = m.find(key);
      const bool modelled = values.count(key) != 0;
      ASSERT_EQ(e != nullptr, modelled) << "capacity " << capacity << " step " << step;
      if (e != nullptr) {
        EXPECT_EQ(e->value, values[key]);
        last_use[key] = tick;
        continue;
      }
      if (values.size() >= capacity) {
        auto oldest = last_use.begin();
        for (auto it = last_use.begin(); it != last_use.end(); ++it) {
          if (it->second < oldest->second) oldest = it;
        }
        values.erase(oldest->first);
        last_use.erase(oldest);
      }
      m.insert(key, tick);
      values[key] = tick;
      last_use[key] = tick;
      ASSERT_EQ(m.size(), values.size());
    }
  }
}

}  // namespace
}  // namespace pgwarden
