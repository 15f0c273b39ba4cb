// The transport's streamed answers on a real loop and socket: headers at once, body bytes as they
// are sent, the end by finish() or by the client going away (the handler hears of the latter
// only), and a stream dropped rather than buffered past its cap.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <string>
#include <vector>

#include "net/http_transport.h"

using namespace pgwarden::daemon;

namespace {

class Handler : public HttpHandler {
 public:
  void onHttpRequest(uint64_t exchange, HttpRequest&&) override { requests.push_back(exchange); }
  void onHttpAbandoned(uint64_t exchange) override { abandoned.push_back(exchange); }
  std::vector<uint64_t> requests;
  std::vector<uint64_t> abandoned;
};

class HttpStream : public ::testing::Test {
 protected:
  void SetUp() override {
    uv_loop_init(&loop_);
    HttpTransportOptions o;
    o.listen = "127.0.0.1:0";
    o.max_stream_queue_bytes = 1024;
    t_ = HttpTransport::create(&loop_, o, &handler_);
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
    HttpResponse r;
    r.content_type = "text/event-stream";
    r.stream = true;
    t_->respond(e, std::move(r));
  }

  uv_loop_t loop_{};
  Handler handler_;
  std::shared_ptr<HttpTransport> t_;
  int fd_ = -1;
};

}  // namespace

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
