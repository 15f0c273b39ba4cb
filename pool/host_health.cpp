// The upstream hosts' health checker: a thread per host (libpq's calls block) with the connection
// it keeps, a lock around the answers, and the choice of a replica for a read made on the loops.
#include "pool/host_health.h"

#include <libpq-fe.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "common/log_text.h"
#include "net/tls.h"

namespace pgwarden::pool {

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

int checkTimeoutMs(const net::UpstreamConfig& up) {
  return static_cast<int>(std::max<int64_t>(
      2000, std::chrono::duration_cast<std::chrono::milliseconds>(up.connect_timeout).count()));
}

}  // namespace

CheckConnection::~CheckConnection() { close(); }

void CheckConnection::close() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
}

bool CheckConnection::open(const net::UpstreamHost& host, const net::UpstreamConfig& up,
                           std::string* error) {
  close();
  const std::string port = std::to_string(host.port);
  const std::string timeout = std::to_string(checkTimeoutMs(up) / 1000);
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
                          net::upstreamSslModeName(up.tls.sslmode),
                          up.tls.sslrootcert.empty() ? nullptr : up.tls.sslrootcert.c_str(),
                          "pgwarden health check",
                          nullptr};
  ++connects_;
  conn_ = PQconnectdbParams(keys, values, 0);
  if (PQstatus(conn_) != CONNECTION_OK) {
    *error = oneLine(PQerrorMessage(conn_));
    close();
    return false;
  }
  return true;
}

// The check's query on conn_, waiting at most `timeout_ms` for its answer (a host that took the
// connection and then stopped answering would otherwise hold the thread until TCP gives up).
bool CheckConnection::ask(int timeout_ms, HostProbe* out) {
  timed_out_ = false;
  if (PQsendQuery(conn_, kCheckSql) != 1) {
    out->error = oneLine(PQerrorMessage(conn_));
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // Until libpq holds the next result (or the end of them) without blocking.
  const auto ready = [&]() {
    while (PQisBusy(conn_) != 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd pfd{PQsocket(conn_), POLLIN, 0};
      const int n = left > 0 ? ::poll(&pfd, 1, static_cast<int>(left)) : 0;
      if (n == 0) {
        timed_out_ = true;
        out->error = "no answer to the health check within " + std::to_string(timeout_ms) + " ms";
        return false;
      }
      if ((n < 0 && errno != EINTR) || (n > 0 && PQconsumeInput(conn_) != 1)) {
        out->error = oneLine(PQerrorMessage(conn_));
        return false;
      }
    }
    return true;
  };
  bool ok = false;
  for (;;) {
    if (!ready()) return false;
    PGresult* res = PQgetResult(conn_);
    if (res == nullptr) break;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
      ok = true;
      out->in_recovery = std::string_view(PQgetvalue(res, 0, 0)) == "t";
      // Unknown lag (-1) never qualifies a replica for reads.
      out->lag_ms =
          PQgetisnull(res, 0, 1) ? -1 : std::llround(std::strtod(PQgetvalue(res, 0, 1), nullptr));
    } else if (out->error.empty()) {
      out->error = oneLine(PQresultErrorMessage(res));
    }
    PQclear(res);
  }
  if (!ok && out->error.empty()) out->error = oneLine(PQerrorMessage(conn_));
  return ok;
}

HostProbe CheckConnection::check(const net::UpstreamHost& host, const net::UpstreamConfig& up) {
  HostProbe out;
  // A reload may change who logs in and how: the connection kept follows.
  const std::string with = host.name() + '\0' + up.user + '\0' + up.password + '\0' +
                           up.health_check_database + '\0' +
                           net::upstreamSslModeName(up.tls.sslmode) + '\0' + up.tls.sslrootcert;
  if (conn_ != nullptr && with != opened_with_) close();
  const int timeout_ms = checkTimeoutMs(up);
  if (conn_ != nullptr) {
    if (ask(timeout_ms, &out)) {
      out.answered = true;
      return out;
    }
    close();
    // A host that took the query and hangs is down for this check; one whose connection broke
    // (it restarted, a network cut) may answer a new one at once: that decides.
    if (timed_out_) return out;
    out = HostProbe{};
  }
  if (!open(host, up, &out.error)) return out;
  opened_with_ = with;
  if (ask(timeout_ms, &out)) {
    out.answered = true;
  } else {
    close();
  }
  return out;
}

HostProbe probeWithLibpq(const net::UpstreamHost& host, const net::UpstreamConfig& up) {
  CheckConnection c;
  return c.check(host, up);
}

HostHealth::HostHealth(const net::UpstreamConfig& up, Probe probe)
    : probe_(std::move(probe)), up_(up) {
  hosts_.push_back({up.host, up.port});
  for (const auto& r : up.replicas) hosts_.push_back(r);
  for (const auto& h : hosts_) labels_.push_back(labels_.empty() ? "primary" : h.name());
  states_.resize(hosts_.size());
  if (!probe_) {
    for (size_t i = 0; i < hosts_.size(); ++i)
      conns_.push_back(std::make_unique<CheckConnection>());
  }
}

HostHealth::~HostHealth() { stop(); }

void HostHealth::start() {
  if (!threads_.empty()) return;
  for (size_t i = 0; i < hosts_.size(); ++i) threads_.emplace_back([this, i] { run(i); });
}

void HostHealth::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void HostHealth::setUpstream(const net::UpstreamConfig& up) {
  std::lock_guard<std::mutex> lock(mu_);
  up_ = up;
}

void HostHealth::run(size_t i) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const net::UpstreamConfig up = up_;
    lock.unlock();
    checkOne(i, up);
    lock.lock();
    wake_.wait_for(lock, up_.health_check_interval, [this] { return stopping_; });
  }
}

void HostHealth::checkAll() {
  net::UpstreamConfig up;
  {
    std::lock_guard<std::mutex> lock(mu_);
    up = up_;
  }
  for (size_t i = 0; i < hosts_.size(); ++i) checkOne(i, up);
}

void HostHealth::checkOne(size_t i, const net::UpstreamConfig& up) {
  const HostProbe p = probe_ ? probe_(hosts_[i], up) : conns_[i]->check(hosts_[i], up);
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

}  // namespace pgwarden::pool
