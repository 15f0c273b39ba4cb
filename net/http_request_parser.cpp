// http-parser's callbacks gather one request's parts; the parser pauses itself after each whole
// request, so pipelined bytes stay with the caller until it wants the next one.
#include "net/http_request_parser.h"

#include <http_parser.h>

#include <algorithm>

namespace pgwarden::net {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

const char* errorTextOf(int status) {
  switch (status) {
    case 413:
      return "request body too large";
    case 431:
      return "request headers too large";
    case 505:
      return "HTTP version not supported";
    default:
      return "bad request";
  }
}

}  // namespace

std::string_view HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [n, v] : headers) {
    if (n == lower_name) return v;
  }
  return {};
}

bool HttpRequest::hasHeader(std::string_view lower_name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return h.first == lower_name; });
}

struct HttpRequestParser::Callbacks {
  static HttpRequestParser& of(http_parser* p) { return *static_cast<HttpRequestParser*>(p->data); }

  static int onMessageBegin(http_parser* p) {
    HttpRequestParser& c = of(p);
    c.req_ = HttpRequest();
    c.target_.clear();
    c.field_.clear();
    c.value_.clear();
    c.header_bytes_ = 0;
    c.last_was_value_ = false;
    c.in_request_ = true;
    c.head_ = false;
    return 0;
  }
  static int onUrl(http_parser* p, const char* at, size_t n) {
    HttpRequestParser& c = of(p);
    if (!c.countHeader(n)) return -1;
    c.target_.append(at, n);
    return 0;
  }
  static int onHeaderField(http_parser* p, const char* at, size_t n) {
    HttpRequestParser& c = of(p);
    if (!c.countHeader(n)) return -1;
    if (c.last_was_value_ && !c.pushHeader()) return -1;
    c.last_was_value_ = false;
    c.field_.append(at, n);
    return 0;
  }
  static int onHeaderValue(http_parser* p, const char* at, size_t n) {
    HttpRequestParser& c = of(p);
    if (!c.countHeader(n)) return -1;
    c.last_was_value_ = true;
    c.value_.append(at, n);
    return 0;
  }
  static int onHeadersComplete(http_parser* p) {
    HttpRequestParser& c = of(p);
    if (!c.pushHeader()) return -1;
    if (c.req_.headers.size() > kMaxHeaders) {
      c.error_status_ = 431;
      return -1;
    }
    // http-parser takes any one-digit version; only HTTP/1.0 and 1.1 are spoken here.
    if (p->http_major != 1) {
      c.error_status_ = 505;
      return -1;
    }
    c.req_.method = http_method_str(static_cast<http_method>(p->method));
    c.head_ = p->method == HTTP_HEAD;
    c.req_.path = c.target_.substr(0, c.target_.find_first_of("?#"));
    if (const auto q = c.target_.find('?'); q != std::string::npos && q < c.target_.find('#')) {
      c.req_.query = c.target_.substr(q + 1, c.target_.find('#', q) - q - 1);
    }
    // A chunked body's size is known only as it comes; with no body allowed it is refused now.
    if (((p->flags & F_CONTENTLENGTH) != 0 && p->content_length > c.max_body_bytes_) ||
        ((p->flags & F_CHUNKED) != 0 && c.max_body_bytes_ == 0)) {
      c.error_status_ = 413;
      return -1;
    }
    c.keep_alive_ = http_should_keep_alive(p) != 0;
    // A client that waits for leave to send its body (curl does, above 1 KiB) gets it at once.
    c.continue_due_ = p->http_minor >= 1 && c.req_.header("expect") == "100-continue";
    return 0;
  }
  static int onBody(http_parser* p, const char* at, size_t n) {
    HttpRequestParser& c = of(p);
    if (c.req_.body.size() + n > c.max_body_bytes_) {
      c.error_status_ = 413;
      return -1;
    }
    c.req_.body.append(at, n);
    return 0;
  }
  static int onMessageComplete(http_parser* p) {
    HttpRequestParser& c = of(p);
    c.keep_alive_ = http_should_keep_alive(p) != 0;
    c.in_request_ = false;
    // One request at a time: the parser stops right after it.
    http_parser_pause(p, 1);
    return 0;
  }
  static const http_parser_settings* settings() {
    static const http_parser_settings s = [] {
      http_parser_settings x;
      http_parser_settings_init(&x);
      x.on_message_begin = &onMessageBegin;
      x.on_url = &onUrl;
      x.on_header_field = &onHeaderField;
      x.on_header_value = &onHeaderValue;
      x.on_headers_complete = &onHeadersComplete;
      x.on_body = &onBody;
      x.on_message_complete = &onMessageComplete;
      return x;
    }();
    return &s;
  }
};

HttpRequestParser::HttpRequestParser(size_t max_header_bytes, size_t max_body_bytes)
    : parser_(std::make_unique<http_parser>()),
      max_header_bytes_(max_header_bytes),
      max_body_bytes_(max_body_bytes) {
  http_parser_init(parser_.get(), HTTP_REQUEST);
  parser_->data = this;
}

HttpRequestParser::~HttpRequestParser() = default;

HttpRequestParser::Result HttpRequestParser::feed(std::string_view data) {
  if (failed_) return {Status::kError, 0};
  http_parser_pause(parser_.get(), 0);
  const size_t n =
      http_parser_execute(parser_.get(), Callbacks::settings(), data.data(), data.size());
  const auto err = HTTP_PARSER_ERRNO(parser_.get());
  if (err == HPE_PAUSED) return {Status::kRequest, n};
  if (err != HPE_OK) {
    failed_ = true;
    if (error_status_ == 0) {
      error_status_ = 400;
      error_text_ = std::string("malformed HTTP request: ") + http_errno_name(err);
    } else if (error_text_.empty()) {
      error_text_ = errorTextOf(error_status_);
    }
    return {Status::kError, n};
  }
  return {Status::kNeedMore, n};
}

bool HttpRequestParser::countHeader(size_t n) {
  header_bytes_ += n;
  if (header_bytes_ > max_header_bytes_) {
    error_status_ = 431;
    return false;
  }
  return true;
}

bool HttpRequestParser::pushHeader() {
  if (field_.empty()) return true;
  // http-parser (not built strict) lets spaces into a field name; RFC 9112 section 5.1 wants such
  // a request refused, as proxies may read the name differently.
  if (field_.find_first_of(" \t") != std::string::npos) {
    error_status_ = 400;
    error_text_ = "malformed HTTP request: whitespace in a header name";
    return false;
  }
  std::transform(field_.begin(), field_.end(), field_.begin(), lower);
  // The value excludes the whitespace around it (RFC 9112 section 5): http-parser drops the
  // leading whitespace only, so "Mcp-Name: query  " would not equal the body's "query".
  while (!value_.empty() && (value_.back() == ' ' || value_.back() == '\t')) value_.pop_back();
  req_.headers.emplace_back(std::move(field_), std::move(value_));
  field_.clear();
  value_.clear();
  return true;
}

}  // namespace pgwarden::net
