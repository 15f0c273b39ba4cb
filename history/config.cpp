// Parses the `history:` config section into a HistoryConfig. Strict: unknown keys, bad values and
// combinations that cannot work are errors with line and dotted key, raised at load time.
#include <algorithm>
#include <limits>
#include <string>

#include "common/config_util.h"
#include "history/recorder.h"

namespace pgwarden::history {

namespace {

constexpr const char* kPath = "history";
constexpr uint64_t kMaxSpoolSize = 64ull << 30;

std::string dirOf(const std::string& default_path) {
  const size_t slash = default_path.rfind('/');
  return slash == std::string::npos ? std::string(".") : default_path.substr(0, slash);
}

// The postgres store has no file of its own: its spool goes where the sqlite file would.
std::string defaultPostgresSpool(const std::string& default_path) {
  return dirOf(default_path) + "/history.spool";
}

}  // namespace

HistoryConfig parseHistoryConfig(const YAML::Node& node, const std::string& default_path) {
  HistoryConfig c;
  c.path = default_path;
  // Beside the default sqlite file: in daemon.state_dir, like the salt key.
  c.chain_key_file = dirOf(default_path) + "/history_chain.key";
  if (!node.IsDefined() || node.IsNull()) return c;
  config::checkKeys(
      node, kPath,
      {"store", "path", "dsn", "dsn_file", "queue_size", "batch_size", "flush_interval",
       "max_sql_bytes", "redact_literals", "max_age", "max_rows", "instance_id", "durability",
       "spool_path", "spool_size", "chain", "chain_key_file", "writer_priority"});

  c.store = config::getString(node, kPath, "store", c.store);
  if (c.store != "sqlite" && c.store != "postgres" && c.store != "jsonl" && c.store != "off") {
    config::fail(node["store"], "history.store",
                 "unknown store '" + c.store + "' (expected sqlite, postgres, jsonl or off)");
  }

  const auto path = config::getOptionalString(node, kPath, "path");
  if (path) {
    if (path->empty()) config::fail(node["path"], "history.path", "must not be empty");
    c.path = *path;
    c.path_line = config::lineOf(node["path"]);
  }
  if (c.store == "jsonl" && !path) {
    config::fail(node, "history.path", "the jsonl store needs history.path (the file to append to)");
  }
  if (c.store == "postgres" && path) {
    config::fail(node["path"], "history.path",
                 "the postgres store takes history.dsn or history.dsn_file, not a path");
  }

  const auto dsn = config::getOptionalString(node, kPath, "dsn");
  const auto dsn_file = config::getOptionalString(node, kPath, "dsn_file");
  if (dsn && dsn_file) {
    config::fail(node["dsn_file"], "history.dsn_file", "give history.dsn or history.dsn_file, not both");
  }
  if ((dsn || dsn_file) && c.store != "postgres") {
    const char* key = dsn ? "dsn" : "dsn_file";
    config::fail(node[key], std::string("history.") + key,
                 "only the postgres store uses a connection string (store is " + c.store + ")");
  }
  if (dsn) {
    c.dsn = *dsn;
    config::requireConnectionString(node["dsn"], "history.dsn", c.dsn);
  }
  if (dsn_file) {
    c.dsn_file = *dsn_file;
    c.dsn = config::readSecretFile(node["dsn_file"], "history.dsn_file", *dsn_file);
    if (c.dsn.empty()) config::fail(node["dsn_file"], "history.dsn_file", "the file is empty");
    config::requireConnectionString(node["dsn_file"], "history.dsn_file", c.dsn);
  }
  if (c.store == "postgres" && c.dsn.empty()) {
    config::fail(node, "history.dsn", "the postgres store needs history.dsn or history.dsn_file");
  }

  c.queue_size = static_cast<size_t>(
      config::getInt(node, kPath, "queue_size", static_cast<int64_t>(c.queue_size), 1, 10'000'000));
  c.batch_size = static_cast<size_t>(
      config::getInt(node, kPath, "batch_size", static_cast<int64_t>(c.batch_size), 1, 100'000));
  c.flush_interval = config::getDuration(node, kPath, "flush_interval", c.flush_interval);
  if (c.flush_interval.count() <= 0) {
    config::fail(node["flush_interval"], "history.flush_interval", "must be greater than 0");
  }
  c.max_sql_bytes = config::getSize(node, kPath, "max_sql_bytes", c.max_sql_bytes);
  if (c.max_sql_bytes < 64 || c.max_sql_bytes > (16u << 20)) {
    config::fail(node["max_sql_bytes"], "history.max_sql_bytes",
                 "must be between 64 bytes and 16MiB");
  }
  c.redact_literals = config::getBool(node, kPath, "redact_literals", c.redact_literals);
  c.max_age = config::getDuration(node, kPath, "max_age", c.max_age);
  c.max_rows = config::getInt(node, kPath, "max_rows", c.max_rows, 0,
                              std::numeric_limits<int64_t>::max());
  if ((c.max_age.count() > 0 || c.max_rows > 0) && (c.store == "jsonl" || c.store == "off")) {
    const char* key = c.max_age.count() > 0 ? "max_age" : "max_rows";
    config::fail(node[key], std::string("history.") + key,
                 "retention applies to the sqlite and postgres stores (rotate a jsonl file with "
                 "logrotate)");
  }
  c.instance_id = config::getString(node, kPath, "instance_id", c.instance_id);
  c.chain_key_file = config::getString(node, kPath, "chain_key_file", c.chain_key_file);
  if (c.chain_key_file.empty()) {
    config::fail(node["chain_key_file"], "history.chain_key_file", "must not be empty");
  }
  c.chain = config::getBool(node, kPath, "chain", c.chain);

  const std::string durability = config::getString(node, kPath, "durability", "process");
  if (durability == "off") {
    c.durability = Durability::kOff;
  } else if (durability != "process") {
    config::fail(node["durability"], "history.durability",
                 "unknown durability '" + durability + "' (expected process or off)");
  }
  if (const auto spool = config::getOptionalString(node, kPath, "spool_path")) {
    if (spool->empty()) config::fail(node["spool_path"], "history.spool_path", "must not be empty");
    c.spool_path = *spool;
  } else if (c.store == "postgres") {
    c.spool_path = defaultPostgresSpool(default_path);
  }
  // Unset, it grows with a max_sql_bytes whose records the default would not hold.
  const uint64_t min_spool = minSpoolSize(c.max_sql_bytes);
  c.spool_size = config::getSize(node, kPath, "spool_size", std::max(c.spool_size, min_spool));
  if (c.spool_size < min_spool || c.spool_size > kMaxSpoolSize) {
    config::fail(node["spool_size"], "history.spool_size",
                 "must be between " + std::to_string(min_spool >> 20) +
                     "MiB (four of the largest records max_sql_bytes allows) and " +
                     std::to_string(kMaxSpoolSize >> 30) + "GiB");
  }
  const std::string priority = config::getString(node, kPath, "writer_priority", "background");
  if (priority == "normal") {
    c.background_writer = false;
  } else if (priority != "background") {
    config::fail(node["writer_priority"], "history.writer_priority",
                 "unknown writer_priority '" + priority + "' (expected background or normal)");
  }
  return c;
}

std::string spoolPath(const HistoryConfig& config) {
  if (config.store == "off" || config.durability == Durability::kOff) return {};
  if (!config.spool_path.empty()) return config.spool_path;
  return config.path.empty() ? std::string() : config.path + ".spool";
}

}  // namespace pgwarden::history
