// Catalog statistics for the guards (estimated rows, indexed columns), per server database:
// loaded at start-up and refreshed on a timer over pgwarden's own server connection, driven by
// loop 0 like any session (never a blocking libpq call); the daemon publishes the snapshots to
// the other loops. A failed refresh is logged and
// retried; guards keep the last good snapshot meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pool/pool.h"
#include "pool/server_conn.h"
#include "guards/policy.h"

namespace pgwarden::daemon {

class Daemon;

class CatalogRefresher {
 public:
  explicit CatalogRefresher(Daemon& daemon);
  ~CatalogRefresher();

  // The snapshot for a server database, or null before the first successful load.
  std::shared_ptr<const analysis::TableStatsSnapshot> get(const std::string& server_db) const;
  // Each server database with a snapshot and that snapshot's age in milliseconds (metrics).
  void forEachAge(const std::function<void(const std::string&, uint64_t)>& fn) const;
  // Starts keeping statistics for a server database (no-op when already kept, or when the
  // bound on databases is reached).
  void watch(const std::string& server_db);
  // The server databases whose statistics are kept.
  std::vector<std::string> databases() const;
  // True while the first load for `server_db` is still under way (statements evaluated now
  // would miss the table sizes).
  bool loading(const std::string& server_db) const;
  // Calls ClientSession::onStatsReady for session `session_id` when that first load ends,
  // successfully or not.
  void notifyWhenLoaded(const std::string& server_db, uint64_t session_id);
  // Starts the refreshes that are due.
  void tick(uint64_t now_ms);
  // Refreshes every database's statistics now (SIGHUP), not at its next periodic turn.
  void refreshNow();
  // Lets go of server connections (shutdown).
  void stop();

  static constexpr size_t kMaxDatabases = 64;
  static constexpr size_t kMaxRows = 500000;
  static constexpr uint64_t kRetryMs = 30000;
  static constexpr uint64_t kMaxRetryMs = 30 * 60 * 1000;  // the longest pause between retries

 private:
  class Job;
  Daemon& daemon_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  bool stopped_ = false;
};

}  // namespace pgwarden::daemon
