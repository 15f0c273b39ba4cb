// libFuzzer target: the request parser of the metrics and health endpoint, as the server calls it:
// on everything received so far, after every read. Every prefix of the input is parsed in turn
// (the server stops at the first complete or bad answer), and the Authorization check runs on
// what the parser took out of the headers.
#include "net/http_server.h"
#include "tests/fuzz/fuzz_util.h"

namespace m = pgwarden::daemon::metrics;
using pgwarden::fuzz::Input;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint8_t mode = in.byte();
  const size_t max_bytes = (mode & 1) != 0 ? 8192 : 64 + (mode >> 1);
  const std::string_view req = in.rest();

  m::ParseResult last;
  size_t end = 0;
  for (end = 1; end <= req.size(); ++end) {
    last = m::parseHttpRequest(req.substr(0, end), max_bytes);
    if (last.status != m::ParseStatus::kIncomplete) break;
    // Waiting for more is only allowed while the headers fit the cap.
    PGW_FUZZ_CHECK(end <= max_bytes);
  }
  if (last.status == m::ParseStatus::kBad) {
    PGW_FUZZ_CHECK(!last.error.empty());
    return 0;
  }
  if (last.status != m::ParseStatus::kComplete) return 0;
  const m::HttpRequest& r = last.request;
  PGW_FUZZ_CHECK(!r.method.empty() && !r.target.empty());
  PGW_FUZZ_CHECK(r.path.size() <= r.target.size());
  // Bytes after the request (a pipelined one, a body) do not change the answer.
  const m::ParseResult whole = m::parseHttpRequest(req, max_bytes);
  PGW_FUZZ_CHECK(whole.status == m::ParseStatus::kComplete);
  PGW_FUZZ_CHECK(whole.request.method == r.method && whole.request.target == r.target &&
                 whole.request.authorization == r.authorization);

  m::HttpAuth bearer{m::HttpAuth::Kind::kBearer, "fuzz-token"};
  m::HttpAuth basic{m::HttpAuth::Kind::kBasic, "scraper:fuzz-password"};
  PGW_FUZZ_CHECK(m::authorized(m::HttpAuth{}, r.authorization));
  const bool b1 = m::authorized(bearer, r.authorization);
  const bool b2 = m::authorized(basic, r.authorization);
  PGW_FUZZ_CHECK(!(b1 && b2));
  return 0;
}
