// libcurl multi on libuv, after curl's own multi-uv example: curl tells us which sockets to
// watch (CURLMOPT_SOCKETFUNCTION) and when to wake it (CURLMOPT_TIMERFUNCTION); we call
// curl_multi_socket_action from the poll and timer callbacks and read finished transfers.
// No user callback runs inside a curl callback, so a callback may post() or cancel() freely.
#include "net/webhook_client.h"

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#include "guards/webhook_guard.h"

namespace pgwarden::net {

using guards::WebhookOutcome;

namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void closeAndDelete(uv_handle_t* h) {
  uv_close(h, [](uv_handle_t* handle) {
    if (handle->type == UV_TIMER) {
      delete reinterpret_cast<uv_timer_t*>(handle);
    } else {
      delete reinterpret_cast<uv_poll_t*>(handle);
    }
  });
}

// Shortest time worth a new attempt: below it a retry could only time out.
constexpr int64_t kMinAttemptMs = 5;

}  // namespace

WebhookRequest webhookRequestFor(const guards::WebhookGuard& guard, std::string body) {
  const auto& o = guard.options();
  WebhookRequest r;
  r.url = o.url;
  r.body = std::move(body);
  r.headers = o.headers;
  r.timeout = o.timeout;
  r.retries = o.retries;
  r.max_response_bytes = o.max_response_bytes;
  return r;
}

struct WebhookClient::Request {
  uint64_t id = 0;
  WebhookRequest req;
  Done done;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string response;
  bool too_large = false;
  bool running = false;  // added to the multi handle
  int attempts = 0;
  int64_t deadline_ms = 0;
  char errbuf[CURL_ERROR_SIZE] = {0};
};

struct WebhookClient::Socket {
  uv_poll_t* poll = nullptr;  // freed in its close callback
  curl_socket_t fd = CURL_SOCKET_BAD;
  WebhookClient* client = nullptr;
};

// The C callbacks, with access to the client's internals.
struct WebhookClientCallbacks {
  static size_t onWrite(char* data, size_t size, size_t n, void* userp) {
    auto* r = static_cast<WebhookClient::Request*>(userp);
    const size_t len = size * n;
    if (r->response.size() + len > r->req.max_response_bytes) {
      r->too_large = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    r->response.append(data, len);
    return len;
  }

  static void onPoll(uv_poll_t* handle, int status, int events) {
    auto* s = static_cast<WebhookClient::Socket*>(handle->data);
    if (!s || !s->client) return;
    WebhookClient* c = s->client;
    int flags = 0;
    if (status < 0) flags |= CURL_CSELECT_ERR;
    if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    int running = 0;
    curl_multi_socket_action(static_cast<CURLM*>(c->multi_), s->fd, flags, &running);
    c->processDone();
  }

  static void onTimer(uv_timer_t* t) {
    auto* c = static_cast<WebhookClient*>(t->data);
    if (!c) return;
    int running = 0;
    curl_multi_socket_action(static_cast<CURLM*>(c->multi_), CURL_SOCKET_TIMEOUT, 0, &running);
    c->processDone();
  }

  static int onSocket(CURL*, curl_socket_t fd, int what, void* userp, void* socketp) {
    auto* c = static_cast<WebhookClient*>(userp);
    auto* s = static_cast<WebhookClient::Socket*>(socketp);
    if (what == CURL_POLL_REMOVE) {
      if (s) {
        c->sockets_.erase(std::remove(c->sockets_.begin(), c->sockets_.end(), s), c->sockets_.end());
        uv_poll_stop(s->poll);
        s->poll->data = nullptr;
        closeAndDelete(reinterpret_cast<uv_handle_t*>(s->poll));
        delete s;
        curl_multi_assign(static_cast<CURLM*>(c->multi_), fd, nullptr);
      }
      return 0;
    }
    if (c->closing_) return 0;
    if (!s) {
      s = new WebhookClient::Socket;
      s->poll = new uv_poll_t;
      s->fd = fd;
      s->client = c;
      if (uv_poll_init_socket(c->loop_, s->poll, fd) != 0) {
        delete s->poll;
        delete s;
        return -1;  // curl fails this transfer
      }
      s->poll->data = s;
      c->sockets_.push_back(s);
      curl_multi_assign(static_cast<CURLM*>(c->multi_), fd, s);
    }
    int events = 0;
    if (what & CURL_POLL_IN) events |= UV_READABLE;
    if (what & CURL_POLL_OUT) events |= UV_WRITABLE;
    uv_poll_start(s->poll, events, onPoll);
    return 0;
  }

  static int onCurlTimer(CURLM*, long timeout_ms, void* userp) {
    auto* c = static_cast<WebhookClient*>(userp);
    if (c->closing_ || !c->timer_) return 0;
    if (timeout_ms < 0) {
      uv_timer_stop(c->timer_);
    } else {
      // 0 means "as soon as possible": the next loop iteration, never from inside this callback.
      uv_timer_start(c->timer_, onTimer, static_cast<uint64_t>(timeout_ms), 0);
    }
    return 0;
  }

  static void onDeferred(uv_timer_t* t) {
    auto* c = static_cast<WebhookClient*>(t->data);
    if (!c) return;
    auto items = std::move(c->deferred_);
    c->deferred_.clear();
    for (auto& [id, outcome] : items) c->finish(id, std::move(outcome));
  }
};

Result<std::unique_ptr<WebhookClient>> WebhookClient::create(uv_loop_t* loop, Options options) {
  auto c = std::make_unique<WebhookClient>(loop, options);
  if (!c->multi_) return Result<std::unique_ptr<WebhookClient>>::fail("cannot initialise libcurl");
  return Result<std::unique_ptr<WebhookClient>>(std::move(c));
}

WebhookClient::WebhookClient(uv_loop_t* loop, Options options) : loop_(loop), options_(options) {
  if (!init()) spdlog::error("http_webhook: libcurl could not be initialised; webhook guards will fail");
}

bool WebhookClient::init() {
  static std::once_flag once;
  static bool global_ok = false;
  std::call_once(once, [] {
    global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    const curl_version_info_data* v = curl_version_info(CURLVERSION_NOW);
    if (v && !(v->features & CURL_VERSION_ASYNCHDNS)) {
      spdlog::warn("http_webhook: this libcurl resolves names synchronously; use an IP address in webhook urls");
    }
  });
  if (!global_ok) return false;
  CURLM* m = curl_multi_init();
  if (!m) return false;
  multi_ = m;
  timer_ = new uv_timer_t;
  uv_timer_init(loop_, timer_);
  timer_->data = this;
  deferred_timer_ = new uv_timer_t;
  uv_timer_init(loop_, deferred_timer_);
  deferred_timer_->data = this;
  curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, &WebhookClientCallbacks::onSocket);
  curl_multi_setopt(m, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, &WebhookClientCallbacks::onCurlTimer);
  curl_multi_setopt(m, CURLMOPT_TIMERDATA, this);
  curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, static_cast<long>(options_.max_in_flight));
  return true;
}

WebhookClient::~WebhookClient() {
  *alive_ = false;
  closing_ = true;
  auto* m = static_cast<CURLM*>(multi_);
  for (auto& [id, r] : requests_) {
    if (r->running && m) curl_multi_remove_handle(m, r->easy);
    if (r->easy) curl_easy_cleanup(r->easy);
    if (r->headers) curl_slist_free_all(r->headers);
  }
  requests_.clear();
  if (m) curl_multi_cleanup(m);
  for (Socket* s : sockets_) {
    uv_poll_stop(s->poll);
    s->poll->data = nullptr;
    closeAndDelete(reinterpret_cast<uv_handle_t*>(s->poll));
    delete s;
  }
  sockets_.clear();
  for (uv_timer_t* t : {timer_, deferred_timer_}) {
    if (!t) continue;
    uv_timer_stop(t);
    t->data = nullptr;
    closeAndDelete(reinterpret_cast<uv_handle_t*>(t));
  }
}

uint64_t WebhookClient::post(WebhookRequest request, Done done) {
  const uint64_t id = next_id_++;
  auto r = std::make_unique<Request>();
  r->id = id;
  r->req = std::move(request);
  r->done = std::move(done);
  r->deadline_ms = nowMs() + r->req.timeout.count();
  Request& ref = *r;
  requests_[id] = std::move(r);
  if (!multi_) {
    defer(id, WebhookOutcome{WebhookOutcome::Status::kTransport, 0, {}, "libcurl is not available", 0});
  } else if (in_flight_ < options_.max_in_flight) {
    start(ref);
  } else if (queue_.size() < options_.max_queued) {
    queue_.push_back(id);
  } else {
    defer(id, WebhookOutcome{WebhookOutcome::Status::kOverloaded, 0, {}, "too many webhook requests waiting", 0});
  }
  return id;
}

void WebhookClient::start(Request& r) {
  const int64_t remaining = r.deadline_ms - nowMs();
  if (remaining < kMinAttemptMs) {
    defer(r.id, WebhookOutcome{WebhookOutcome::Status::kTimeout, 0, {}, "deadline passed before sending", r.attempts});
    return;
  }
  if (!r.easy) {
    r.easy = curl_easy_init();
    if (!r.easy) {
      defer(r.id, WebhookOutcome{WebhookOutcome::Status::kTransport, 0, {}, "curl_easy_init failed", r.attempts});
      return;
    }
    r.headers = curl_slist_append(r.headers, "Content-Type: application/json");
    r.headers = curl_slist_append(r.headers, "Accept: application/json");
    r.headers = curl_slist_append(r.headers, "Expect:");
    for (const auto& [name, value] : r.req.headers) {
      r.headers = curl_slist_append(r.headers, (name + ": " + value).c_str());
    }
    CURL* e = r.easy;
    curl_easy_setopt(e, CURLOPT_URL, r.req.url.c_str());
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.req.body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.req.body.size()));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r.headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &WebhookClientCallbacks::onWrite);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(e, CURLOPT_PRIVATE, &r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r.errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "pgwarden");
  }
  r.response.clear();
  r.too_large = false;
  r.errbuf[0] = 0;
  ++r.attempts;
  curl_easy_setopt(r.easy, CURLOPT_TIMEOUT_MS, static_cast<long>(remaining));
  curl_easy_setopt(r.easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(remaining));
  if (curl_multi_add_handle(static_cast<CURLM*>(multi_), r.easy) != CURLM_OK) {
    defer(r.id, WebhookOutcome{WebhookOutcome::Status::kTransport, 0, {}, "curl_multi_add_handle failed", r.attempts});
    return;
  }
  r.running = true;
  ++in_flight_;
}

void WebhookClient::detach(Request& r) {
  if (r.running) {
    curl_multi_remove_handle(static_cast<CURLM*>(multi_), r.easy);
    r.running = false;
    --in_flight_;
  }
}

void WebhookClient::processDone() {
  std::weak_ptr<bool> alive = alive_;
  int left = 0;
  std::vector<std::pair<uint64_t, WebhookOutcome>> finished;
  while (CURLMsg* msg = curl_multi_info_read(static_cast<CURLM*>(multi_), &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Request* r = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&r));
    if (!r) continue;
    const CURLcode code = msg->data.result;
    long http = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &http);
    detach(*r);
    WebhookOutcome o;
    o.attempts = r->attempts;
    o.http_status = http;
    bool retryable = false;
    if (code == CURLE_OK && http >= 200 && http < 300) {
      o.status = WebhookOutcome::Status::kOk;
      o.body = std::move(r->response);
    } else if (code == CURLE_OK) {
      o.status = WebhookOutcome::Status::kHttpError;
      o.error = "HTTP status " + std::to_string(http);
      retryable = http >= 500;
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
      o.status = WebhookOutcome::Status::kTimeout;
      o.error = r->errbuf[0] ? r->errbuf : curl_easy_strerror(code);
    } else {
      o.status = WebhookOutcome::Status::kTransport;
      o.error = r->too_large ? "the answer is larger than " + std::to_string(r->req.max_response_bytes) + " bytes"
                             : (r->errbuf[0] ? std::string(r->errbuf) : std::string(curl_easy_strerror(code)));
      retryable = !r->too_large;
    }
    if (retryable && r->attempts <= r->req.retries && r->deadline_ms - nowMs() >= kMinAttemptMs) {
      start(*r);
      continue;
    }
    finished.emplace_back(r->id, std::move(o));
  }
  for (auto& [id, o] : finished) {
    if (alive.expired() || !*alive.lock()) return;
    finish(id, std::move(o));
  }
  if (alive.expired() || !*alive.lock()) return;
  startQueued();
}

void WebhookClient::startQueued() {
  while (!queue_.empty() && in_flight_ < options_.max_in_flight) {
    const uint64_t id = queue_.front();
    queue_.pop_front();
    auto it = requests_.find(id);
    if (it != requests_.end()) start(*it->second);
  }
}

void WebhookClient::defer(uint64_t id, WebhookOutcome outcome) {
  deferred_.emplace_back(id, std::move(outcome));
  if (deferred_timer_) uv_timer_start(deferred_timer_, &WebhookClientCallbacks::onDeferred, 0, 0);
}

void WebhookClient::finish(uint64_t id, WebhookOutcome outcome) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;  // cancelled
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  detach(*r);
  if (r->easy) curl_easy_cleanup(r->easy);
  if (r->headers) curl_slist_free_all(r->headers);
  r->easy = nullptr;
  r->headers = nullptr;
  if (outcome.status == WebhookOutcome::Status::kOk) {
    ++completed_;
  } else {
    ++failed_;
  }
  Done done = std::move(r->done);
  r.reset();
  if (done) done(std::move(outcome));
}

void WebhookClient::cancel(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  detach(*r);
  if (r->easy) curl_easy_cleanup(r->easy);
  if (r->headers) curl_slist_free_all(r->headers);
  queue_.erase(std::remove(queue_.begin(), queue_.end(), id), queue_.end());
  startQueued();
}

}  // namespace pgwarden::net
