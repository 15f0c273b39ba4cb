// The transport on a real loop and socket, for what both endpoints rely on: HEAD answers without
// their body, answers given later, a last answer followed by more bytes that still arrives whole
// (linger), the refusals reported to the handler, the connection cap making room, and streamed
// answers.
#include "net/http_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <string>
#include <utility>
#include <vector>

namespace pgwarden::daemon {
namespace {

class Handler : public net::HttpHandler {
 public:
  void onHttpRequest(uint64_t exchange, net::HttpRequest&& req) override {
    requests.emplace_back(exchange, std::move(req));
    if (answer_at_once && transport) transport->respond(exchange, answer);
  }
  void onHttpAbandoned(uint64_t exchange) override { abandoned.push_back(exchange); }
  void onHttpRefused(net::HttpRefusal why, int status) override {
    refused.emplace_back(why, status);
  }
  net::HttpTransport* transport = nullptr;
  bool answer_at_once = true;
  net::HttpResponse answer;
  std::vector<std::pair<uint64_t, net::HttpRequest>> requests;
  std::vector<uint64_t> abandoned;
  std::vector<std::pair<net::HttpRefusal, int>> refused;
};

class HttpTransportTest : public ::testing::Test {
 protected:
  void start(net::HttpTransportOptions o) {
    uv_loop_init(&loop_);
    o.listen = "127.0.0.1:0";
    t_ = net::HttpTransport::create(&loop_, o, &handler_);
    handler_.transport = t_.get();
    handler_.answer.content_type = "text/plain";
    handler_.answer.body = "hello\n";
    ASSERT_TRUE(t_->start().ok());
  }
  void TearDown() override {
    for (int fd : fds_) ::close(fd);
    if (t_) t_->close();
    t_.reset();
    for (int i = 0; i < 100 && uv_run(&loop_, UV_RUN_NOWAIT) != 0; ++i) {
    }
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }
  void spin(int turns = 20) {
    for (int i = 0; i < turns; ++i) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      usleep(2000);
    }
  }
  int connectAndSend(const std::string& bytes) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(t_->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    if (!bytes.empty()) {
      EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    }
    fds_.push_back(fd);
    spin(5);
    return fd;
  }
  // Runs the loop until the server closes `fd`; what the client received.
  std::string readToEnd(int fd, bool& eof) {
    std::string out;
    eof = false;
    char buf[4096];
    for (int i = 0; i < 500 && !eof; ++i) {
      spin(1);
      for (;;) {
        const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
          out.append(buf, static_cast<size_t>(n));
          continue;
        }
        eof = n == 0;
        break;
      }
    }
    return out;
  }

  uv_loop_t loop_{};
  Handler handler_;
  std::shared_ptr<net::HttpTransport> t_;
  std::vector<int> fds_;
};

TEST_F(HttpTransportTest, HeadGetsTheLengthWithoutTheBody) {
  start({});
  const int fd = connectAndSend("HEAD /x HTTP/1.1\r\nConnection: close\r\n\r\n");
  bool eof = false;
  const std::string reply = readToEnd(fd, eof);
  EXPECT_TRUE(eof);
  EXPECT_NE(reply.find("Content-Length: 6\r\n"), std::string::npos) << reply;
  EXPECT_EQ(reply.substr(reply.size() - 4), "\r\n\r\n") << reply;
  ASSERT_EQ(handler_.requests.size(), 1u);
  EXPECT_EQ(handler_.requests[0].second.method, "HEAD");
}

TEST_F(HttpTransportTest, AnAnswerGivenLaterGoesOutAndTheNextRequestFollows) {
  start({});
  handler_.answer_at_once = false;
  const int fd =
      connectAndSend("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(handler_.requests.size(), 1u);  // the second waits for the first's answer
  handler_.answer_at_once = true;
  t_->respond(handler_.requests[0].first, handler_.answer);
  bool eof = false;
  const std::string reply = readToEnd(fd, eof);
  EXPECT_TRUE(eof);
  ASSERT_EQ(handler_.requests.size(), 2u);
  EXPECT_EQ(handler_.requests[1].second.path, "/b");
  EXPECT_NE(reply.find("Connection: keep-alive"), reply.rfind("Connection: close")) << reply;
}

TEST_F(HttpTransportTest, ALastAnswerArrivesWholeThoughTheClientSendsMore) {
  net::HttpTransportOptions o;
  o.max_body_bytes = 0;
  start(o);
  handler_.answer.body = std::string(200000, 'x');
  const int fd =
      connectAndSend("GET / HTTP/1.1\r\nConnection: close\r\n\r\n" + std::string(40000, 'j'));
  bool eof = false;
  const std::string reply = readToEnd(fd, eof);
  EXPECT_TRUE(eof);
  EXPECT_NE(reply.find("Content-Length: 200000\r\n"), std::string::npos);
  EXPECT_EQ(reply.size() - reply.find("\r\n\r\n") - 4, 200000u);
}

TEST_F(HttpTransportTest, RefusalsAreReportedToTheHandler) {
  net::HttpTransportOptions o;
  o.max_header_bytes = 64;
  o.max_body_bytes = 0;
  start(o);
  bool eof = false;
  readToEnd(connectAndSend("\x16\x03\x01"), eof);
  readToEnd(connectAndSend("GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n"), eof);
  readToEnd(connectAndSend("GET / HTTP/1.1\r\nContent-Length: 1\r\n\r\n"), eof);
  const std::vector<std::pair<net::HttpRefusal, int>> want = {{net::HttpRefusal::kMalformed, 400},
                                                              {net::HttpRefusal::kTooLarge, 431},
                                                              {net::HttpRefusal::kTooLarge, 413}};
  EXPECT_EQ(handler_.refused, want);
  EXPECT_TRUE(handler_.requests.empty());
}

TEST_F(HttpTransportTest, AtTheCapTheLongestWaitingClientGivesWay) {
  net::HttpTransportOptions o;
  o.max_connections = 2;
  start(o);
  handler_.answer_at_once = false;
  const int silent = connectAndSend("");
  const int busy = connectAndSend("GET /busy HTTP/1.1\r\n\r\n");  // waiting for its answer
  ASSERT_EQ(handler_.requests.size(), 1u);
  const int probe = connectAndSend("GET /probe HTTP/1.1\r\n\r\n");
  bool eof = false;
  EXPECT_TRUE(readToEnd(silent, eof).empty());
  EXPECT_TRUE(eof) << "the silent client should have made room";
  ASSERT_EQ(handler_.refused.size(), 1u);
  EXPECT_EQ(handler_.refused[0].first, net::HttpRefusal::kEvicted);
  ASSERT_EQ(handler_.requests.size(), 2u);
  // Now both are waiting for answers: a newcomer is refused.
  const int late = connectAndSend("GET /late HTTP/1.1\r\n\r\n");
  const std::string reply = readToEnd(late, eof);
  EXPECT_EQ(reply.rfind("HTTP/1.1 503 ", 0), 0u) << reply;
  EXPECT_EQ(handler_.refused.back().first, net::HttpRefusal::kOverCapacity);
  (void)busy;
  (void)probe;
}

TEST_F(HttpTransportTest, ASilentClientTimesOutAsARefusal) {
  net::HttpTransportOptions o;
  o.read_timeout = std::chrono::milliseconds(100);
  start(o);
  bool eof = false;
  EXPECT_TRUE(readToEnd(connectAndSend(""), eof).empty());
  EXPECT_TRUE(eof);
  ASSERT_EQ(handler_.refused.size(), 1u);
  EXPECT_EQ(handler_.refused[0].first, net::HttpRefusal::kReadTimeout);
}

// ---- streamed answers: headers at once, body bytes as they are sent, the end by finish() or by
// the client going away (the handler hears of the latter only), and a stream dropped rather than
// buffered past its cap ----

class StreamHandler : public net::HttpHandler {
 public:
  void onHttpRequest(uint64_t exchange, net::HttpRequest&&) override {
    requests.push_back(exchange);
  }
  void onHttpAbandoned(uint64_t exchange) override { abandoned.push_back(exchange); }
  std::vector<uint64_t> requests;
  std::vector<uint64_t> abandoned;
};

class HttpStream : public ::testing::Test {
 protected:
  void SetUp() override {
    uv_loop_init(&loop_);
    net::HttpTransportOptions o;
    o.listen = "127.0.0.1:0";
    o.max_stream_queue_bytes = 1024;
    t_ = net::HttpTransport::create(&loop_, o, &handler_);
    ASSERT_TRUE(t_->start().ok());
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    t_->close();
    t_.reset();
    for (int i = 0; i < 100 && uv_run(&loop_, UV_RUN_NOWAIT) != 0; ++i) {
    }
    uv_loop_close(&loop_);
  }
  void spin(int turns = 20) {
    for (int i = 0; i < turns; ++i) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      usleep(2000);
    }
  }
  // Connects and sends a GET; returns its exchange once the handler has it.
  uint64_t get() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(t_->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    const std::string req = "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n";
    EXPECT_EQ(::send(fd_, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    for (int i = 0; i < 200 && handler_.requests.empty(); ++i) spin(1);
    return handler_.requests.empty() ? 0 : handler_.requests.back();
  }
  // What the client has received so far; `eof` set when the server closed.
  std::string drain(bool& eof) {
    std::string out;
    eof = false;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      eof = n == 0;
      return out;
    }
  }
  void openStream(uint64_t e) {
    net::HttpResponse r;
    r.content_type = "text/event-stream";
    r.stream = true;
    t_->respond(e, std::move(r));
  }

  uv_loop_t loop_{};
  StreamHandler handler_;
  std::shared_ptr<net::HttpTransport> t_;
  int fd_ = -1;
};

TEST_F(HttpStream, BytesFlowUntilFinish) {
  const uint64_t e = get();
  ASSERT_NE(e, 0u);
  openStream(e);
  spin();
  bool eof = false;
  std::string got = drain(eof);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(got.find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_FALSE(eof);
  ASSERT_TRUE(t_->send(e, "data: one\n\n"));
  ASSERT_TRUE(t_->send(e, "data: two\n\n"));
  spin();
  EXPECT_EQ(drain(eof), "data: one\n\ndata: two\n\n");
  t_->finish(e);
  EXPECT_FALSE(t_->send(e, "data: late\n\n"));
  spin();
  EXPECT_EQ(drain(eof), "");
  EXPECT_TRUE(eof);
  EXPECT_TRUE(handler_.abandoned.empty());  // the server ended it: nothing to tell
}

TEST_F(HttpStream, ClientLeavingIsReported) {
  const uint64_t e = get();
  ASSERT_NE(e, 0u);
  openStream(e);
  spin();
  ::close(fd_);
  fd_ = -1;
  for (int i = 0; i < 100 && handler_.abandoned.empty(); ++i) spin(1);
  ASSERT_EQ(handler_.abandoned.size(), 1u);
  EXPECT_EQ(handler_.abandoned[0], e);
  EXPECT_FALSE(t_->send(e, "data: x\n\n"));
}

TEST_F(HttpStream, MoreThanTheCapDropsTheStream) {
  const uint64_t e = get();
  ASSERT_NE(e, 0u);
  openStream(e);
  spin();
  EXPECT_FALSE(t_->send(e, std::string(2000, 'x')));
  EXPECT_FALSE(t_->send(e, "data: x\n\n"));
  spin();
  bool eof = false;
  const std::string got = drain(eof);
  EXPECT_EQ(got.find(std::string(10, 'x')), std::string::npos);
  EXPECT_TRUE(eof);
  EXPECT_TRUE(handler_.abandoned.empty());
}

}  // namespace
}  // namespace pgwarden::daemon
