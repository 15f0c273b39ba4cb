// One libuv stream (TCP or Unix socket) owned by one object, uvw-style: the handle lives inside
// the Stream, the Stream's owner stays alive until onStreamClosed, and close() is safe to call
// any number of times. Outgoing bytes are gathered in one buffer per read batch and written
// with one try-write (and one uv_write for what the kernel did not take), so a batch of
// messages costs one syscall; pendingBytes() is what backpressure decisions read.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"

namespace pgwarden::net {

class Stream;
class TlsEngine;

// What a Stream reports to its owner. Every callback runs on the loop thread. The owner may call
// close() from inside any of them; the Stream stays valid until onStreamClosed has returned.
class StreamEvents {
 public:
  virtual void onStreamData(Stream& s, const char* data, size_t len) = 0;
  // The peer closed (UV_EOF) or reading failed (a libuv error code). The stream is still open.
  virtual void onStreamEnd(Stream& s, int status) = 0;
  virtual void onStreamConnected(Stream& /*s*/, int /*status*/) {}
  // A write finished; pendingBytes() went down. `status` < 0 when it failed.
  virtual void onStreamWritten(Stream& /*s*/, int /*status*/) {}
  virtual void onStreamClosed(Stream& s) = 0;
  // TLS (after startTls): the handshake ended and plaintext may flow.
  virtual void onStreamTlsReady(Stream& /*s*/) {}
  // TLS failed (handshake, verification, a bad record); the alert is already on its way. By
  // default this is a read error; s.tlsError() says why.
  virtual void onStreamTlsError(Stream& s) { onStreamEnd(s, UV_EPROTO); }

 protected:
  ~StreamEvents() = default;
};

class Stream {
 public:
  Stream(uv_loop_t* loop, StreamEvents* events);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  [[nodiscard]] int initTcp();
  [[nodiscard]] int initPipe();
  // Takes the next pending connection of a listening stream (initTcp/initPipe first).
  [[nodiscard]] int acceptFrom(uv_stream_t* listener);
  // Opens over a connected socket accepted elsewhere (another loop's listener); the stream owns
  // `fd` from now on, and closes it even when this fails.
  [[nodiscard]] int adoptFd(int fd);
  [[nodiscard]] int connectTcp(const struct sockaddr* addr);
  [[nodiscard]] int connectPipe(const std::string& path);

  [[nodiscard]] int startRead();
  void stopRead();
  bool reading() const { return reading_; }

  // Append outgoing bytes here, then flush().
  std::string& out() { return out_; }
  // Hands out() to the kernel. Returns 0 or a libuv error (the stream should then be closed).
  [[nodiscard]] int flush();
  // Bytes accepted by write() but not yet taken by the kernel.
  size_t pendingBytes() const { return out_.size() + in_flight_; }
  // The same counted as the kernel takes them (pendingBytes() drops only when a whole write has
  // finished): how the owner tells a peer that reads slowly from one that reads nothing.
  size_t unsentBytes() const;
  // Gives back the output buffer's storage when everything has been written (an idle
  // connection's; the next message allocates it again).
  void releaseIdleBuffers();

  void close();
  // Flushes, stops reading, and closes once the kernel has taken every byte (a FATAL error
  // message must reach the client before the socket goes). The owner bounds the wait.
  void closeWhenFlushed();
  bool open() const { return initialized_ && !closing_; }
  bool closing() const { return closing_ && !closed_; }
  // True once the close callback ran, or when the handle was never initialized.
  bool closed() const { return !initialized_ || closed_; }

  // From now on bytes read are ciphertext for `engine` (onStreamData gets plaintext) and
  // out() is encrypted by flush(). Call with nothing buffered in out(): what is already in
  // flight (an 'S' answer) goes in clear, as it must.
  [[nodiscard]] Status startTls(std::unique_ptr<TlsEngine> engine);
  bool tlsActive() const { return tls_ != nullptr; }
  const TlsEngine* tls() const { return tls_.get(); }
  const std::string& tlsError() const { return tls_error_; }

  bool isUnix() const { return is_pipe_; }
  // "ip:port" of the peer ("[v6]:port"), "unix" for a Unix socket, "" if unknown.
  std::string peerName() const;
  // The peer's address without the port, for per-address accounting ("unix" for Unix sockets).
  std::string peerHost() const;
  uv_stream_t* handle() { return reinterpret_cast<uv_stream_t*>(&h_); }

 private:
  static void onAlloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void onRead(uv_stream_t* h, ssize_t n, const uv_buf_t* buf);
  static void onWrite(uv_write_t* req, int status);
  static void onConnect(uv_connect_t* req, int status);
  static void onClose(uv_handle_t* h);
  void onTlsData(const char* data, size_t len);
  [[nodiscard]] int sealOut();

  uv_loop_t* loop_;
  StreamEvents* events_;
  union {
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h_;
  uv_connect_t connect_req_;
  std::string out_;
  size_t in_flight_ = 0;
  size_t writes_in_flight_ = 0;
  bool initialized_ = false;
  bool is_pipe_ = false;
  bool reading_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool close_when_flushed_ = false;
  std::unique_ptr<TlsEngine> tls_;
  std::string tls_plain_;  // decrypted bytes of one read, handed to onStreamData
  std::string tls_error_;
};

// Size of the loop-wide read buffer every stream reads into (data is consumed synchronously).
inline constexpr size_t kReadBufferSize = 64 * 1024;

}  // namespace pgwarden::net
