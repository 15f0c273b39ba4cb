// The shared budget table, driven from the loop: one libpq connection in pipeline mode, up to
// kMaxInFlight queries on the wire (each followed by its own sync point, so each is its own
// transaction and one failure aborts nothing else), a bounded queue behind them, a tick timer for
// deadlines and reconnects. An admit is a single INSERT ... ON CONFLICT DO UPDATE ... WHERE <text
// fits> RETURNING adding the text's statement count, so two processes counting the same
// conversation can never both take its last statements.
#include "budgets/budget_store_pg.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/log_text.h"

namespace pgwarden::budgets {

namespace {

constexpr uint64_t kTickMs = 20;
constexpr int64_t kReconnectMs = 1000;
constexpr int64_t kConnectTimeoutMs = 5000;
constexpr int64_t kCleanupEveryMs = 10 * 60 * 1000;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* kSetupSql =
    "CREATE TABLE IF NOT EXISTS pgwarden_budget ("
    " username text NOT NULL,"
    " conversation_id text NOT NULL,"
    " window_start timestamptz NOT NULL,"
    " last_seen timestamptz NOT NULL,"
    " statements bigint NOT NULL DEFAULT 0,"
    " denied bigint NOT NULL DEFAULT 0,"
    " row_count bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY (username, conversation_id))";

// $1 user, $2 conversation, $3 max_statements, $4 max_denied, $5 max_rows (0 = none),
// $6 window ms (0 = none), $7 idle expiry ms, $8 statements in the text (1 or more). A row past
// its window or idle expiry starts over. The text counts whole or not at all: a new row is only
// inserted when the text fits in the budget at all, an existing one only updated when it fits in
// what is left. Whatever happens, one row comes back: (admitted, counters), the counters as they
// stand after the upsert or, refused, as found (zero when the row is expired or missing).
#define PGW_EXPIRED                                                                              \
  "(($6::bigint > 0 AND b.window_start <= now() - $6::bigint * interval '1 millisecond') OR " \
  "b.last_seen <= now() - $7::bigint * interval '1 millisecond')"
#define PGW_FITS "($3::bigint = 0 OR $8::bigint <= $3::bigint)"
const char* kAdmitSql =
    "WITH up AS ("
    " INSERT INTO pgwarden_budget AS b"
    " (username, conversation_id, window_start, last_seen, statements, denied, row_count)"
    " SELECT $1, $2, now(), now(), $8::bigint, 0, 0 WHERE " PGW_FITS
    " ON CONFLICT (username, conversation_id) DO UPDATE SET"
    " window_start = CASE WHEN " PGW_EXPIRED " THEN now() ELSE b.window_start END,"
    " statements = CASE WHEN " PGW_EXPIRED " THEN $8::bigint ELSE b.statements + $8::bigint END,"
    " denied = CASE WHEN " PGW_EXPIRED " THEN 0 ELSE b.denied END,"
    " row_count = CASE WHEN " PGW_EXPIRED " THEN 0 ELSE b.row_count END,"
    " last_seen = now()"
    " WHERE " PGW_FITS " AND (" PGW_EXPIRED
    " OR (($3::bigint = 0 OR b.statements + $8::bigint <= $3::bigint)"
    " AND ($4::bigint = 0 OR b.denied < $4::bigint)"
    " AND ($5::bigint = 0 OR b.row_count < $5::bigint)))"
    " RETURNING statements, denied, row_count)"
    " SELECT true, statements, denied, row_count FROM up"
    " UNION ALL"
    " SELECT false,"
    " CASE WHEN b.username IS NULL OR " PGW_EXPIRED " THEN 0 ELSE b.statements END,"
    " CASE WHEN b.username IS NULL OR " PGW_EXPIRED " THEN 0 ELSE b.denied END,"
    " CASE WHEN b.username IS NULL OR " PGW_EXPIRED " THEN 0 ELSE b.row_count END"
    " FROM (SELECT 1) AS one LEFT JOIN pgwarden_budget AS b"
    " ON b.username = $1 AND b.conversation_id = $2"
    " WHERE NOT EXISTS (SELECT 1 FROM up)";
#undef PGW_FITS
#undef PGW_EXPIRED

const char* kAddRowsSql =
    "INSERT INTO pgwarden_budget AS b"
    " (username, conversation_id, window_start, last_seen, statements, denied, row_count)"
    " VALUES ($1, $2, now(), now(), 0, 0, $3::bigint)"
    " ON CONFLICT (username, conversation_id) DO UPDATE SET"
    " row_count = b.row_count + $3::bigint, last_seen = now()";

const char* kAddDeniedSql =
    "INSERT INTO pgwarden_budget AS b"
    " (username, conversation_id, window_start, last_seen, statements, denied, row_count)"
    " VALUES ($1, $2, now(), now(), 0, $3::bigint, 0)"
    " ON CONFLICT (username, conversation_id) DO UPDATE SET"
    " denied = b.denied + $3::bigint, last_seen = now()";

const char* kCleanupSql =
    "DELETE FROM pgwarden_budget WHERE last_seen < now() - $1::bigint * interval '1 millisecond'";

void closePoll(uv_poll_t* p) {
  uv_poll_stop(p);
  p->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(p), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
}

}  // namespace

BudgetStorePg::BudgetStorePg(uv_loop_t* loop, budgets::BudgetStoreConfig config)
    : loop_(loop), config_(std::move(config)) {
  timer_ = new uv_timer_t;
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  next_cleanup_ms_ = nowMs() + kCleanupEveryMs;
  connect();
}

BudgetStorePg::~BudgetStorePg() {
  if (poll_) closePoll(poll_);
  poll_ = nullptr;
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  uv_timer_stop(timer_);
  timer_->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
}

void BudgetStorePg::setState(State to) {
  if (to == state_) return;
  // Legal moves: Disconnected -> Connecting -> Ready, and any state -> Disconnected.
  const bool legal = to == State::kDisconnected || (state_ == State::kDisconnected && to == State::kConnecting) ||
                     (state_ == State::kConnecting && to == State::kReady);
  if (!legal) spdlog::error("budget store: illegal state move {} -> {}", static_cast<int>(state_), static_cast<int>(to));
  state_ = to;
}

void BudgetStorePg::armTimer() {
  if (!uv_is_active(reinterpret_cast<uv_handle_t*>(timer_))) {
    uv_timer_start(
        timer_, [](uv_timer_t* t) {
          if (t->data) static_cast<BudgetStorePg*>(t->data)->onTimer();
        },
        kTickMs, kTickMs);
  }
}

void BudgetStorePg::connect() {
  conn_ = PQconnectStart(config_.dsn.c_str());
  if (!conn_ || PQstatus(conn_) == CONNECTION_BAD) {
    disconnect(conn_ ? PQerrorMessage(conn_) : "out of memory");
    return;
  }
  setState(State::kConnecting);
  connect_deadline_ms_ = nowMs() + kConnectTimeoutMs;
  armTimer();
  // As if PQconnectPoll had answered PGRES_POLLING_WRITING.
  watch(UV_WRITABLE);
}

void BudgetStorePg::disconnect(const std::string& why) {
  std::string msg = why;
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg != last_error_) {
    spdlog::warn("budget store: connection to the shared budget table lost or refused: {}",
                 logsafe(msg, kLogMessageMaxBytes));
  }
  last_error_ = msg;
  if (poll_) closePoll(poll_);
  poll_ = nullptr;
  poll_fd_ = -1;
  want_write_ = false;
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  setState(State::kDisconnected);
  retry_at_ms_ = nowMs() + kReconnectMs;
  // Whatever was on the wire is lost: its admits get fail_behavior now. Counter updates are not
  // sent again, since they may have counted already (an undercount beats counting twice).
  std::deque<Op> lost;
  lost.swap(in_flight_);
  for (auto& op : lost) {
    if (op.kind == Op::Kind::kAdmit) failAdmit(op, "connection lost: " + msg);
  }
  armTimer();
}

void BudgetStorePg::watch(int events) {
  const int fd = conn_ ? PQsocket(conn_) : -1;
  if (fd < 0) {
    disconnect("no socket");
    return;
  }
  if (poll_ && fd != poll_fd_) {
    closePoll(poll_);
    poll_ = nullptr;
  }
  if (!poll_) {
    poll_ = new uv_poll_t;
    if (uv_poll_init(loop_, poll_, fd) != 0) {
      delete poll_;
      poll_ = nullptr;
      disconnect("cannot watch the socket");
      return;
    }
    poll_->data = this;
    poll_fd_ = fd;
  }
  uv_poll_start(poll_, events, [](uv_poll_t* p, int status, int ev) {
    if (p->data) static_cast<BudgetStorePg*>(p->data)->onPoll(status, ev);
  });
}

void BudgetStorePg::continueConnect() {
  switch (PQconnectPoll(conn_)) {
    case PGRES_POLLING_READING: watch(UV_READABLE); return;
    case PGRES_POLLING_WRITING: watch(UV_WRITABLE); return;
    case PGRES_POLLING_FAILED: disconnect(PQerrorMessage(conn_)); return;
    case PGRES_POLLING_OK:
      break;
    case PGRES_POLLING_ACTIVE:
      watch(UV_WRITABLE);
      return;
  }
  if (PQsetnonblocking(conn_, 1) != 0) {
    disconnect("cannot make the connection non-blocking");
    return;
  }
  // Server notices ("relation already exists, skipping") go to the log, not to stderr.
  PQsetNoticeProcessor(
      conn_, [](void*, const char* msg) { spdlog::debug("budget store: server notice: {}", msg); }, nullptr);
  if (PQenterPipelineMode(conn_) != 1) {
    disconnect(std::string("cannot enter pipeline mode: ") + PQerrorMessage(conn_));
    return;
  }
  if (!last_error_.empty()) spdlog::info("budget store: connected to the shared budget table again");
  last_error_.clear();
  setState(State::kReady);
  Op setup;
  setup.kind = Op::Kind::kSetup;
  queue_.push_front(std::move(setup));
  watch(UV_READABLE);
  sendQueued();
}

void BudgetStorePg::onPoll(int status, int events) {
  if (status < 0) {
    disconnect(std::string("socket error: ") + uv_strerror(status));
    return;
  }
  if (state_ == State::kConnecting) {
    continueConnect();
    return;
  }
  if (!conn_) return;
  if ((events & UV_WRITABLE) && want_write_) flush();
  if (conn_ && (events & UV_READABLE)) readResults();
}

void BudgetStorePg::enqueue(Op op) {
  if (queue_.size() >= kMaxQueued) {
    ++dropped_;
    if (op.kind == Op::Kind::kAdmit) {
      failAdmit(op, "the budget store queue is full");
    } else if (dropped_ == 1 || dropped_ % 1000 == 0) {
      spdlog::warn("budget store: queue full, {} counter updates dropped so far", dropped_);
    }
    return;
  }
  queue_.push_back(std::move(op));
  armTimer();
  if (state_ == State::kDisconnected && nowMs() >= retry_at_ms_) connect();
  sendQueued();
}

void BudgetStorePg::sendQueued() {
  if (state_ != State::kReady || !conn_) return;
  const int64_t now = nowMs();
  std::vector<Op> late;  // answered once nothing here is touched any more: an answer may admit again
  bool sent = false;
  while (conn_ && !queue_.empty() && in_flight_.size() < kMaxInFlight) {
    Op op = std::move(queue_.front());
    queue_.pop_front();
    if (op.kind == Op::Kind::kAdmit) {
      // An admit nobody waits for any more (cancelled) is not counted at all, nor a late one.
      if (!op.done) continue;
      if (now >= op.deadline_ms) {
        late.push_back(std::move(op));
        continue;
      }
    }
    in_flight_.push_back(std::move(op));
    if (!send(in_flight_.back())) {
      disconnect(PQerrorMessage(conn_));
      break;
    }
    sent = true;
  }
  if (sent && conn_) flush();
  for (auto& op : late) failAdmit(op, "timed out waiting for the budget store");
}

bool BudgetStorePg::send(Op& op) {
  const char* sql = nullptr;
  switch (op.kind) {
    case Op::Kind::kSetup: sql = kSetupSql; break;
    case Op::Kind::kAdmit: sql = kAdmitSql; break;
    case Op::Kind::kAddRows: sql = kAddRowsSql; break;
    case Op::Kind::kAddDenied: sql = kAddDeniedSql; break;
    case Op::Kind::kCleanup: sql = kCleanupSql; break;
  }
  std::vector<const char*> values;
  values.reserve(op.params.size());
  for (const auto& p : op.params) values.push_back(p.c_str());
  op.sent_ms = nowMs();
  // A sync point after every query: each runs in its own transaction, holding its row lock only
  // for itself, and an error in one leaves the ones behind it to run.
  return PQsendQueryParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr,
                           0) == 1 &&
         PQpipelineSync(conn_) == 1;
}

void BudgetStorePg::flush() {
  const int f = PQflush(conn_);
  if (f < 0) {
    disconnect(PQerrorMessage(conn_));
    return;
  }
  want_write_ = f == 1;
  watch(want_write_ ? (UV_READABLE | UV_WRITABLE) : UV_READABLE);
}

void BudgetStorePg::readResults() {
  if (!PQconsumeInput(conn_)) {
    disconnect(PQerrorMessage(conn_));
    return;
  }
  // Per query: its result, a null ending its results, then the result marking its sync point.
  // Two nulls in a row mean nothing more has arrived.
  int nulls = 0;
  while (conn_ && !in_flight_.empty() && !PQisBusy(conn_)) {
    PGresult* res = PQgetResult(conn_);
    if (!res) {
      if (++nulls > 1) break;
      continue;
    }
    nulls = 0;
    if (PQresultStatus(res) == PGRES_PIPELINE_SYNC) {
      PQclear(res);
      Op op = std::move(in_flight_.front());
      in_flight_.pop_front();
      if (op.kind == Op::Kind::kAdmit && !op.has_result) failAdmit(op, "the budget upsert returned nothing");
      continue;
    }
    Op& op = in_flight_.front();
    const bool first = !op.has_result;
    op.has_result = true;
    // complete() may call back into admit(): it touches `op` only before that call.
    if (first) complete(op, res);
    PQclear(res);
  }
  if (!conn_) return;
  sendQueued();
  if (conn_ && want_write_) flush();
}

void BudgetStorePg::complete(Op& op, PGresult* res) {
  const ExecStatusType st = PQresultStatus(res);
  const bool ok = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
  switch (op.kind) {
    case Op::Kind::kAdmit: {
      if (!op.done) return;
      AdmitDone done = std::move(op.done);
      op.done = nullptr;
      if (st != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) != 4) {
        std::string err = ok ? "unexpected answer" : PQresultErrorMessage(res);
        while (!err.empty() && err.back() == '\n') err.pop_back();
        done(Result<Answer>::fail("budget upsert failed: " + err));
        return;
      }
      Answer a;
      a.admitted = std::string(PQgetvalue(res, 0, 0)) == "t";
      a.counters.statements = std::strtoll(PQgetvalue(res, 0, 1), nullptr, 10);
      a.counters.denied = std::strtoll(PQgetvalue(res, 0, 2), nullptr, 10);
      a.counters.rows = std::strtoll(PQgetvalue(res, 0, 3), nullptr, 10);
      done(a);
      return;
    }
    case Op::Kind::kSetup:
    case Op::Kind::kAddRows:
    case Op::Kind::kAddDenied:
    case Op::Kind::kCleanup:
      if (!ok) {
        std::string err = PQresultErrorMessage(res);
        while (!err.empty() && err.back() == '\n') err.pop_back();
        // Two processes creating the table at once: one of them loses the race, harmlessly.
        spdlog::warn("budget store: {} failed: {}",
                     op.kind == Op::Kind::kSetup ? "creating the table" : "an update",
                     logsafe(err, kLogMessageMaxBytes));
      }
      return;
  }
}

void BudgetStorePg::failAdmit(Op& op, const std::string& why) {
  if (!op.done) return;
  AdmitDone done = std::move(op.done);
  op.done = nullptr;
  done(Result<Answer>::fail(why));
}

void BudgetStorePg::expireAdmits() {
  const int64_t now = nowMs();
  // Collected first and answered after: an answer may call admit() and touch both queues.
  std::vector<std::pair<AdmitDone, const char*>> expired;
  for (auto& op : queue_) {
    if (op.kind == Op::Kind::kAdmit && op.done && now >= op.deadline_ms) {
      expired.emplace_back(std::move(op.done), "timed out waiting for the budget store");
      op.done = nullptr;
    }
  }
  std::erase_if(queue_, [](const Op& op) { return op.kind == Op::Kind::kAdmit && !op.done; });
  // An upsert already on the wire stays there (its answer still has to be read in order), but
  // its session hears now.
  for (auto& op : in_flight_) {
    if (op.kind == Op::Kind::kAdmit && op.done && now >= op.deadline_ms) {
      expired.emplace_back(std::move(op.done), "the budget upsert timed out");
      op.done = nullptr;
    }
  }
  for (auto& [done, why] : expired) done(Result<Answer>::fail(why));
}

void BudgetStorePg::onTimer() {
  const int64_t now = nowMs();
  if (state_ == State::kConnecting && now >= connect_deadline_ms_) disconnect("connect timed out");
  if (state_ == State::kDisconnected && !queue_.empty() && now >= retry_at_ms_) connect();
  expireAdmits();
  // A query stuck far past its deadline holds every one behind it: drop the connection.
  if (state_ == State::kReady && !in_flight_.empty() &&
      now - in_flight_.front().sent_ms > std::max<int64_t>(config_.timeout.count() * 4, 2000)) {
    disconnect("a budget query took too long");
  }
  if (now >= next_cleanup_ms_) {
    next_cleanup_ms_ = now + kCleanupEveryMs;
    Op op;
    op.kind = Op::Kind::kCleanup;
    op.params = {std::to_string(idle_expiry_ms_)};
    enqueue(std::move(op));
  }
  if (state_ != State::kConnecting && queue_.empty() && in_flight_.empty()) uv_timer_stop(timer_);
  sendQueued();
}

uint64_t BudgetStorePg::admit(const budgets::BudgetKey& key, const budgets::BudgetLimits& limits,
                              int64_t statements, AdmitDone done) {
  const uint64_t ticket = next_ticket_++;
  idle_expiry_ms_ = std::max<int64_t>(idle_expiry_ms_, limits.idle_expiry.count());
  Op op;
  op.kind = Op::Kind::kAdmit;
  op.ticket = ticket;
  op.done = std::move(done);
  op.deadline_ms = nowMs() + config_.timeout.count();
  op.params = {key.user,
               key.conversation,
               std::to_string(limits.max_statements),
               std::to_string(limits.max_denied),
               std::to_string(limits.max_rows),
               std::to_string(limits.window.count()),
               std::to_string(limits.idle_expiry.count()),
               std::to_string(std::max<int64_t>(statements, 1))};
  // Answers never come inside the call that asked: a full queue is answered on the next tick.
  if (queue_.size() >= kMaxQueued) {
    ++dropped_;
    op.deadline_ms = 0;
    queue_.push_back(std::move(op));
    armTimer();
    return ticket;
  }
  enqueue(std::move(op));
  return ticket;
}

void BudgetStorePg::cancel(uint64_t ticket) {
  for (auto* ops : {&queue_, &in_flight_}) {
    for (auto& op : *ops) {
      if (op.kind == Op::Kind::kAdmit && op.ticket == ticket) op.done = nullptr;
    }
  }
}

void BudgetStorePg::addRows(const budgets::BudgetKey& key, const budgets::BudgetLimits&,
                            int64_t rows) {
  Op op;
  op.kind = Op::Kind::kAddRows;
  op.params = {key.user, key.conversation, std::to_string(rows)};
  enqueue(std::move(op));
}

void BudgetStorePg::addDenied(const budgets::BudgetKey& key, const budgets::BudgetLimits&,
                              int64_t statements) {
  Op op;
  op.kind = Op::Kind::kAddDenied;
  op.params = {key.user, key.conversation, std::to_string(std::max<int64_t>(statements, 1))};
  enqueue(std::move(op));
}

}  // namespace pgwarden::budgets
