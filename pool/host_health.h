// The upstream hosts' health, checked off the loops: a thread per host (the primary and each read
// replica) asks it once per upstream.health_check_interval, on a connection kept open between
// checks, whether it answers, whether it is in recovery and how far its replay lags, and the
// loops read the answers without waiting. A host that hangs delays only its own checks (each
// bounded by upstream.connect_timeout). A loop that finds a host not answering takes it out at
// once (markDown); the next check that succeeds puts it back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/net_config.h"

struct pg_conn;  // libpq's PGconn

namespace pgwarden::pool {

// What one check of one host found.
struct HostProbe {
  bool answered = false;
  bool in_recovery = false;
  int64_t lag_ms = 0;  // replay lag (0 when everything received is replayed)
  std::string error;   // why it did not answer ("" when it did)
};

// One host as the console and the metrics show it.
struct HostStatus {
  std::string name;  // host:port
  bool replica = false;
  bool up = false;      // in the rotation: answered the last check and no loop took it out
  int64_t lag_ms = -1;  // -1: not known yet (or not a replica)
  uint64_t checks = 0;
  uint64_t failures = 0;  // checks that found it not answering, plus markDown calls
  std::string last_error;
};

// One host's check connection, kept open between checks: a check is one query on it, and a new
// connection is opened only when there is none, the one kept failed (then once, in the same
// check), or the settings it was opened with changed. Blocking: used from one checker thread.
class CheckConnection {
 public:
  CheckConnection() = default;
  ~CheckConnection();
  CheckConnection(const CheckConnection&) = delete;
  CheckConnection& operator=(const CheckConnection&) = delete;

  // Connects within upstream.connect_timeout (at least 2 s as libpq counts it), and waits as
  // long for the answer to the query; no answer by then is a failed check (and a closed
  // connection), so a host that hangs cannot hold its checker for longer.
  HostProbe check(const net::UpstreamHost& host, const net::UpstreamConfig& up);
  // Connections opened so far (one while the kept one keeps answering).
  uint64_t connects() const { return connects_; }

 private:
  bool open(const net::UpstreamHost& host, const net::UpstreamConfig& up, std::string* error);
  bool ask(int timeout_ms, HostProbe* out);
  void close();

  pg_conn* conn_ = nullptr;
  std::string opened_with_;  // the settings conn_ was opened with
  bool timed_out_ = false;   // the last ask() had no answer within its bound
  uint64_t connects_ = 0;
};

class HostHealth {
 public:
  // Checks one host (blocking: runs on that host's checker thread). The default keeps a
  // CheckConnection per host.
  using Probe =
      std::function<HostProbe(const net::UpstreamHost& host, const net::UpstreamConfig& up)>;

  // Host 0 is the primary (upstream.host), 1.. the replicas, fixed for the process's life.
  explicit HostHealth(const net::UpstreamConfig& up, Probe probe = {});
  ~HostHealth();
  HostHealth(const HostHealth&) = delete;
  HostHealth& operator=(const HostHealth&) = delete;

  // Starts a checker thread per host; stop() ends them (also the destructor's job), within a
  // check's bound for a thread waiting on its host.
  void start();
  void stop();
  // A reload: new credentials, interval and max_replica_lag (the list of hosts stays).
  void setUpstream(const net::UpstreamConfig& up);

  size_t size() const { return hosts_.size(); }
  const net::UpstreamHost& host(size_t i) const { return hosts_[i]; }
  // What history and the statements metric call host `i`: "primary", or a replica's host:port.
  // Held for the process's life, so a view of it may be kept.
  const std::string& label(size_t i) const { return labels_[i]; }
  bool hasReplicas() const { return hosts_.size() > 1; }

  // The host a read of a group that allows replicas goes to: the next replica in turn that is up,
  // in recovery and lags less than max_replica_lag; 0 (the primary) when there is none.
  size_t pickForRead();
  // A loop could not reach host `i`: out of the rotation until a check finds it answering.
  void markDown(size_t i, const std::string& why);
  // Runs one round of checks, host after host, on the calling thread (tests; not while started).
  void checkAll();
  std::vector<HostStatus> snapshot() const;

 private:
  struct State {
    bool answered = false;
    bool in_recovery = false;
    bool marked_down = false;  // by a loop, since the last check
    int64_t lag_ms = -1;
    uint64_t checks = 0;
    uint64_t failures = 0;
    std::string last_error;
  };
  bool eligible(const State& s) const;
  void run(size_t i);
  void checkOne(size_t i, const net::UpstreamConfig& up);

  std::vector<net::UpstreamHost> hosts_;
  std::vector<std::string> labels_;
  Probe probe_;  // empty: conns_
  // Host i's kept connection, used by host i's checker thread alone (or by checkAll).
  std::vector<std::unique_ptr<CheckConnection>> conns_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  net::UpstreamConfig up_;     // under mu_
  std::vector<State> states_;  // under mu_
  size_t next_ = 0;            // round robin over replicas, under mu_
  bool stopping_ = false;      // under mu_
  std::vector<std::thread> threads_;
};

// A one-off libpq check on a connection of its own (CheckConnection::check, then closed): connects
// to upstream.health_check_database as upstream.user and reads pg_is_in_recovery() and the lag.
HostProbe probeWithLibpq(const net::UpstreamHost& host, const net::UpstreamConfig& up);

}  // namespace pgwarden::pool
