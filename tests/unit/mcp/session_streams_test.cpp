// The server-to-client stream's pure parts: the logging levels as logging/setLevel accepts them,
// the SSE framing and notification shapes a client parses, a stream answer's headers, and which
// exchange is which session's stream as streams open, are replaced, abandoned and end.
#include "mcp/session_streams.h"

#include <gtest/gtest.h>

#include "net/http_transport.h"

using namespace pgwarden::mcp;
using pgwarden::net::appendHttpResponse;
using pgwarden::net::HttpResponse;

TEST(SessionStreams, LogLevelsParseInSeverityOrder) {
  const char* names[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};
  std::optional<LogLevel> prev;
  for (const char* n : names) {
    const auto l = parseLogLevel(n);
    ASSERT_TRUE(l) << n;
    EXPECT_STREQ(logLevelName(*l), n);
    if (prev) {
      EXPECT_LT(*prev, *l) << n;
    }
    prev = l;
  }
  EXPECT_FALSE(parseLogLevel("WARNING"));
  EXPECT_FALSE(parseLogLevel("warn"));
  EXPECT_FALSE(parseLogLevel(""));
}

TEST(SessionStreams, NotificationsAreFramedAsOneSseEvent) {
  const Json n = logNotification(LogLevel::kWarning, "statement_cancelled", "cancelled", {{"tool", "query"}});
  EXPECT_EQ(n["method"], "notifications/message");
  EXPECT_FALSE(n.contains("id"));
  EXPECT_EQ(n["params"]["level"], "warning");
  EXPECT_EQ(n["params"]["logger"], "pgwarden");
  EXPECT_EQ(n["params"]["data"]["event"], "statement_cancelled");
  EXPECT_EQ(n["params"]["data"]["tool"], "query");
  const std::string e = sseEvent(toolsListChangedNotification());
  EXPECT_EQ(e, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n");
  // A message text with a newline must not end the event early: JSON escapes it.
  const std::string m = sseEvent(logNotification(LogLevel::kInfo, "x", "two\nlines"));
  EXPECT_EQ(m.find("\n\n"), m.size() - 2);
}

TEST(SessionStreams, StreamAnswerHasNoLengthAndEndsTheConnection) {
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.stream = true;
  std::string head;
  appendHttpResponse(head, r, true);
  EXPECT_EQ(head.find("Content-Length"), std::string::npos);
  EXPECT_NE(head.find("Cache-Control: no-cache\r\n"), std::string::npos);
  EXPECT_NE(head.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  r.stream = false;
  std::string plain;
  appendHttpResponse(plain, r, true);
  EXPECT_NE(plain.find("Content-Length: 0\r\n"), std::string::npos);
}

TEST(SessionStreams, AnswerIsAppendedWhole) {
  // A pipelined answer lands behind what the connection still has queued, byte for byte.
  HttpResponse r;
  r.content_type = "application/json";
  r.headers = {{"Mcp-Session-Id", "abc"}};
  r.body = R"({"jsonrpc":"2.0","id":1,"result":{}})";
  std::string out = "queued";
  appendHttpResponse(out, r, true);
  EXPECT_EQ(out,
            "queuedHTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 36\r\n"
            "Mcp-Session-Id: abc\r\nCache-Control: no-store\r\nConnection: keep-alive\r\n\r\n"
            R"({"jsonrpc":"2.0","id":1,"result":{}})");
  r.status = 404;
  r.body.clear();
  r.headers.clear();
  r.content_type.clear();
  std::string closing;
  appendHttpResponse(closing, r, false);
  EXPECT_EQ(closing,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nCache-Control: no-store\r\n"
            "Connection: close\r\n\r\n");
}

TEST(SessionStreams, OneStreamPerSessionReplacedAbandonedEnded) {
  SessionStreams s;  // no transport: what it tracks, not what it writes
  s.open("a", 1, 0);
  s.open("b", 2, 0);
  EXPECT_EQ(s.size(), 2u);
  s.open("a", 3, 0);  // a reconnect replaces the older stream
  EXPECT_EQ(s.size(), 2u);
  EXPECT_FALSE(s.abandoned(1));  // the replaced exchange is no longer a stream
  EXPECT_TRUE(s.abandoned(3));
  EXPECT_FALSE(s.has("a"));
  EXPECT_TRUE(s.has("b"));
  s.end("b");
  EXPECT_FALSE(s.has("b"));
  EXPECT_FALSE(s.abandoned(2));
  // A stream that cannot be written is forgotten, so the client may open another.
  s.open("c", 4, 0);
  EXPECT_FALSE(s.send("c", toolsListChangedNotification(), 1));
  EXPECT_FALSE(s.has("c"));
  EXPECT_FALSE(s.send("nobody", toolsListChangedNotification(), 1));
}
