// Budget counters shared by several pgwarden processes: one row per (user, conversation) in a
// PostgreSQL table, counted with one atomic upsert per text (adding its statement count) on a
// separate libpq connection in pipeline mode that the loop drives without blocking
// (PQconnectStart/PQconnectPoll, PQsendQueryParams + PQpipelineSync, a uv_poll on PQsocket): up to
// kMaxInFlight upserts are on the wire at once, so admissions do not wait one round trip each.
// Every admit has a deadline; the ledger applies fail_behavior on failure.
#pragma once

#include <libpq-fe.h>
#include <uv.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "budgets/budget.h"

namespace pgwarden::budgets {

class BudgetStorePg final : public budgets::SharedBudgetStore {
 public:
  // The table every process shares (created if missing).
  static constexpr const char* kTable = "pgwarden_budget";
  // Operations waiting to be sent; beyond this an admit fails (fail_behavior) and a counter
  // update is dropped.
  static constexpr size_t kMaxQueued = 10000;
  // Operations sent and not yet answered. The server runs them one after the other, so more
  // only add to the wait of the last one; 64 covers a round trip's worth of admissions.
  static constexpr size_t kMaxInFlight = 64;

  BudgetStorePg(uv_loop_t* loop, budgets::BudgetStoreConfig config);
  ~BudgetStorePg() override;
  BudgetStorePg(const BudgetStorePg&) = delete;
  BudgetStorePg& operator=(const BudgetStorePg&) = delete;

  uint64_t admit(const budgets::BudgetKey& key, const budgets::BudgetLimits& limits,
                 int64_t statements, AdmitDone done) override;
  void cancel(uint64_t ticket) override;
  void addRows(const budgets::BudgetKey& key, const budgets::BudgetLimits& limits,
               int64_t rows) override;
  void addDenied(const budgets::BudgetKey& key, const budgets::BudgetLimits& limits,
                 int64_t statements) override;

  bool ready() const { return state_ == State::kReady; }
  size_t queued() const { return queue_.size(); }
  size_t inFlight() const { return in_flight_.size(); }
  uint64_t dropped() const { return dropped_; }

 private:
  enum class State { kDisconnected, kConnecting, kReady };
  struct Op {
    enum class Kind { kSetup, kAdmit, kAddRows, kAddDenied, kCleanup };
    Kind kind = Kind::kAdmit;
    std::vector<std::string> params;
    uint64_t ticket = 0;
    AdmitDone done;            // admit only; empty once answered or cancelled
    int64_t deadline_ms = 0;   // admit only: fail after this
    int64_t sent_ms = 0;       // in flight: when it went on the wire
    bool has_result = false;   // in flight: its result came (its sync point has not yet)
  };

  void setState(State to);
  void connect();
  void disconnect(const std::string& why);
  void watch(int events);
  void onPoll(int status, int events);
  void onTimer();
  void continueConnect();
  void sendQueued();
  bool send(Op& op);
  void flush();
  void readResults();
  void complete(Op& op, PGresult* result);
  void failAdmit(Op& op, const std::string& why);
  void expireAdmits();
  void armTimer();
  void enqueue(Op op);

  uv_loop_t* loop_;
  budgets::BudgetStoreConfig config_;
  State state_ = State::kDisconnected;
  PGconn* conn_ = nullptr;
  uv_poll_t* poll_ = nullptr;  // freed in its close callback
  int poll_fd_ = -1;
  bool want_write_ = false;    // libpq holds output the socket did not take yet
  uv_timer_t* timer_ = nullptr;
  std::deque<Op> queue_;       // waiting to be sent, at most kMaxQueued
  std::deque<Op> in_flight_;   // sent, answers come back in this order, at most kMaxInFlight
  int64_t connect_deadline_ms_ = 0;
  int64_t retry_at_ms_ = 0;
  int64_t next_cleanup_ms_ = 0;
  int64_t idle_expiry_ms_ = 3600 * 1000;
  uint64_t next_ticket_ = 1;
  uint64_t dropped_ = 0;
  std::string last_error_;
};

}  // namespace pgwarden::budgets
