// The client side of a client session: its socket, input, deadlines and backpressure.
#include "session/client_link.h"

#include <algorithm>

namespace pgwarden::session {

ClientLink::ClientLink(uv_loop_t* loop, net::StreamEvents* events, bool via_unix,
                       protocol::FrameLimits limits)
    : stream_(loop, events), via_unix_(via_unix), limits_(limits) {}

void ClientLink::opened(uint64_t now_ms, uint64_t startup_timeout_ms) {
  peer_ = stream_.peerName();
  peer_host_ = stream_.peerHost();
  connected_ms_ = now_ms;
  last_active_ms_ = now_ms;
  deadline_ms_ = now_ms + startup_timeout_ms;
}

void ClientLink::received(const char* data, size_t len, uint64_t now_ms) {
  last_active_ms_ = now_ms;
  in_.append(data, len);
}

void ClientLink::boundWaitingInput() {
  if (in_.size() > limits_.max_bind + 5u) stream_.stopRead();
}

void ClientLink::deadlineNoLaterThan(uint64_t ms) { deadline_ms_ = std::min(deadline_ms_, ms); }

void ClientLink::trim() {
  trimmed_at_ms_ = last_active_ms_;
  in_.release();
  stream_.releaseIdleBuffers();
}

void ClientLink::pauseClient() {
  client_paused_ = true;
  stream_.stopRead();
}

int ClientLink::resumeClient() {
  client_paused_ = false;
  return stream_.startRead();
}

bool ClientLink::pauseServer() {
  if (server_paused_) return false;
  server_paused_ = true;
  return true;
}

bool ClientLink::resumeServer() {
  if (!server_paused_) return false;
  server_paused_ = false;
  return true;
}

uint64_t ClientLink::stalledMs(uint64_t now_ms, bool measuring) {
  if (!measuring || !server_paused_) {
    stall_since_ms_ = 0;
    return 0;
  }
  // Progress is any byte the kernel took, so a client that reads slowly is left alone.
  const size_t unsent = stream_.unsentBytes();
  const bool progress = unsent < stall_unsent_;
  stall_unsent_ = unsent;
  if (stall_since_ms_ == 0 || progress) {
    stall_since_ms_ = now_ms;
    return 0;
  }
  return now_ms - stall_since_ms_;
}

}  // namespace pgwarden::session
