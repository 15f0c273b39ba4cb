// libFuzzer target: the HTTP request decoder both endpoints use (net/http_request_parser, over
// http-parser), driven as a connection drives it: bytes fed in pieces, unconsumed bytes kept,
// one request taken at a time. The same input split two ways must decode the same; every request
// stays within the caps; and the metrics endpoint's Authorization check runs on what came out.
#include <string>
#include <vector>

#include "net/http_auth.h"
#include "net/http_request_parser.h"
#include "tests/fuzz/fuzz_util.h"

using pgwarden::net::HttpRequest;
using pgwarden::net::HttpRequestParser;
namespace m = pgwarden::net;
using pgwarden::fuzz::Input;

namespace {

struct Decoded {
  std::vector<HttpRequest> requests;
  int error = 0;
};

Decoded decode(std::string_view data, size_t step, size_t max_header, size_t max_body) {
  HttpRequestParser p(max_header, max_body);
  Decoded out;
  std::string in;
  size_t at = 0;
  while (at < data.size()) {
    in.append(data.substr(at, step));
    at += step;
    for (;;) {
      const auto [status, n] = p.feed(in);
      PGW_FUZZ_CHECK(n <= in.size());
      in.erase(0, n);
      if (status == HttpRequestParser::Status::kError) {
        out.error = p.errorStatus();
        PGW_FUZZ_CHECK(!p.errorText().empty());
        return out;
      }
      if (status == HttpRequestParser::Status::kNeedMore) {
        PGW_FUZZ_CHECK(in.empty());
        break;
      }
      out.requests.push_back(p.take());
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const size_t max_header = (mode & 1) != 0 ? 8192 : 64 + (mode >> 1);
  const size_t max_body = (mode & 2) != 0 ? 0 : 256;
  const size_t step = 1 + (mode >> 4);
  const std::string_view req = in.rest();

  const Decoded whole = decode(req, req.size() + 1, max_header, max_body);
  const Decoded split = decode(req, step, max_header, max_body);
  // Which error comes first may depend on the split (a cap is checked on the bytes each callback
  // brings, a bad byte when it is reached), but not whether there is one.
  PGW_FUZZ_CHECK((whole.error == 0) == (split.error == 0));
  PGW_FUZZ_CHECK(whole.requests.size() == split.requests.size());
  const m::HttpAuth bearer{m::HttpAuth::Kind::kBearer, "fuzz-token"};
  const m::HttpAuth basic{m::HttpAuth::Kind::kBasic, "scraper:fuzz-password"};
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    const HttpRequest& r = whole.requests[i];
    PGW_FUZZ_CHECK(!r.method.empty());
    PGW_FUZZ_CHECK(r.method == split.requests[i].method && r.path == split.requests[i].path &&
                   r.headers == split.requests[i].headers && r.body == split.requests[i].body);
    PGW_FUZZ_CHECK(r.body.size() <= max_body);
    PGW_FUZZ_CHECK(r.headers.size() <= HttpRequestParser::kMaxHeaders);
    const std::string_view authorization = r.header("authorization");
    PGW_FUZZ_CHECK(m::authorized(m::HttpAuth{}, authorization));
    PGW_FUZZ_CHECK(!(m::authorized(bearer, authorization) && m::authorized(basic, authorization)));
  }
  return 0;
}
