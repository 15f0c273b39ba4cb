// history: config section parsing: defaults, every key, and errors that name line and key.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>

#include "common/config_util.h"
#include "history/recorder.h"
#include "test_util.h"

namespace pgwarden::history {
namespace {

HistoryConfig parse(const std::string& yaml) {
  const YAML::Node root = YAML::Load(yaml);
  return parseHistoryConfig(root["history"], "/var/lib/pgwarden/history.db");
}

// Parses and expects a ConfigError; returns it for the caller to check line and key.
config::ConfigError parseError(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const config::ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << yaml;
  return config::ConfigError(0, "", "");
}

TEST(HistoryConfig, AbsentSectionGivesDefaults) {
  const HistoryConfig c = parse("listen: {}\n");
  EXPECT_EQ(c.store, "sqlite");
  EXPECT_EQ(c.path, "/var/lib/pgwarden/history.db");
  EXPECT_EQ(c.queue_size, 65536u);
  EXPECT_EQ(c.batch_size, 512u);
  EXPECT_EQ(c.flush_interval, std::chrono::milliseconds(200));
  EXPECT_EQ(c.max_sql_bytes, 4096u);
  EXPECT_FALSE(c.redact_literals);
  EXPECT_EQ(c.max_age.count(), 0);
  EXPECT_EQ(c.max_rows, 0);
  EXPECT_EQ(c.instance_id, "");
  EXPECT_EQ(c.durability, Durability::kProcess);
  EXPECT_EQ(spoolPath(c), "/var/lib/pgwarden/history.db.spool");
  EXPECT_EQ(c.spool_size, 64u << 20);
  EXPECT_TRUE(c.background_writer);
}

TEST(HistoryConfig, EveryKey) {
  const HistoryConfig c = parse(
      "history:\n"
      "  store: sqlite\n"
      "  path: /tmp/h.db\n"
      "  queue_size: 1000\n"
      "  batch_size: 100\n"
      "  flush_interval: 50ms\n"
      "  max_sql_bytes: 8KiB\n"
      "  redact_literals: true\n"
      "  max_age: 7d\n"
      "  max_rows: 1000000\n"
      "  instance_id: pgw-a\n"
      "  durability: off\n"
      "  spool_path: /tmp/h.spool\n"
      "  spool_size: 16MiB\n"
      "  writer_priority: normal\n");
  EXPECT_EQ(c.path, "/tmp/h.db");
  EXPECT_EQ(c.queue_size, 1000u);
  EXPECT_EQ(c.batch_size, 100u);
  EXPECT_EQ(c.flush_interval, std::chrono::milliseconds(50));
  EXPECT_EQ(c.max_sql_bytes, 8192u);
  EXPECT_TRUE(c.redact_literals);
  EXPECT_EQ(c.max_age, std::chrono::hours(24 * 7));
  EXPECT_EQ(c.max_rows, 1000000);
  EXPECT_EQ(c.instance_id, "pgw-a");
  EXPECT_EQ(c.durability, Durability::kOff);
  EXPECT_EQ(c.spool_path, "/tmp/h.spool");
  EXPECT_EQ(c.spool_size, 16u << 20);
  EXPECT_EQ(spoolPath(c), "");  // durability off: no spool
  EXPECT_FALSE(c.background_writer);
  EXPECT_TRUE(parse("history:\n  writer_priority: background\n").background_writer);
}

TEST(HistoryConfig, SpoolPathDefaultsBesideTheStore) {
  EXPECT_EQ(spoolPath(parse("history:\n  store: jsonl\n  path: /srv/h.jsonl\n")),
            "/srv/h.jsonl.spool");
  // The postgres store has no file: its spool goes to the default state directory.
  EXPECT_EQ(spoolPath(parse("history:\n  store: postgres\n  dsn: host=db\n")),
            "/var/lib/pgwarden/history.spool");
  EXPECT_EQ(spoolPath(parse("history:\n  store: off\n")), "");
  // A larger max_sql_bytes needs a larger spool: four of the largest records.
  EXPECT_EQ(minSpoolSize(4096), 5u << 20);
  EXPECT_EQ(minSpoolSize(16u << 20), 129u << 20);
  EXPECT_EQ(parse("history:\n  max_sql_bytes: 4MiB\n  spool_size: 33MiB\n").spool_size,
            33u << 20);
  EXPECT_EQ(parse("history:\n  max_sql_bytes: 16MiB\n").spool_size, 129u << 20);
}

TEST(HistoryConfig, PostgresWithDsnAndDsnFile) {
  HistoryConfig c = parse("history:\n  store: postgres\n  dsn: host=db dbname=audit\n");
  EXPECT_EQ(c.store, "postgres");
  EXPECT_EQ(c.dsn, "host=db dbname=audit");

  test::TempDir dir;
  const std::string file = dir.file("dsn");
  std::ofstream(file) << "host=db user=hist password=s3cret\n";
  c = parse("history:\n  store: postgres\n  dsn_file: " + file + "\n");
  EXPECT_EQ(c.dsn, "host=db user=hist password=s3cret");
  EXPECT_EQ(c.dsn_file, file);
}

TEST(HistoryConfig, UnknownKeyNamesLineAndKey) {
  const auto e = parseError(
      "listen: {}\n"
      "history:\n"
      "  store: sqlite\n"
      "  queue_sise: 10\n");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.key(), "history.queue_sise");
  EXPECT_NE(std::string(e.what()).find("queue_size"), std::string::npos)
      << "the message lists the allowed keys: " << e.what();
}

TEST(HistoryConfig, BadValuesNameTheirKey) {
  struct Case {
    const char* yaml;
    int line;
    const char* key;
  };
  const Case cases[] = {
      {"history:\n  store: mysql\n", 2, "history.store"},
      {"history:\n  queue_size: 0\n", 2, "history.queue_size"},
      {"history:\n  queue_size: lots\n", 2, "history.queue_size"},
      {"history:\n  batch_size: -1\n", 2, "history.batch_size"},
      {"history:\n  flush_interval: soon\n", 2, "history.flush_interval"},
      {"history:\n  flush_interval: 0\n", 2, "history.flush_interval"},
      {"history:\n  max_sql_bytes: 10\n", 2, "history.max_sql_bytes"},
      {"history:\n  max_sql_bytes: 4 bananas\n", 2, "history.max_sql_bytes"},
      {"history:\n  redact_literals: maybe\n", 2, "history.redact_literals"},
      {"history:\n  max_age: forever\n", 2, "history.max_age"},
      {"history:\n  max_rows: -5\n", 2, "history.max_rows"},
      {"history:\n  path: ''\n", 2, "history.path"},
      {"history:\n  store: postgres\n", 2, "history.dsn"},
      {"history:\n  store: postgres\n  dsn: a\n  dsn_file: b\n", 4, "history.dsn_file"},
      {"history:\n  store: sqlite\n  dsn: host=x\n", 3, "history.dsn"},
      {"history:\n  store: postgres\n  dsn: x\n  path: /tmp/a\n", 4, "history.path"},
      {"history:\n  store: jsonl\n", 2, "history.path"},
      {"history:\n  store: jsonl\n  path: /tmp/h.jsonl\n  max_rows: 10\n", 4, "history.max_rows"},
      {"history:\n  store: postgres\n  dsn_file: /nonexistent/dsn\n", 3, "history.dsn_file"},
      {"history: [1, 2]\n", 1, "history"},
      {"history:\n  durability: fsync\n", 2, "history.durability"},
      {"history:\n  spool_path: ''\n", 2, "history.spool_path"},
      {"history:\n  spool_size: 1MiB\n", 2, "history.spool_size"},
      {"history:\n  max_sql_bytes: 4MiB\n  spool_size: 32MiB\n", 3, "history.spool_size"},
      {"history:\n  writer_priority: high\n", 2, "history.writer_priority"},
  };
  for (const auto& c : cases) {
    const auto e = parseError(c.yaml);
    EXPECT_EQ(e.key(), c.key) << c.yaml;
    EXPECT_EQ(e.line(), c.line) << c.yaml;
  }
}

TEST(HistoryConfig, OffAndJsonl) {
  EXPECT_EQ(parse("history:\n  store: off\n").store, "off");
  const HistoryConfig c = parse("history:\n  store: jsonl\n  path: /tmp/h.jsonl\n");
  EXPECT_EQ(c.store, "jsonl");
  EXPECT_EQ(c.path, "/tmp/h.jsonl");
}

}  // namespace
}  // namespace pgwarden::history
