// The screens' probe on pgwarden's own pooled connection: wait for the connection, send the
// query, read its one count, give up at the deadline (session/screen_probe.h).
#include "session/screen_probe.h"

#include <spdlog/spdlog.h>

#include "common/log_text.h"

namespace pgwarden::session {

ScreenProbe::~ScreenProbe() {
  cancel();
  if (timer_) {
    timer_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(timer_),
             [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  }
}

bool ScreenProbe::start(const std::string& server_db, const screens::ProbeRequest& request,
                        int timeout_ms, std::shared_ptr<screens::ProbeAnswer> into,
                        std::function<void()> done) {
  into->comparison = request.comparison;
  into->rows = -1;
  if (busy() || timeout_ms <= 0) {
    into->state = screens::ProbeAnswer::State::kUnanswered;
    return false;
  }
  into->state = screens::ProbeAnswer::State::kAsked;
  into_ = std::move(into);
  done_ = std::move(done);
  sql_ = request.sql;
  rows_ = -1;
  failed_ = false;
  if (!timer_) {
    timer_ = new uv_timer_t;
    uv_timer_init(loop_, timer_);
  }
  timer_->data = this;
  uv_timer_start(timer_, &ScreenProbe::onTimeout, static_cast<uint64_t>(timeout_ms), 0);
  // pgwarden's own pool: never a client's connection, and never the statement's.
  pool_ = &pools_.pool(server_db, true);
  pool_->acquire(this);  // answers on a later loop turn
  return true;
}

void ScreenProbe::cancel() {
  if (!busy()) return;
  stop(1);
  into_->state = screens::ProbeAnswer::State::kUnanswered;
  into_.reset();
  done_ = nullptr;
}

void ScreenProbe::stop(int rfq_owed) {
  if (timer_) uv_timer_stop(timer_);
  if (pool_) pool_->cancelWait(this);
  pool_ = nullptr;
  if (server_) {
    pool::ServerConnection* s = server_;
    server_ = nullptr;
    s->release(rfq_owed, false);  // drained, then reset; the server's timeout ends the query
  }
}

void ScreenProbe::end(int64_t rows) {
  std::shared_ptr<screens::ProbeAnswer> into = std::move(into_);
  std::function<void()> done = std::move(done_);
  into_.reset();
  done_ = nullptr;
  if (!into) return;
  into->rows = rows;
  into->state =
      rows >= 0 ? screens::ProbeAnswer::State::kAnswered : screens::ProbeAnswer::State::kUnanswered;
  ++counters_.screen_probes[rows < 0 ? 2 : rows == 0 ? 0 : 1];
  if (done) done();  // last: the door may start its next probe from here
}

void ScreenProbe::onTimeout(uv_timer_t* t) {
  auto* self = static_cast<ScreenProbe*>(t->data);
  if (!self || !self->busy()) return;
  self->stop(1);
  self->end(-1);
}

void ScreenProbe::onServerReady(pool::ServerConnection& c) {
  pool_ = nullptr;
  if (!busy()) {
    c.release(0, false);
    return;
  }
  server_ = &c;
  c.attach(this);
  protocol::writeQuery(c.out(), sql_);
  if (c.flush() != 0) c.close("write failed");
}

void ScreenProbe::onServerFailed(const std::string&, const std::string& message) {
  pool_ = nullptr;
  if (!busy()) return;
  spdlog::debug("screen probe: no server connection: {}", logsafe(message, kLogMessageMaxBytes));
  stop(0);
  end(-1);
}

void ScreenProbe::onServerMessage(pool::ServerConnection& s, const protocol::Frame& f) {
  switch (f.type) {
    case protocol::be::kDataRow: {
      std::optional<std::string_view> cell;
      auto row = protocol::parseDataRowFirst(f.body, &cell);
      rows_ = row && row->columns == 1 ? screens::readProbeCount(cell) : -1;
      return;
    }
    case protocol::be::kErrorResponse: {
      auto e = protocol::parseErrorFields(f.body);
      spdlog::debug("screen probe failed: {}",
                    logsafe(e ? e->message() : std::string_view("error"), kLogMessageMaxBytes));
      failed_ = true;
      return;
    }
    case protocol::be::kReadyForQuery: {
      const int64_t rows = failed_ ? -1 : rows_;
      server_ = nullptr;
      if (timer_) uv_timer_stop(timer_);
      s.release(0, false);
      end(rows);
      return;
    }
    default:
      return;  // the SETs' CommandCompletes, RowDescription, notices
  }
}

void ScreenProbe::onServerLost(pool::ServerConnection&, const std::string&) {
  server_ = nullptr;
  if (!busy()) return;
  stop(0);
  end(-1);
}

}  // namespace pgwarden::session
