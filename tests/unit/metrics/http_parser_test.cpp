// The request parser and helpers behind the HTTP endpoint, without sockets: byte by byte,
// early rejection of garbage, size limits, authorization, config and listen addresses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/config_util.h"
#include "net/http_server.h"

namespace pgwarden::daemon::metrics {
namespace {

const std::string kGood =
    "GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9930\r\nAccept: application/openmetrics-text\r\n"
    "Authorization: Bearer abc\r\nUser-Agent: Prometheus/2.42.0\r\n\r\n";

TEST(HttpParser, ParsesACompleteRequest) {
  ParseResult r = parseHttpRequest(kGood, 8192);
  ASSERT_EQ(r.status, ParseStatus::kComplete) << r.error;
  EXPECT_EQ(r.request.method, "GET");
  EXPECT_EQ(r.request.target, "/metrics?x=1");
  EXPECT_EQ(r.request.path, "/metrics");
  EXPECT_EQ(r.request.accept, "application/openmetrics-text");
  EXPECT_EQ(r.request.authorization, "Bearer abc");
  EXPECT_FALSE(r.request.has_body);
}

TEST(HttpParser, EveryPrefixIsIncompleteNeverBad) {
  for (size_t n = 0; n < kGood.size(); ++n) {
    ParseResult r = parseHttpRequest(std::string_view(kGood).substr(0, n), 8192);
    EXPECT_EQ(r.status, ParseStatus::kIncomplete) << "prefix of " << n << " bytes: " << r.error;
  }
}

TEST(HttpParser, AcceptsBareLineFeedsAndHttp10) {
  ParseResult r = parseHttpRequest("HEAD /healthz HTTP/1.0\nHost: x\n\n", 8192);
  ASSERT_EQ(r.status, ParseStatus::kComplete) << r.error;
  EXPECT_EQ(r.request.method, "HEAD");
  EXPECT_EQ(r.request.path, "/healthz");
}

TEST(HttpParser, RejectsGarbageOnTheFirstByte) {
  // A TLS ClientHello starts with 0x16: refused before any line ends.
  EXPECT_EQ(parseHttpRequest("\x16\x03\x01", 8192).status, ParseStatus::kBad);
  EXPECT_EQ(parseHttpRequest("\r\n", 8192).status, ParseStatus::kBad);
  EXPECT_EQ(parseHttpRequest(std::string_view("\0", 1), 8192).status, ParseStatus::kBad);
  EXPECT_EQ(parseHttpRequest("GE(T", 8192).status, ParseStatus::kBad);
  EXPECT_EQ(parseHttpRequest("AVERYVERYLONGMETHODNAME", 8192).status, ParseStatus::kBad);
}

TEST(HttpParser, RejectsMalformedRequestLinesAsSoonAsTheyEnd) {
  for (const char* bad : {"GET\r\n", "GET /metrics\r\n", "GET  /metrics HTTP/1.1\r\n",
                          "GET /metrics HTTP/1.1 extra\r\n", "GET metrics HTTP/1.1\r\n",
                          "GET http://host/metrics HTTP/1.1\r\n", "GET /metrics HTTP/2.0\r\n",
                          "GET /metrics HTTP/1.1\r\r\n", "GET /m\x01x HTTP/1.1\r\n"}) {
    ParseResult r = parseHttpRequest(bad, 8192);
    EXPECT_EQ(r.status, ParseStatus::kBad) << bad;
    EXPECT_FALSE(r.error.empty());
  }
}

TEST(HttpParser, RejectsMalformedHeaders) {
  for (const char* bad :
       {"GET / HTTP/1.1\r\nNoColonHere\r\n\r\n", "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"}) {
    EXPECT_EQ(parseHttpRequest(bad, 8192).status, ParseStatus::kBad) << bad;
  }
}

TEST(HttpParser, FlagsBodies) {
  EXPECT_FALSE(
      parseHttpRequest("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 8192).request.has_body);
  EXPECT_TRUE(
      parseHttpRequest("GET / HTTP/1.1\r\nContent-Length: 10\r\n\r\n", 8192).request.has_body);
  EXPECT_TRUE(parseHttpRequest("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 8192)
                  .request.has_body);
}

TEST(HttpParser, EnforcesTheSizeLimitWithAndWithoutTerminator) {
  std::string big = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a');
  EXPECT_EQ(parseHttpRequest(big, 8192).status, ParseStatus::kBad);
  EXPECT_EQ(parseHttpRequest(big + "\r\n\r\n", 8192).status, ParseStatus::kBad);
  std::string fits = "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(8000, 'a') + "\r\n\r\n";
  EXPECT_EQ(parseHttpRequest(fits, 8192).status, ParseStatus::kComplete);
  std::string exact = "GET / HTTP/1.1\r\n\r\n";
  EXPECT_EQ(parseHttpRequest(exact, exact.size()).status, ParseStatus::kComplete);
  EXPECT_EQ(parseHttpRequest(exact, exact.size() - 1).status, ParseStatus::kBad);
}

TEST(HttpParser, LimitsTheNumberOfHeaders) {
  std::string req = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) req += "A: b\r\n";
  EXPECT_EQ(parseHttpRequest(req + "\r\n", 8192).status, ParseStatus::kBad);
}

TEST(HttpParser, SurvivesRandomInput) {
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 20000; ++i) {
    std::string data;
    size_t len = static_cast<size_t>(seed % 64);
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
    (void)parseHttpRequest(data, 32);
  }
  SUCCEED();
}

TEST(HttpAuth, BearerTokenComparedExactly) {
  HttpAuth auth{HttpAuth::Kind::kBearer, "s3cret-token"};
  EXPECT_TRUE(authorized(auth, "Bearer s3cret-token"));
  EXPECT_TRUE(authorized(auth, "bearer s3cret-token"));
  EXPECT_FALSE(authorized(auth, "Bearer s3cret-toke"));
  EXPECT_FALSE(authorized(auth, "Bearer s3cret-token2"));
  EXPECT_FALSE(authorized(auth, "Bearer "));
  EXPECT_FALSE(authorized(auth, ""));
  EXPECT_FALSE(authorized(auth, "Basic czNjcmV0LXRva2Vu"));
  EXPECT_TRUE(authorized(HttpAuth{}, ""));
}

TEST(HttpAuth, BasicCredentialsAreDecoded) {
  HttpAuth auth{HttpAuth::Kind::kBasic, "prom:pa:ss"};
  EXPECT_TRUE(authorized(auth, "Basic cHJvbTpwYTpzcw=="));  // prom:pa:ss
  EXPECT_TRUE(authorized(auth, "Basic cHJvbTpwYTpzcw"));    // padding omitted
  EXPECT_FALSE(authorized(auth, "Basic cHJvbTpwYXNz"));     // prom:pass
  EXPECT_FALSE(authorized(auth, "Basic !!!!"));
  EXPECT_FALSE(authorized(auth, "Bearer prom:pa:ss"));
}

TEST(ListenAddress, ParsesV4V6AndLocalhost) {
  auto v4 = parseListenAddress("127.0.0.1:9930");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->ss_family, AF_INET);
  auto v6 = parseListenAddress("[::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.error();
  EXPECT_EQ(v6->ss_family, AF_INET6);
  EXPECT_TRUE(parseListenAddress("localhost:9930").ok());
  for (const char* bad : {"", "9930", "127.0.0.1", "127.0.0.1:", "127.0.0.1:70000", "127.0.0.1:99x",
                          "example.com:9930", "::1:9930", "[::1]9930"}) {
    EXPECT_FALSE(parseListenAddress(bad).ok()) << bad;
  }
}

class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    char name[] = "/tmp/pgw-metrics-XXXXXX";
    int fd = ::mkstemp(name);
    path_ = name;
    ::write(fd, content.data(), content.size());
    ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(MetricsConfig, DefaultsWhenAbsent) {
  HttpServerOptions o = parseMetricsConfig(YAML::Node());
  EXPECT_EQ(o.listen, "127.0.0.1:9930");
  EXPECT_EQ(o.max_clients, 64u);
  EXPECT_EQ(o.read_timeout, std::chrono::seconds(10));
  EXPECT_EQ(o.auth.kind, HttpAuth::Kind::kNone);
}

TEST(MetricsConfig, ReadsEveryKey) {
  TempFile token("tok-123\n");
  YAML::Node n = YAML::Load(
      "listen: '[::1]:9999'\nmax_clients: 8\nread_timeout: 2s\n"
      "bearer_token_file: " +
      token.path() + "\n");
  HttpServerOptions o = parseMetricsConfig(n);
  EXPECT_EQ(o.listen, "[::1]:9999");
  EXPECT_EQ(o.max_clients, 8u);
  EXPECT_EQ(o.read_timeout, std::chrono::seconds(2));
  EXPECT_EQ(o.auth.kind, HttpAuth::Kind::kBearer);
  EXPECT_EQ(o.auth.secret, "tok-123");
  TempFile basic("prom:secret\n");
  HttpServerOptions b = parseMetricsConfig(YAML::Load("basic_auth_file: " + basic.path() + "\n"));
  EXPECT_EQ(b.auth.kind, HttpAuth::Kind::kBasic);
  EXPECT_EQ(b.auth.secret, "prom:secret");
  EXPECT_EQ(parseMetricsConfig(YAML::Load("listen: ''")).listen, "");
}

TEST(MetricsConfig, ErrorsNameTheKeyAndLine) {
  auto keyOf = [](const std::string& yaml) -> std::string {
    try {
      (void)parseMetricsConfig(YAML::Load(yaml));
    } catch (const config::ConfigError& e) {
      EXPECT_GT(e.line(), 0) << yaml;
      return e.key();
    }
    return "(no error)";
  };
  EXPECT_EQ(keyOf("listen: x\nbogus: 1\n"), "metrics.bogus");
  EXPECT_EQ(keyOf("listen: example.com:80\n"), "metrics.listen");
  EXPECT_EQ(keyOf("max_clients: 0\n"), "metrics.max_clients");
  EXPECT_EQ(keyOf("read_timeout: 0\n"), "metrics.read_timeout");
  TempFile bad("no-colon\n");
  EXPECT_EQ(keyOf("basic_auth_file: " + bad.path() + "\n"), "metrics.basic_auth_file");
  EXPECT_EQ(keyOf("bearer_token_file: /nonexistent/token\n"), "metrics.bearer_token_file");
  TempFile t("x\n");
  EXPECT_EQ(keyOf("bearer_token_file: " + t.path() + "\nbasic_auth_file: " + t.path() + "\n"),
            "metrics.basic_auth_file");
}

}  // namespace
}  // namespace pgwarden::daemon::metrics
