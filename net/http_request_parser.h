// One connection's HTTP/1.x request decoder over the packaged http-parser: bytes in, one whole
// request out at a time, within the header and body caps. It decides nothing and touches no
// socket, so the transport and the fuzz target drive the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct http_parser;

namespace pgwarden::net {

struct HttpRequest {
  std::string method;                                        // "POST", "GET", ...
  std::string path;                                          // the target without query or fragment
  std::string query;                                         // after '?', before '#'; undecoded
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::string peer_host;  // the client's address without port
  bool loopback = false;  // the client connected from 127.0.0.0/8 or ::1
  // The value of header `lower_name` ("" when absent; the first when repeated).
  std::string_view header(std::string_view lower_name) const;
  bool hasHeader(std::string_view lower_name) const;
};

class HttpRequestParser {
 public:
  enum class Status : uint8_t {
    kNeedMore,  // every byte given was consumed
    kRequest,   // a whole request is in: take() it; bytes after it were not consumed
    kError,     // errorStatus() and errorText() say why; the connection should end
  };
  struct Result {
    Status status = Status::kNeedMore;
    size_t consumed = 0;
  };
  static constexpr size_t kMaxHeaders = 100;

  // max_body_bytes 0: a request that declares a body is an error (413) as soon as its headers end.
  HttpRequestParser(size_t max_header_bytes, size_t max_body_bytes);
  ~HttpRequestParser();
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Parses from the start of `data`, stopping right after one whole request. After kError every
  // later call is kError again.
  Result feed(std::string_view data);
  // The request of the last kRequest.
  HttpRequest take() { return std::move(req_); }
  // A request has begun (its first byte is in) and is not whole yet.
  bool inRequest() const { return in_request_; }
  // The last request lets the connection stay open (HTTP/1.1 default, or keep-alive asked).
  bool keepAlive() const { return keep_alive_; }
  // The request (whole or in progress) is HEAD: its answer has no body.
  bool head() const { return head_; }
  // True once per request whose headers asked for "100-continue": send it before more is read.
  bool takeContinue() { return std::exchange(continue_due_, false); }
  int errorStatus() const { return error_status_; }  // 400, 413, 431 or 505
  const std::string& errorText() const { return error_text_; }

 private:
  struct Callbacks;
  bool countHeader(size_t n);
  [[nodiscard]] bool pushHeader();

  std::unique_ptr<::http_parser> parser_;
  size_t max_header_bytes_;
  size_t max_body_bytes_;
  HttpRequest req_;
  std::string target_;
  std::string field_;
  std::string value_;
  size_t header_bytes_ = 0;
  int error_status_ = 0;
  std::string error_text_;
  bool last_was_value_ = false;
  bool in_request_ = false;
  bool keep_alive_ = true;
  bool head_ = false;
  bool continue_due_ = false;
  bool failed_ = false;
};

}  // namespace pgwarden::net
