// The upstream hosts' health, checked off the loops: one thread asks every host (the primary and
// each read replica) once per upstream.health_check_interval whether it answers, whether it is
// in recovery and how far its replay lags, and the loops read the answers without waiting. A
// loop that finds a host not answering takes it out at once (markDown); the next check that
// succeeds puts it back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/net_config.h"

namespace pgwarden::daemon {

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

class HostHealth {
 public:
  // Checks one host (blocking: runs on the checker thread). The default uses libpq.
  using Probe = std::function<HostProbe(const UpstreamHost& host, const UpstreamConfig& up)>;

  // Host 0 is the primary (upstream.host), 1.. the replicas, fixed for the process's life.
  explicit HostHealth(const UpstreamConfig& up, Probe probe = {});
  ~HostHealth();
  HostHealth(const HostHealth&) = delete;
  HostHealth& operator=(const HostHealth&) = delete;

  // Starts the checker thread; stop() ends it (also the destructor's job).
  void start();
  void stop();
  // A reload: new credentials, interval and max_replica_lag (the list of hosts stays).
  void setUpstream(const UpstreamConfig& up);

  size_t size() const { return hosts_.size(); }
  const UpstreamHost& host(size_t i) const { return hosts_[i]; }
  bool hasReplicas() const { return hosts_.size() > 1; }

  // The host a read of a group that allows replicas goes to: the next replica in turn that is up,
  // in recovery and lags less than max_replica_lag; 0 (the primary) when there is none.
  size_t pickForRead();
  // A loop could not reach host `i`: out of the rotation until a check finds it answering.
  void markDown(size_t i, const std::string& why);
  // Runs one round of checks on the calling thread (the checker's body; tests call it).
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
  void run();

  std::vector<UpstreamHost> hosts_;
  Probe probe_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  UpstreamConfig up_;          // under mu_
  std::vector<State> states_;  // under mu_
  size_t next_ = 0;            // round robin over replicas, under mu_
  bool stopping_ = false;      // under mu_
  std::thread thread_;
};

// The libpq check: connects (upstream.connect_timeout, at least 2 s as libpq counts it) to
// upstream.health_check_database as upstream.user and reads pg_is_in_recovery() and the replay lag.
HostProbe probeWithLibpq(const UpstreamHost& host, const UpstreamConfig& up);

}  // namespace pgwarden::daemon
