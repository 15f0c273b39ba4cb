// The history studio: read-only pages at /studio/ on the metrics listener (behind its auth, GET
// and HEAD only; the endpoint checks both before serve()). Conversations, a conversation's
// timeline, the four reports with charts, and the live figures. Every store query runs on the
// reader thread (studio/reader_thread.h); the loop only routes and hands answers back.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "net/metrics_endpoint.h"
#include "studio/reader_thread.h"

namespace pgwarden::studio {

struct StudioOptions {
  std::string store;      // "sqlite" or "postgres"
  std::string target;     // the SQLite file or the libpq connection string
  size_t max_queue = 16;  // pages waiting for the reader thread; beyond, 503
};

struct LiveFigures {
  uint64_t sessions = 0;    // client sessions open now (wire protocol and MCP)
  uint64_t statements = 0;  // statements finished since start, every outcome
};
// Runs on the loop; calls `done` (now or on a later turn) with the current figures.
using LiveSource = std::function<void(std::function<void(LiveFigures)> done)>;

class Studio final : public net::HttpPages {
 public:
  Studio(uv_loop_t* loop, StudioOptions options, LiveSource live);
  ~Studio() override;
  Studio(const Studio&) = delete;
  Studio& operator=(const Studio&) = delete;

  std::string_view prefix() const override;
  void serve(const net::HttpRequest& request,
             std::function<void(net::HttpResponse)> answer) override;
  // Stops the reader thread (after its current query). Safe to call twice.
  void close();

 private:
  void live(std::function<void(net::HttpResponse)> answer);

  StudioOptions options_;
  LiveSource live_;
  std::shared_ptr<ReaderThread> reader_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The answer to a page request that needs no store (assets, redirects, 404s), or nothing when
// the page reads the store. Exposed for tests.
std::optional<net::HttpResponse> staticAnswer(const net::HttpRequest& request);
// Renders the page for `path` (under /studio/) and `query` from the open store. Exposed for tests.
net::HttpResponse renderPage(history::ReportReader& reader, const std::string& path,
                             const std::string& query, int64_t now_us);

}  // namespace pgwarden::studio
