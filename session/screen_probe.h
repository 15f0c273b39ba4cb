// The result screens' probe as a door runs it (screens/probe.h says what it asks): one query on
// pgwarden's own pooled connection to the statement's database, never on the statement's own
// connection (a client transaction would see its timeout as its own error) and never blocking
// the loop. The whole probe, the wait for the connection included, is bounded by its timeout;
// a probe that has not answered by then is given up and says nothing. One probe at a time.
#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <string>

#include "metrics/counters.h"
#include "pool/pool.h"
#include "pool/server_conn.h"
#include "screens/probe.h"

namespace pgwarden::session {

class ScreenProbe final : public pool::ServerWaiter, public pool::ServerLink {
 public:
  ScreenProbe(uv_loop_t* loop, pool::PoolManager& pools, metrics::Counters& counters)
      : loop_(loop), pools_(pools), counters_(counters) {}
  // Gives up a probe under way without calling back.
  ~ScreenProbe();
  ScreenProbe(const ScreenProbe&) = delete;
  ScreenProbe& operator=(const ScreenProbe&) = delete;

  // Asks `request` of `server_db` within `timeout_ms`: `into` is set to the answer, or to
  // kUnanswered on a timeout, an error or a lost connection, and then `done` is called, never
  // inside start(). False (nothing started, `into` kUnanswered) while another probe runs.
  [[nodiscard]] bool start(const std::string& server_db, const screens::ProbeRequest& request,
                           int timeout_ms, std::shared_ptr<screens::ProbeAnswer> into,
                           std::function<void()> done);
  // Gives up the probe under way, if any, without calling back.
  void cancel();
  bool busy() const { return into_ != nullptr; }

  // ServerWaiter
  void onServerReady(pool::ServerConnection& c) override;
  void onServerFailed(const std::string& sqlstate, const std::string& message) override;
  void onWaitMoved(pool::Pool& to) override { pool_ = &to; }
  // ServerLink
  void onServerMessage(pool::ServerConnection& s, const protocol::Frame& f) override;
  void onServerChunk(pool::ServerConnection&, char, std::string_view, bool, bool) override {
    failed_ = true;  // no count is that long
  }
  void onServerReadDone(pool::ServerConnection&) override {}
  void onServerWritten(pool::ServerConnection&) override {}
  void onServerLost(pool::ServerConnection& s, const std::string& why) override;

 private:
  static void onTimeout(uv_timer_t* t);
  // Lets go of the connection (`rfq_owed`: ReadyForQuery still due) and the wait.
  void stop(int rfq_owed);
  // Ends the probe with `rows` (-1: unanswered), counts it and calls back.
  void end(int64_t rows);

  uv_loop_t* loop_;
  pool::PoolManager& pools_;
  metrics::Counters& counters_;
  uv_timer_t* timer_ = nullptr;  // made on the first start(); freed in its close callback
  pool::Pool* pool_ = nullptr;   // waited on
  pool::ServerConnection* server_ = nullptr;
  std::string sql_;
  std::shared_ptr<screens::ProbeAnswer> into_;  // set while a probe runs
  std::function<void()> done_;
  int64_t rows_ = -1;
  bool failed_ = false;
};

}  // namespace pgwarden::session
