// The HTTP request decoder without sockets: a request whole, byte by byte and split anywhere;
// pipelined requests one at a time; early refusal of garbage; the header, header-count and body
// caps; HTTP versions; random input.
#include "net/http_request_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/http_transport.h"

namespace pgwarden::daemon {
namespace {

using Status = net::HttpRequestParser::Status;

const std::string kGood =
    "GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9930\r\nAccept: application/openmetrics-text\r\n"
    "Authorization: Bearer abc\r\nUser-Agent: Prometheus/2.42.0\r\n\r\n";

// Feeds `data` in pieces of `step` bytes as a connection would (keeping what was not consumed);
// the requests decoded, and the error status (0 when none).
struct Fed {
  std::vector<net::HttpRequest> requests;
  int error = 0;
};
Fed feedInSteps(std::string_view data, size_t step, size_t max_header = 8192,
                size_t max_body = 1024) {
  net::HttpRequestParser p(max_header, max_body);
  Fed out;
  std::string in;
  for (size_t at = 0; at < data.size() || !in.empty();) {
    if (at < data.size()) {
      in.append(data.substr(at, step));
      at += step;
    }
    for (;;) {
      const auto [status, n] = p.feed(in);
      in.erase(0, n);
      if (status == Status::kError) {
        out.error = p.errorStatus();
        return out;
      }
      if (status == Status::kNeedMore) break;
      out.requests.push_back(p.take());
    }
    if (at >= data.size()) break;
  }
  return out;
}

TEST(HttpRequestParser, ParsesACompleteRequest) {
  net::HttpRequestParser p(8192, 0);
  const auto r = p.feed(kGood);
  ASSERT_EQ(r.status, Status::kRequest) << p.errorText();
  EXPECT_EQ(r.consumed, kGood.size());
  EXPECT_TRUE(p.keepAlive());
  EXPECT_FALSE(p.head());
  const net::HttpRequest req = p.take();
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path, "/metrics");
  EXPECT_EQ(req.query, "x=1");
  EXPECT_EQ(req.header("accept"), "application/openmetrics-text");
  EXPECT_EQ(req.header("authorization"), "Bearer abc");
  EXPECT_TRUE(req.body.empty());
}

TEST(HttpRequestParser, TheQueryEndsAtTheFragment) {
  net::HttpRequestParser p(8192, 0);
  ASSERT_EQ(
      p.feed("GET /studio/conversation?id=a%20b&since=1h#s3 HTTP/1.1\r\nHost: x\r\n\r\n").status,
      Status::kRequest);
  const net::HttpRequest req = p.take();
  EXPECT_EQ(req.path, "/studio/conversation");
  EXPECT_EQ(req.query, "id=a%20b&since=1h");
  net::HttpRequestParser q(8192, 0);
  ASSERT_EQ(q.feed("GET /studio/ HTTP/1.1\r\nHost: x\r\n\r\n").status, Status::kRequest);
  EXPECT_EQ(q.take().query, "");
}

TEST(HttpRequestParser, AHeaderValueExcludesTheWhitespaceAroundIt) {
  net::HttpRequestParser p(8192, 0);
  ASSERT_EQ(p.feed("GET / HTTP/1.1\r\nHost: x\r\nMcp-Name:   query \t \r\nX-Empty:  \r\n"
                   "X-Inner: a  b\r\n\r\n")
                .status,
            Status::kRequest);
  const net::HttpRequest req = p.take();
  EXPECT_EQ(req.header("mcp-name"), "query");
  EXPECT_EQ(req.header("x-empty"), "");
  EXPECT_EQ(req.header("x-inner"), "a  b");
}

TEST(HttpRequestParser, EveryPrefixWaitsAndEverySplitGivesTheSameRequest) {
  for (size_t n = 0; n < kGood.size(); ++n) {
    net::HttpRequestParser p(8192, 0);
    const auto r = p.feed(std::string_view(kGood).substr(0, n));
    EXPECT_EQ(r.status, Status::kNeedMore) << "prefix of " << n << " bytes: " << p.errorText();
  }
  for (size_t step : {1u, 2u, 7u, 64u}) {
    const Fed f = feedInSteps(kGood, step);
    ASSERT_EQ(f.requests.size(), 1u) << step;
    EXPECT_EQ(f.requests[0].path, "/metrics");
    EXPECT_EQ(f.requests[0].header("user-agent"), "Prometheus/2.42.0");
  }
}

TEST(HttpRequestParser, PipelinedRequestsComeOneAtATime) {
  const std::string two = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc" + kGood;
  net::HttpRequestParser p(8192, 1024);
  const auto first = p.feed(two);
  ASSERT_EQ(first.status, Status::kRequest);
  EXPECT_EQ(p.take().body, "abc");
  const auto second = p.feed(std::string_view(two).substr(first.consumed));
  ASSERT_EQ(second.status, Status::kRequest);
  EXPECT_EQ(first.consumed + second.consumed, two.size());
  EXPECT_EQ(p.take().path, "/metrics");
  for (size_t step : {1u, 5u, 100u}) EXPECT_EQ(feedInSteps(two, step).requests.size(), 2u);
}

TEST(HttpRequestParser, HeadHttp10AndConnectionClose) {
  net::HttpRequestParser p(8192, 0);
  ASSERT_EQ(p.feed("HEAD /healthz HTTP/1.0\r\nHost: x\r\n\r\n").status, Status::kRequest);
  EXPECT_TRUE(p.head());
  EXPECT_FALSE(p.keepAlive());
  net::HttpRequestParser q(8192, 0);
  ASSERT_EQ(q.feed("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").status, Status::kRequest);
  EXPECT_FALSE(q.keepAlive());
}

TEST(HttpRequestParser, RefusesGarbageOnTheFirstByte) {
  for (std::string_view bad :
       {std::string_view("\x16\x03\x01", 3), std::string_view("\0", 1), std::string_view("GE(T")}) {
    net::HttpRequestParser p(8192, 0);
    EXPECT_EQ(p.feed(bad).status, Status::kError) << bad;
    EXPECT_EQ(p.errorStatus(), 400);
    EXPECT_EQ(p.feed("GET / HTTP/1.1\r\n\r\n").status, Status::kError);  // stays failed
  }
}

TEST(HttpRequestParser, RefusesMalformedLinesAndHeaders) {
  for (const char* bad :
       {"GET /metrics HTTP/1.1 extra\r\n\r\n", "GET metrics HTTP/1.1\r\n\r\n",
        "GET /m\x01x HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nNoColonHere\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"}) {
    const Fed f = feedInSteps(bad, 3);
    EXPECT_EQ(f.error, 400) << bad;
    EXPECT_TRUE(f.requests.empty()) << bad;
  }
  EXPECT_EQ(feedInSteps("GET /metrics HTTP/2.0\r\n\r\n", 100).error, 505);
}

TEST(HttpRequestParser, EnforcesTheHeaderCapWithAndWithoutTerminator) {
  const std::string big = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a');
  EXPECT_EQ(feedInSteps(big, 512).error, 431);
  EXPECT_EQ(feedInSteps(big + "\r\n\r\n", 512).error, 431);
  const std::string fits = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(8000, 'a') + "\r\n\r\n";
  EXPECT_EQ(feedInSteps(fits, 512).requests.size(), 1u);
  std::string many = "GET / HTTP/1.1\r\n";
  for (size_t i = 0; i <= net::HttpRequestParser::kMaxHeaders; ++i) many += "A: b\r\n";
  EXPECT_EQ(feedInSteps(many + "\r\n", 64).error, 431);
}

TEST(HttpRequestParser, EnforcesTheBodyCapAtTheHeadersWhenItCan) {
  // Declared too long: refused before any body byte.
  net::HttpRequestParser p(8192, 4);
  EXPECT_EQ(p.feed("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n").status, Status::kError);
  EXPECT_EQ(p.errorStatus(), 413);
  // Chunked: refused when the chunks pass the cap, or at once when no body is allowed.
  EXPECT_EQ(
      feedInSteps(
          "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n",
          4, 8192, 4)
          .error,
      413);
  net::HttpRequestParser none(8192, 0);
  EXPECT_EQ(none.feed("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").status,
            Status::kError);
  EXPECT_EQ(none.errorStatus(), 413);
  net::HttpRequestParser zero(8192, 0);
  EXPECT_EQ(zero.feed("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").status, Status::kRequest);
}

TEST(HttpRequestParser, AsksForContinueOncePerRequest) {
  net::HttpRequestParser p(8192, 16);
  EXPECT_EQ(p.feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n").status,
            Status::kNeedMore);
  EXPECT_TRUE(p.takeContinue());
  EXPECT_FALSE(p.takeContinue());
  EXPECT_EQ(p.feed("ok").status, Status::kRequest);
}

TEST(HttpRequestParser, SurvivesRandomInput) {
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  size_t decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string data;
    const size_t len = static_cast<size_t>(seed % 64);
    for (size_t k = 0; k < len; ++k) {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      const char alphabet[] = "GET /metrics HTTP/1.1\r\n:\0\xff\x16 aA";
      data.push_back(alphabet[seed % (sizeof(alphabet) - 1)]);
    }
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    const Fed whole = feedInSteps(data, 64, 32, 0);
    const Fed split = feedInSteps(data, 1, 32, 0);
    ASSERT_EQ(whole.requests.size(), split.requests.size()) << data;
    ASSERT_EQ(whole.error, split.error) << data;
    decoded += whole.requests.size();
  }
  std::printf("[ measure  ] %zu requests decoded from random input\n", decoded);
}

TEST(HttpListenAddress, ParsesV4V6AndLocalhost) {
  auto v4 = net::parseHttpListenAddress("127.0.0.1:9930");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->ss_family, AF_INET);
  auto v6 = net::parseHttpListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.error();
  EXPECT_EQ(v6->ss_family, AF_INET6);
  EXPECT_TRUE(net::parseHttpListenAddress("localhost:9930").ok());
  for (const char* bad : {"", "9930", "127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:99x",
                          "example.com:9930", "::1:9930", "[::1]9930"}) {
    EXPECT_FALSE(net::parseHttpListenAddress(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace pgwarden::daemon
