// HTTP POSTs to policy services without blocking the loop: libcurl's multi interface driven by
// libuv (a uv_poll per curl socket, one uv_timer for curl's timeouts). Each request has a
// deadline, bounded retries (transport errors and 5xx only) and one completion callback, always
// called from the loop and never inside post(). In-flight requests are bounded; extra ones wait
// in a bounded queue, and beyond that fail at once as kOverloaded.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/result.h"
#include "guards/policy.h"

namespace pgwarden::guards {
class WebhookGuard;
}

namespace pgwarden::net {

struct WebhookRequest {
  std::string url;
  std::string body;  // JSON
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{1000};  // whole exchange, retries included
  int retries = 0;
  size_t max_response_bytes = 64u << 10;
};

// The request a paused chain asks for: the guard's service, headers and limits, and the body.
WebhookRequest webhookRequestFor(const guards::WebhookGuard& guard, std::string body);

class WebhookClient {
 public:
  struct Options {
    size_t max_in_flight = 64;
    size_t max_queued = 1024;
  };
  using Done = std::function<void(guards::WebhookOutcome)>;

  // `loop` must outlive the client. Handles close asynchronously after the client is destroyed:
  // run the loop once more to free them.
  static Result<std::unique_ptr<WebhookClient>> create(uv_loop_t* loop, Options options);
  WebhookClient(uv_loop_t* loop, Options options);
  ~WebhookClient();
  WebhookClient(const WebhookClient&) = delete;
  WebhookClient& operator=(const WebhookClient&) = delete;

  // Starts (or queues) a POST. Returns an id for cancel(); `done` runs later on the loop.
  uint64_t post(WebhookRequest request, Done done);
  // Forget a request: `done` will not be called. Safe for unknown or finished ids.
  void cancel(uint64_t id);

  size_t inFlight() const { return in_flight_; }
  size_t queued() const { return queue_.size(); }
  uint64_t completed() const { return completed_; }
  uint64_t failed() const { return failed_; }

 private:
  struct Request;
  struct Socket;
  friend struct WebhookClientCallbacks;

  bool init();
  void start(Request& r);
  void startQueued();
  void processDone();
  void finish(uint64_t id, guards::WebhookOutcome outcome);
  void defer(uint64_t id, guards::WebhookOutcome outcome);
  void detach(Request& r);

  uv_loop_t* loop_;
  Options options_;
  void* multi_ = nullptr;           // CURLM*
  uv_timer_t* timer_ = nullptr;     // curl's timeout; freed in its close callback
  uv_timer_t* deferred_timer_ = nullptr;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;
  std::deque<uint64_t> queue_;
  std::vector<std::pair<uint64_t, guards::WebhookOutcome>> deferred_;
  std::vector<Socket*> sockets_;
  size_t in_flight_ = 0;
  uint64_t next_id_ = 1;
  uint64_t completed_ = 0;
  uint64_t failed_ = 0;
  bool closing_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace pgwarden::net
