// SQL analysis: libpg_query's JSON parse read with simdjson, one StatementInfo per statement,
// the libpg_query fingerprint, and the bounded LRU cache the session loop consults first.
#include "analysis/analysis.h"

#include <pg_query.h>
#include <pthread.h>
#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "analysis/pg_json.h"
#include "analysis/shape.h"
#include "analysis/shape_template.h"
#include "analysis/statement_walker.h"
#include "common/lru_map.h"

namespace pgwarden::analysis {

const char* kindName(StatementKind kind) {
  switch (kind) {
    case StatementKind::kSelect: return "select";
    case StatementKind::kInsert: return "insert";
    case StatementKind::kUpdate: return "update";
    case StatementKind::kDelete: return "delete";
    case StatementKind::kMerge: return "merge";
    case StatementKind::kDdl: return "ddl";
    case StatementKind::kTransaction: return "transaction";
    case StatementKind::kSet: return "set";
    case StatementKind::kReset: return "reset";
    case StatementKind::kShow: return "show";
    case StatementKind::kExplain: return "explain";
    case StatementKind::kCopy: return "copy";
    case StatementKind::kCall: return "call";
    case StatementKind::kDo: return "do";
    case StatementKind::kPrepare: return "prepare";
    case StatementKind::kExecute: return "execute";
    case StatementKind::kDeallocate: return "deallocate";
    case StatementKind::kDeclareCursor: return "declare_cursor";
    case StatementKind::kFetch: return "fetch";
    case StatementKind::kClosePortal: return "close";
    case StatementKind::kListen: return "listen";
    case StatementKind::kNotify: return "notify";
    case StatementKind::kUnlisten: return "unlisten";
    case StatementKind::kDiscard: return "discard";
    case StatementKind::kMaintenance: return "maintenance";
    case StatementKind::kLock: return "lock";
    case StatementKind::kAlterSystem: return "alter_system";
    case StatementKind::kLoad: return "load";
    case StatementKind::kOther: return "other";
  }
  return "other";
}

const char* intentName(Intent intent) {
  switch (intent) {
    case Intent::kCatalog: return "catalog";
    case Intent::kLookup: return "lookup";
    case Intent::kAggregation: return "aggregation";
    case Intent::kWrite: return "write";
    case Intent::kDdl: return "ddl";
    case Intent::kAdmin: return "admin";
    case Intent::kOther: return "other";
  }
  return "other";
}

namespace {

// The lowest address of this thread's stack (the main thread's as its RLIMIT_STACK allows), or
// 0 when unknown.
uintptr_t stackLow() {
  thread_local const uintptr_t low = [] {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return uintptr_t{0};
    void* addr = nullptr;
    size_t size = 0;
    const int rc = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    return rc == 0 ? reinterpret_cast<uintptr_t>(addr) : uintptr_t{0};
  }();
  return low;
}

// How deep a parse tree this thread's free stack can walk: libpg_query's JSON output and the
// walkers recurse about once per level, measured at 210 to 250 bytes a level (Release; twice
// that is allowed, four times under AddressSanitizer), with 256 KiB kept for the rest.
size_t treeDepthHere() {
#if defined(__SANITIZE_ADDRESS__)
  constexpr size_t kBytesPerLevel = 2048;
#else
  constexpr size_t kBytesPerLevel = 512;
#endif
  constexpr size_t kReserve = 256 * 1024;
  const uintptr_t low = stackLow();
  char here = 0;
  const uintptr_t top = reinterpret_cast<uintptr_t>(&here);
  if (low == 0 || top <= low + kReserve) return simdjson::DEFAULT_MAX_DEPTH;
  const size_t levels = (top - low - kReserve) / kBytesPerLevel;
  // In steps of 1,024, so the parser is not resized for every small change in the caller's depth.
  // A small stack gets what it holds (at least 64 levels), never more.
  if (levels < simdjson::DEFAULT_MAX_DEPTH) return std::max<size_t>(levels, 64);
  return std::clamp<size_t>(levels / 1024 * 1024, simdjson::DEFAULT_MAX_DEPTH, kMaxTreeDepth);
}

// libpg_query keeps its memory contexts per thread, and so does this parser: the analyzer runs
// on the loop thread, and a second thread simply gets its own. Its depth limit is what the
// thread's stack can walk, at most kMaxTreeDepth (simdjson's default of 1,024 refused 145 nested
// scalar subqueries that PostgreSQL runs).
simdjson::dom::parser& jsonParser(size_t max_depth) {
  thread_local simdjson::dom::parser parser;
  if (parser.max_depth() != max_depth) {
    const auto err = parser.allocate(
        std::max(parser.capacity(), simdjson::dom::MINIMAL_DOCUMENT_CAPACITY), max_depth);
    if (err != simdjson::SUCCESS) return parser;  // out of memory: the parse will fail and say so
  }
  return parser;
}

// simdjson reads up to SIMDJSON_PADDING bytes past the end; pg_query's buffer has no such slack,
// so the JSON is copied into one reused, padded buffer instead of a fresh allocation per parse.
std::string& paddedBuffer() {
  thread_local std::string buffer;
  return buffer;
}

// As libpg_query prints it: 16 lower-case hex digits.
std::string fingerprintHex(uint64_t fp) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 15; i >= 0; --i, fp >>= 4) hex[static_cast<size_t>(i)] = kDigits[fp & 0xF];
  return hex;
}

void fingerprint(const std::string& text, Analysis& out) {
  PgQueryFingerprintResult f = pg_query_fingerprint(text.c_str());
  if (!f.error) {
    out.fingerprint = f.fingerprint;
    if (f.fingerprint_str) out.fingerprint_hex = f.fingerprint_str;
  }
  pg_query_free_fingerprint_result(f);
}

}  // namespace

std::string invalidUtf8Message(std::string_view text) {
  if (simdjson::validate_utf8(text.data(), text.size())) return "";
  // The first character that is not valid, as the server's pg_utf8_islegal judges it.
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    const size_t len = c < 0x80             ? 1
                       : (c & 0xE0) == 0xC0 ? 2
                       : (c & 0xF0) == 0xE0 ? 3
                       : (c & 0xF8) == 0xF0 ? 4
                                            : 0;
    bool ok = len != 0 && i + len <= n && !(c >= 0x80 && c < 0xC2) && c <= 0xF4;
    for (size_t k = 1; ok && k < len; ++k) ok = (s[i + k] & 0xC0) == 0x80;
    if (ok && len >= 3) {
      const unsigned char a = s[i + 1];
      if (c == 0xE0) ok = a >= 0xA0;
      if (c == 0xED) ok = a <= 0x9F;
      if (c == 0xF0) ok = a >= 0x90;
      if (c == 0xF4) ok = a <= 0x8F;
    }
    if (!ok) break;
    i += len;
  }
  // report_invalid_encoding: as many bytes as the lead byte announces, at most what is left.
  const unsigned char lead = i < n ? s[i] : 0;
  const size_t want = (lead & 0xE0) == 0xC0   ? 2
                      : (lead & 0xF0) == 0xE0 ? 3
                      : (lead & 0xF8) == 0xF0 ? 4
                                              : 1;
  std::string bytes;
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t k = 0; k < want && i + k < n; ++k) {
    if (k > 0) bytes.push_back(' ');
    bytes += "0x";
    bytes.push_back(kHex[s[i + k] >> 4]);
    bytes.push_back(kHex[s[i + k] & 0xF]);
  }
  return "invalid byte sequence for encoding \"UTF8\": " + bytes;
}

std::shared_ptr<const Analysis> analyzeUncached(std::string_view sql) {
  auto analysis = std::make_shared<Analysis>();
  if (sql.find('\0') != std::string_view::npos) {
    analysis->error = "statement text contains a zero byte";
    return analysis;
  }
  // The server refuses such a text before it lexes it; so does pgwarden, with the server's words.
  if (std::string message = invalidUtf8Message(sql); !message.empty()) {
    analysis->error = std::move(message);
    analysis->error_sqlstate = "22021";
    return analysis;
  }
  const std::string text(sql);  // pg_query wants a NUL-terminated string
  PgQueryParseResult parsed = pg_query_parse(text.c_str());
  if (parsed.error) {
    analysis->error = parsed.error->message ? parsed.error->message : "syntax error";
    analysis->error_position = parsed.error->cursorpos;
    pg_query_free_parse_result(parsed);
    return analysis;
  }

  simdjson::dom::element root;
  std::string& buffer = paddedBuffer();
  const size_t json_len = std::strlen(parsed.parse_tree);
  if (buffer.capacity() < json_len + simdjson::SIMDJSON_PADDING) {
    buffer.reserve(json_len + simdjson::SIMDJSON_PADDING);
  }
  buffer.assign(parsed.parse_tree, json_len);
  simdjson::dom::parser& parser = jsonParser(treeDepthHere());
  const auto err = parser.parse(buffer.data(), json_len, false).get(root);
  if (err) {
    // Refuse rather than guess (or overflow the stack). Nesting deeper than the walk can hold is
    // the one failure a valid UTF-8 text can meet here; any other is named as what it is.
    if (err == simdjson::DEPTH_ERROR) {
      analysis->error = "statement is nested deeper than pgwarden analyses (" +
                        std::to_string(parser.max_depth()) + " levels of parse tree)";
      analysis->error_sqlstate = "54001";
    } else {
      analysis->error = std::string("pgwarden could not read the parse tree of this statement (") +
                        simdjson::error_message(err) + ")";
      analysis->error_sqlstate = "XX000";
    }
    pg_query_free_parse_result(parsed);
    return analysis;
  }
  simdjson::dom::array stmts;
  if (root["stmts"].get_array().get(stmts) == simdjson::SUCCESS) {
    for (simdjson::dom::element raw : stmts) {
      simdjson::dom::object o;
      if (raw.get_object().get(o)) continue;
      StatementInfo st;
      st.location = static_cast<int>(pgjson::int64(o, "stmt_location", 0));
      const int len = static_cast<int>(pgjson::int64(o, "stmt_len", 0));
      st.length = len > 0 ? len : static_cast<int>(sql.size()) - st.location;
      simdjson::dom::element node;
      if (pgjson::get(o, "stmt", node)) {
        detail::walkStatement(node, sql, st);
        if (st.kind == StatementKind::kSelect) {
          detail::walkScreenFacts(node, sql, st.location, st.screen);
          detail::findKeyedRead(node, st.keyed);
        }
      }
      analysis->statements.push_back(std::move(st));
    }
  }
  pg_query_free_parse_result(parsed);
  // Reads are fingerprinted from the tree at hand; anything else by libpg_query, which parses
  // the text a second time (about as long as the first parse).
  uint64_t fp = 0;
  if (pgjson::fingerprintSelects(root, fp)) {
    analysis->fingerprint = fp;
    analysis->fingerprint_hex = fingerprintHex(fp);
  } else {
    fingerprint(text, *analysis);
  }
  analysis->ok = true;
  return analysis;
}

// ---- the caches ----

struct Analyzer::Impl {
  Impl(size_t entries, size_t bytes) : max_bytes(bytes), exact(entries), shapes(entries), seen(entries) {}

  size_t max_bytes;
  LruMap<std::shared_ptr<const Analysis>> exact;
  // A shape's template; null when probing failed, so that the shape is not probed again.
  LruMap<std::shared_ptr<const ShapeTemplate>> shapes;
  SeenKeys seen;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t shape_hits = 0;
  uint64_t shape_misses = 0;
  size_t capacity = 0;
  // The lexer's output, kept between texts so its key and literal list keep their capacity.
  Shape scratch;

  // `from_shape`: the id of the shape template the analysis was rebuilt from, 0 if none (the
  // text gets no exact entry: its shape already answers it without a parse, and pgbench-style
  // texts rarely repeat).
  std::shared_ptr<const Analysis> miss(std::string_view sql, uint64_t& from_shape);
};

// An exact miss: a shape template when there is one, otherwise the full analysis (and, the second
// time a shape is seen, an attempt at a template for it).
std::shared_ptr<const Analysis> Analyzer::Impl::miss(std::string_view sql, uint64_t& from_shape) {
  Shape& shape = scratch;
  // A text that is not valid UTF-8 never reaches a template: the full analysis refuses it.
  if (capacity == 0 || sql.size() > max_bytes || !simdjson::validate_utf8(sql.data(), sql.size()) ||
      !lexShape(sql, shape) || shape.literals.empty()) {
    return analyzeUncached(sql);
  }
  auto* entry = shapes.find(shape.key);
  if (entry && entry->value) {
    if (auto rebuilt = applyShapeTemplate(*entry->value, shape)) {
      ++shape_hits;
      from_shape = shapeTemplateId(*entry->value);
      return rebuilt;
    }
  }
  ++shape_misses;
  auto analysis = analyzeUncached(sql);
  if (!entry && seen.seenBefore(std::hash<std::string_view>{}(shape.key))) {
    auto tmpl = buildShapeTemplate(sql, shape, *analysis, analyzeUncached);
    shapes.insert(std::move(shape.key), std::move(tmpl));
  }
  return analysis;
}

Analyzer::Analyzer(size_t cache_entries, size_t max_cached_bytes)
    : impl_(std::make_unique<Impl>(cache_entries, max_cached_bytes)) {
  impl_->capacity = cache_entries;
}

Analyzer::~Analyzer() = default;

std::shared_ptr<const Analysis> Analyzer::analyze(std::string_view sql) {
  uint64_t shape = 0;
  return analyze(sql, shape);
}

std::shared_ptr<const Analysis> Analyzer::analyze(std::string_view sql, uint64_t& shape) {
  Impl& c = *impl_;
  shape = 0;
  if (auto* hit = c.exact.find(sql)) {
    ++c.hits;
    return hit->value;
  }
  ++c.misses;
  auto analysis = c.miss(sql, shape);
  if (shape != 0 || c.capacity == 0 || sql.size() > c.max_bytes) return analysis;
  c.exact.insert(std::string(sql), analysis);
  return analysis;
}

uint64_t Analyzer::cacheHits() const { return impl_->hits; }
uint64_t Analyzer::cacheMisses() const { return impl_->misses; }
size_t Analyzer::cacheSize() const { return impl_->exact.size(); }
uint64_t Analyzer::shapeHits() const { return impl_->shape_hits; }
uint64_t Analyzer::shapeMisses() const { return impl_->shape_misses; }
size_t Analyzer::shapeCacheSize() const { return impl_->shapes.size(); }

}  // namespace pgwarden::analysis
