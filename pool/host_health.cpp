// The upstream hosts' health checker: a thread of its own (libpq's calls block), a lock around
// the answers, and the choice of a replica for a read made from them on the loops.
#include "pool/host_health.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "common/log_text.h"
#include "net/tls.h"

namespace pgwarden::daemon {

namespace {

// Replay lag: nothing when everything received is replayed (an idle primary writes nothing, so a
// replica that is caught up would otherwise seem to fall behind), else the age of the last
// transaction replayed; NULL, unknown, when it is behind and has replayed no transaction since
// it started (a fresh replica whose replay is paused is not "0 behind").
constexpr const char* kCheckSql =
    "SELECT pg_is_in_recovery(), CASE WHEN NOT pg_is_in_recovery() THEN 0 "
    "WHEN pg_last_wal_receive_lsn() IS NOT NULL AND "
    "pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0 "
    "ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) * 1000 END";

std::string oneLine(const char* text) {
  std::string s = text ? text : "";
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

HostProbe probeWithLibpq(const UpstreamHost& host, const UpstreamConfig& up) {
  HostProbe out;
  const std::string port = std::to_string(host.port);
  const auto secs = std::max<int64_t>(
      2, std::chrono::duration_cast<std::chrono::seconds>(up.connect_timeout).count());
  const std::string timeout = std::to_string(secs);
  const char* keys[] = {"host",     "port",        "user",
                        "password", "dbname",      "connect_timeout",
                        "sslmode",  "sslrootcert", "application_name",
                        nullptr};
  const char* values[] = {host.host.c_str(),
                          port.c_str(),
                          up.user.c_str(),
                          up.password.empty() ? nullptr : up.password.c_str(),
                          up.health_check_database.c_str(),
                          timeout.c_str(),
                          upstreamSslModeName(up.tls.sslmode),
                          up.tls.sslrootcert.empty() ? nullptr : up.tls.sslrootcert.c_str(),
                          "pgwarden health check",
                          nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, 0);
  if (PQstatus(conn) != CONNECTION_OK) {
    out.error = oneLine(PQerrorMessage(conn));
    PQfinish(conn);
    return out;
  }
  PGresult* res = PQexec(conn, kCheckSql);
  if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
    out.answered = true;
    out.in_recovery = std::string_view(PQgetvalue(res, 0, 0)) == "t";
    // Unknown lag (-1) never qualifies a replica for reads.
    out.lag_ms = PQgetisnull(res, 0, 1) ? -1 : std::llround(std::strtod(PQgetvalue(res, 0, 1), nullptr));
  } else {
    out.error = oneLine(PQerrorMessage(conn));
  }
  PQclear(res);
  PQfinish(conn);
  return out;
}

HostHealth::HostHealth(const UpstreamConfig& up, Probe probe)
    : probe_(probe ? std::move(probe) : Probe(probeWithLibpq)), up_(up) {
  hosts_.push_back({up.host, up.port});
  for (const auto& r : up.replicas) hosts_.push_back(r);
  states_.resize(hosts_.size());
}

HostHealth::~HostHealth() { stop(); }

void HostHealth::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void HostHealth::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HostHealth::setUpstream(const UpstreamConfig& up) {
  std::lock_guard<std::mutex> lock(mu_);
  up_ = up;
}

void HostHealth::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    checkAll();
    lock.lock();
    wake_.wait_for(lock, up_.health_check_interval, [this] { return stopping_; });
  }
}

void HostHealth::checkAll() {
  UpstreamConfig up;
  {
    std::lock_guard<std::mutex> lock(mu_);
    up = up_;
  }
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const HostProbe p = probe_(hosts_[i], up);
    std::lock_guard<std::mutex> lock(mu_);
    State& s = states_[i];
    const bool was_up = s.answered && !s.marked_down;
    ++s.checks;
    s.answered = p.answered;
    s.in_recovery = p.in_recovery;
    s.marked_down = false;
    if (p.answered) {
      s.lag_ms = i == 0 ? -1 : p.lag_ms;
      s.last_error.clear();
    } else {
      ++s.failures;
      s.last_error = p.error;
    }
    if (was_up != p.answered && s.checks > 1) {
      if (p.answered) {
        spdlog::warn("upstream {} {} answers again: back in the rotation",
                     i == 0 ? "primary" : "replica", hosts_[i].name());
      } else {
        spdlog::warn("upstream {} {} does not answer: out of the rotation: {}",
                     i == 0 ? "primary" : "replica", hosts_[i].name(), logsafe(p.error, 200));
      }
    }
  }
}

bool HostHealth::eligible(const State& s) const {
  return s.answered && !s.marked_down && s.in_recovery && s.lag_ms >= 0 &&
         s.lag_ms < up_.max_replica_lag.count();
}

size_t HostHealth::pickForRead() {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t replicas = hosts_.size() - 1;
  for (size_t k = 0; k < replicas; ++k) {
    const size_t i = 1 + (next_ + k) % replicas;
    if (eligible(states_[i])) {
      next_ = (next_ + k + 1) % replicas;
      return i;
    }
  }
  return 0;
}

void HostHealth::markDown(size_t i, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (i >= states_.size() || states_[i].marked_down) return;
  states_[i].marked_down = true;
  ++states_[i].failures;
  states_[i].last_error = why;
  spdlog::warn("upstream {} {} does not answer: out of the rotation until a check finds it back",
               i == 0 ? "primary" : "replica", hosts_[i].name());
}

std::vector<HostStatus> HostHealth::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<HostStatus> out;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    const State& s = states_[i];
    out.push_back({hosts_[i].name(), i > 0, s.answered && !s.marked_down, s.lag_ms, s.checks,
                   s.failures, s.last_error});
  }
  return out;
}

}  // namespace pgwarden::daemon
