// The pause table of a client session and the object that keeps what a pause holds. Written as
// switches without `default:` so that adding a reason makes -Wswitch point here.
#include "session/paused_message.h"

#include <spdlog/spdlog.h>

namespace pgwarden::session {

const char* pauseReasonName(PauseReason r) {
  switch (r) {
    case PauseReason::kNone:
      return "none";
    case PauseReason::kVerdict:
      return "verdict";
    case PauseReason::kVerdictServer:
      return "verdict-server";
    case PauseReason::kServer:
      return "server";
    case PauseReason::kWriteStep:
      return "write-step";
    case PauseReason::kTxnState:
      return "txn-state";
    case PauseReason::kConsoleGather:
      return "console-gather";
    case PauseReason::kConsoleHold:
      return "console-hold";
  }
  return "?";
}

bool legalPause(PauseReason from, PauseReason to) {
  // Every pause may end (the session closing ends any of them).
  if (to == PauseReason::kNone) return true;
  switch (from) {
    case PauseReason::kNone:
      // A server wait with a verdict starts from the message kept for it.
      return to != PauseReason::kVerdictServer;
    case PauseReason::kVerdict:
      return to == PauseReason::kVerdictServer;
    case PauseReason::kVerdictServer:
      // The connection came (kVerdict), or the message was dropped while the wait goes on.
      return to == PauseReason::kVerdict || to == PauseReason::kServer;
    case PauseReason::kServer:
    case PauseReason::kWriteStep:
    case PauseReason::kTxnState:
    case PauseReason::kConsoleGather:
    case PauseReason::kConsoleHold:
      return false;
  }
  return false;
}

bool PausedMessage::move(PauseReason to) {
  if (to == reason_) return true;
  if (!legalPause(reason_, to)) {
    spdlog::error("session {}: illegal pause change {} -> {}", session_id_,
                  pauseReasonName(reason_), pauseReasonName(to));
    return false;
  }
  reason_ = to;
  if (to != PauseReason::kNone) resume_ = false;
  if (to != PauseReason::kTxnState) flush_sent_ = false;
  if (to != PauseReason::kServer && to != PauseReason::kVerdictServer) pool_ = nullptr;
  if (!holdsMessage()) {
    message_.clear();
    verdict_.reset();
    explain_.reset();
  }
  return true;
}

bool PausedMessage::keep(std::string_view raw) {
  if (!move(PauseReason::kVerdict)) return false;
  message_.assign(raw.data(), raw.size());
  return true;
}

std::string PausedMessage::takeMessage() {
  if (reason_ != PauseReason::kVerdict) return {};
  std::string m = std::move(message_);
  (void)move(PauseReason::kNone);
  return m;
}

bool PausedMessage::waitForServer(pool::Pool& pool) {
  const PauseReason to =
      reason_ == PauseReason::kVerdict ? PauseReason::kVerdictServer : PauseReason::kServer;
  if (!move(to)) return false;
  pool_ = &pool;
  return true;
}

void PausedMessage::serverWaitOver() {
  pool_ = nullptr;
  if (reason_ == PauseReason::kVerdictServer) {
    (void)move(PauseReason::kVerdict);
  } else if (reason_ == PauseReason::kServer) {
    (void)move(PauseReason::kNone);
  }
}

std::optional<GateVerdict> PausedMessage::takeVerdict() {
  std::optional<GateVerdict> v = std::move(verdict_);
  verdict_.reset();
  return v;
}

std::optional<PausedMessage::DeferredExplain> PausedMessage::takeExplain() {
  std::optional<DeferredExplain> x = std::move(explain_);
  explain_.reset();
  return x;
}

std::optional<GateVerdict> PausedMessage::dropMessage() {
  std::optional<GateVerdict> v = takeVerdict();
  if (reason_ == PauseReason::kVerdictServer) {
    (void)move(PauseReason::kServer);  // the pool is still waited on
  } else if (reason_ == PauseReason::kVerdict) {
    (void)move(PauseReason::kNone);
  }
  message_.clear();
  explain_.reset();
  return v;
}

void PausedMessage::endWriteStep() {
  if (reason_ == PauseReason::kWriteStep) (void)move(PauseReason::kNone);
  resume_ = true;
}

void PausedMessage::endTxnStateWait() {
  if (reason_ == PauseReason::kTxnState) (void)move(PauseReason::kNone);
  resume_ = true;
}

std::optional<GateVerdict> PausedMessage::reset() {
  std::optional<GateVerdict> v = takeVerdict();
  (void)move(PauseReason::kNone);
  resume_ = false;
  return v;
}

}  // namespace pgwarden::session
