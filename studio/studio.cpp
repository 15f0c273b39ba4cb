// Routing and the pages' jobs. The endpoint has checked auth and method; here a path is a known
// page, an asset, the live figures, or 404.
#include "studio/studio.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>

#include "history/report.h"
#include "history/text.h"
#include "studio/assets.h"
#include "studio/pages.h"
#include "studio/query.h"

namespace pgwarden::studio {

namespace {

using net::HttpRequest;
using net::HttpResponse;

constexpr std::string_view kHtml = "text/html; charset=utf-8";

// Scripts and styles only from the studio itself, no frames, no inline script: a value that
// escaped escaping still could not run.
void secure(HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                         "connect-src 'self'; form-action 'self'; base-uri 'none'; "
                         "frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("Cache-Control", "no-store");
}

HttpResponse make(int status, std::string_view type, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = type;
  r.body = std::move(body);
  secure(r);
  return r;
}

int64_t nowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool isReport(const std::string& page, history::ReportKind* kind) {
  return page != "conversation" && history::parseReportKind(page, kind);
}

Result<history::ReportTable> run(history::ReportReader& reader, const Sql& sql) {
  return reader.query(sql.text, sql.params);
}

}  // namespace

std::optional<HttpResponse> staticAnswer(const HttpRequest& req) {
  if (req.path == "/studio") {
    HttpResponse r = make(301, "text/plain; charset=utf-8", "moved to /studio/\n");
    r.headers.emplace_back("Location", "/studio/");
    return r;
  }
  const std::string page = req.path.substr(kPrefix.size());
  if (page == "studio.css") return make(200, "text/css; charset=utf-8", std::string(kStudioCss));
  if (page == "favicon.svg") return make(200, "image/svg+xml", std::string(kStudioIcon));
  if (page == "studio.js") {
    return make(200, "text/javascript; charset=utf-8", std::string(kStudioJs));
  }
  history::ReportKind kind{};
  if (page.empty() || page == "conversation" || page == "api/live" || isReport(page, &kind)) {
    return std::nullopt;
  }
  return make(404, "text/plain; charset=utf-8", "not found\n");
}

HttpResponse renderPage(history::ReportReader& reader, const std::string& path,
                        const std::string& query, int64_t now_us) {
  const std::string page = path.substr(kPrefix.size());
  auto filter = parseFilter(query);
  if (!filter.ok()) return make(400, kHtml, errorPage("Bad request", filter.error(), Filter{}));
  const Filter& f = *filter;
  const history::Dialect d = reader.dialect();
  auto failed = [&](const std::string& why) {
    spdlog::warn("studio: reading the history store failed: {}", why);
    return make(500, kHtml, errorPage("The history store could not be read", why, f));
  };
  if (page.empty()) {
    auto rows = run(reader, conversationsSql(d, f, now_us));
    if (!rows.ok()) return failed(rows.error());
    return make(200, kHtml, conversationsPage(f, *rows));
  }
  if (page == "conversation") {
    if (f.id.empty()) return make(400, kHtml, errorPage("Bad request", "id: missing", f));
    auto rows = run(reader, timelineSql(d, f, now_us));
    if (!rows.ok()) return failed(rows.error());
    return make(200, kHtml, timelinePage(f, *rows));
  }
  history::ReportKind kind{};
  if (!isReport(page, &kind)) return make(404, "text/plain; charset=utf-8", "not found\n");
  history::ReportOptions o;
  o.kind = kind;
  o.since = f.range;
  o.limit = kReportRows;
  o.now_us = now_us;
  auto rows = history::runReport(reader, o);
  if (!rows.ok()) return failed(rows.error());
  Result<history::ReportTable> extra = history::ReportTable{};
  if (kind == history::ReportKind::kDenials) extra = run(reader, denialsOverTimeSql(d, f, now_us));
  if (kind == history::ReportKind::kZeros) extra = run(reader, zerosByTableSql(d, f, now_us));
  if (!extra.ok()) return failed(extra.error());
  return make(200, kHtml, reportPage(kind, f, *rows, *extra));
}

Studio::Studio(uv_loop_t* loop, StudioOptions options, LiveSource live)
    : options_(std::move(options)), live_(std::move(live)) {
  reader_ = ReaderThread::start(
      loop,
      [store = options_.store, target = options_.target] {
        return history::openReportReader(store, target);
      },
      options_.max_queue);
}

Studio::~Studio() { close(); }

void Studio::close() {
  *alive_ = false;
  if (reader_) reader_->stop();
}

std::string_view Studio::prefix() const { return kPrefix; }

void Studio::serve(const HttpRequest& req, std::function<void(HttpResponse)> answer) {
  if (auto r = staticAnswer(req)) {
    answer(std::move(*r));
    return;
  }
  if (req.path == "/studio/api/live") {
    live(std::move(answer));
    return;
  }
  const int64_t now = nowUs();
  auto job = [path = req.path, query = req.query, now](history::ReportReader* reader,
                                                       const std::string& error) {
    if (reader == nullptr) {
      return make(503, kHtml, errorPage("The history store is not available", error, Filter{}));
    }
    return renderPage(*reader, path, query, now);
  };
  // Kept for the refusal below: submit() consumes its arguments only when it takes the job.
  auto shared = std::make_shared<std::function<void(HttpResponse)>>(std::move(answer));
  if (!reader_->submit(job, [shared](HttpResponse r) { (*shared)(std::move(r)); })) {
    HttpResponse busy = make(503, "text/plain; charset=utf-8", "the studio is busy; retry\n");
    busy.headers.emplace_back("Retry-After", "1");
    (*shared)(std::move(busy));
  }
}

void Studio::live(std::function<void(HttpResponse)> answer) {
  if (!live_) {
    answer(make(200, "application/json", "{\"sessions\":0,\"statements\":0}\n"));
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  live_([alive, answer = std::move(answer)](LiveFigures fig) {
    if (auto a = alive.lock(); !a || !*a) return;
    answer(make(200, "application/json",
                "{\"sessions\":" + std::to_string(fig.sessions) +
                    ",\"statements\":" + std::to_string(fig.statements) + "}\n"));
  });
}

}  // namespace pgwarden::studio
