// The metrics endpoint's pure parts, without sockets: authorization and the `metrics:` section.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "common/config_util.h"
#include "net/metrics_endpoint.h"

namespace pgwarden::metrics {
namespace {

using daemon::authorized;
using daemon::HttpAuth;

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
  net::MetricsEndpointOptions o = net::parseMetricsConfig(YAML::Node());
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
  net::MetricsEndpointOptions o = net::parseMetricsConfig(n);
  EXPECT_EQ(o.listen, "[::1]:9999");
  EXPECT_EQ(o.max_clients, 8u);
  EXPECT_EQ(o.read_timeout, std::chrono::seconds(2));
  EXPECT_EQ(o.auth.kind, HttpAuth::Kind::kBearer);
  EXPECT_EQ(o.auth.secret, "tok-123");
  TempFile basic("prom:secret\n");
  net::MetricsEndpointOptions b = net::parseMetricsConfig(YAML::Load("basic_auth_file: " + basic.path() + "\n"));
  EXPECT_EQ(b.auth.kind, HttpAuth::Kind::kBasic);
  EXPECT_EQ(b.auth.secret, "prom:secret");
  EXPECT_EQ(net::parseMetricsConfig(YAML::Load("listen: ''")).listen, "");
}

TEST(MetricsConfig, ErrorsNameTheKeyAndLine) {
  auto keyOf = [](const std::string& yaml) -> std::string {
    try {
      (void)net::parseMetricsConfig(YAML::Load(yaml));
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
}  // namespace pgwarden::metrics
