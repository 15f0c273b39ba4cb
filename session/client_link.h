// The client side of a client session: the socket (used like a pointer to its Stream:
// `client_->out()`), who is at the other end, the bytes read and not handled yet with the caps a
// message must fit, the session's deadlines and activity times, and backpressure both ways: the
// client is not read while the server has not taken what it was sent, the server is not read
// while the client is slow to take its results, and a client that takes nothing for too long is
// found (stalledMs).
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "net/stream.h"
#include "protocol/messages.h"

namespace pgwarden::session {

class ClientLink {
 public:
  ClientLink(uv_loop_t* loop, net::StreamEvents* events, bool via_unix,
             protocol::FrameLimits limits);

  net::Stream* operator->() { return &stream_; }
  const net::Stream* operator->() const { return &stream_; }

  // Opening: the handle (a pipe or TCP), then, once the socket is open, who is at the other end
  // and how long it has to log in.
  [[nodiscard]] int init() { return via_unix_ ? stream_.initPipe() : stream_.initTcp(); }
  void opened(uint64_t now_ms, uint64_t startup_timeout_ms);
  bool viaUnix() const { return via_unix_; }
  const std::string& peer() const { return peer_; }
  const std::string& peerHost() const { return peer_host_; }
  uint64_t connectedAtMs() const { return connected_ms_; }

  // Bytes from the client, framed with the caps of `limits()`.
  void received(const char* data, size_t len, uint64_t now_ms);
  protocol::FrameBuffer& in() { return in_; }
  size_t inputBytes() const { return in_.size(); }
  const protocol::FrameLimits& limits() const { return limits_; }
  // What waits unread while the session cannot handle it stays bounded: reading stops past one
  // largest message.
  void boundWaitingInput();

  // The startup deadline, or the last bytes' (a FATAL) when closing.
  uint64_t deadlineMs() const { return deadline_ms_; }
  void setDeadline(uint64_t ms) { deadline_ms_ = ms; }
  void deadlineNoLaterThan(uint64_t ms);
  // Quiet since the last bytes read.
  uint64_t idleMs(uint64_t now_ms) const { return now_ms - last_active_ms_; }
  // Nothing was read since the last trim().
  bool trimmed() const { return trimmed_at_ms_ == last_active_ms_; }
  // A quiet session gives back its buffers (made again by the next bytes).
  void trim();

  // Client -> server: the client is not read while the server is full.
  bool clientPaused() const { return client_paused_; }
  void pauseClient();
  // Reading again; returns the Stream's error, if any.
  [[nodiscard]] int resumeClient();
  // Server -> client: the server is not read while the client's queue is over its limit.
  bool serverPaused() const { return server_paused_; }
  // True: the server must stop being read now (it was not paused).
  [[nodiscard]] bool pauseServer();
  // True: the server must be read again now (it was paused).
  [[nodiscard]] bool resumeServer();
  // The server connection went (given back, lost): nothing of it is paused any more.
  void serverGone() { server_paused_ = false; }
  // How long the client has taken none of its bytes while the server is paused for it (0: it
  // is not, or it took some since the last call). `measuring` false ends a measurement.
  uint64_t stalledMs(uint64_t now_ms, bool measuring);

  // A message of the server's streamed in pieces: the rest of it is forwarded, or dropped.
  bool chunkForward() const { return chunk_forward_; }
  void setChunkForward(bool on) { chunk_forward_ = on; }

 private:
  net::Stream stream_;
  bool via_unix_;
  std::string peer_;
  std::string peer_host_;
  protocol::FrameBuffer in_;
  protocol::FrameLimits limits_;
  uint64_t connected_ms_ = 0;
  uint64_t deadline_ms_ = 0;
  uint64_t last_active_ms_ = 0;
  uint64_t trimmed_at_ms_ = 0;  // last_active_ms_ when trim() last ran
  bool client_paused_ = false;
  bool server_paused_ = false;
  // While server_paused_: since when the client has taken none of its bytes, and how many were
  // unsent then (0: not measuring).
  uint64_t stall_since_ms_ = 0;
  size_t stall_unsent_ = 0;
  bool chunk_forward_ = true;
};

}  // namespace pgwarden::session
