// The credentials an HTTP endpoint asks for (net/http_auth.cpp): a bearer token compared exactly,
// basic credentials decoded from base64, with or without padding.
#include "net/http_auth.h"

#include <gtest/gtest.h>

namespace pgwarden::metrics {
namespace {

using net::authorized;
using net::HttpAuth;

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

}  // namespace
}  // namespace pgwarden::metrics
