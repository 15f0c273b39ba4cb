// Transaction pooling's per-connection prepared statements: one server name per (types, text),
// shared by every client that sends it; least recently used evicted at capacity; forgotten on a
// failed Parse or a reset.
#include "pool/server_statements.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

namespace pgwarden::daemon {
namespace {

std::shared_ptr<const pool::PreparedText> text(const char* sql, std::vector<uint32_t> types = {}) {
  return std::make_shared<const pool::PreparedText>(sql, types);
}

TEST(ServerStatementsTest, SameTextAndTypesShareOneName) {
  pool::ServerStatements s(4);
  const auto a = text("select $1", {23});
  const auto b = text("select $1", {23});  // another client's identical statement
  const auto c = text("select $1", {25});  // other parameter types: another statement
  EXPECT_EQ(s.find(*a), nullptr);
  const std::string name = s.add(a, nullptr);
  ASSERT_NE(s.find(*b), nullptr);
  EXPECT_EQ(*s.find(*b), name);
  EXPECT_EQ(s.find(*c), nullptr);
  EXPECT_NE(s.add(c, nullptr), name);
  EXPECT_EQ(s.size(), 2u);
}

TEST(ServerStatementsTest, KeyKeepsTypesApartFromText) {
  // Types are fixed-width and end with a NUL: no (types, text) pair can collide with another.
  EXPECT_NE(pool::PreparedText("\x17x", {}).key, pool::PreparedText("x", {0x17}).key);
  EXPECT_NE(pool::PreparedText("a", {1, 2}).key, pool::PreparedText("a", {1}).key);
}

TEST(ServerStatementsTest, EvictsLeastRecentlyUsedAndNamesItForClosing) {
  pool::ServerStatements s(2);
  const auto a = text("a");
  const auto b = text("b");
  const auto c = text("c");
  const std::string name_a = s.add(a, nullptr);
  const std::string name_b = s.add(b, nullptr);
  ASSERT_NE(s.find(*a), nullptr);  // a is now the most recent
  std::string evicted;
  s.add(c, &evicted);
  EXPECT_EQ(evicted, name_b);
  EXPECT_EQ(s.find(*b), nullptr);
  EXPECT_NE(s.find(*a), nullptr);
  EXPECT_EQ(s.size(), 2u);
  // Names are never reused on a connection, so a late Close cannot hit a newer statement.
  std::set<std::string> names{name_a, name_b};
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(names.insert(s.add(text(std::to_string(i).c_str()), nullptr)).second);
  }
}

TEST(ServerStatementsTest, EraseAndClear) {
  pool::ServerStatements s(3);
  const auto a = text("a");
  s.add(a, nullptr);
  s.erase(*a);
  EXPECT_EQ(s.find(*a), nullptr);
  s.erase(*a);  // twice is harmless
  s.add(text("x"), nullptr);
  s.add(text("y"), nullptr);
  s.clear();
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.find(pool::PreparedText("x", {})), nullptr);
}

}  // namespace
}  // namespace pgwarden::daemon
