// Read-only access to a SQLite or PostgreSQL history store for reports and the studio: one open
// connection, queries with bound parameters, every value as text with its kind. Blocking: run it
// off the event loop (the CLI's thread, the studio's reader thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/result.h"
#include "history/schema.h"

namespace pgwarden::history {

struct ReportCell {
  std::string text;
  bool numeric = false;
  bool null = false;
};

struct ReportTable {
  std::vector<std::string> columns;
  std::vector<std::vector<ReportCell>> rows;
  // The index of `name` among the columns, or -1.
  int column(const std::string& name) const;
};

using ReportParam = std::variant<int64_t, std::string>;

class ReportReader {
 public:
  virtual ~ReportReader() = default;
  virtual Dialect dialect() const = 0;
  // `sql` uses '?' placeholders; the PostgreSQL reader turns them into $n.
  virtual Result<ReportTable> query(const std::string& sql,
                                    const std::vector<ReportParam>& params) = 0;
  // From any thread: ends the query running now with an error (SQLite: sqlite3_interrupt;
  // PostgreSQL: a cancel request), so that a reader thread can be stopped without waiting it out.
  virtual void interrupt() = 0;
};

// Opens `store` ("sqlite": a file path, "postgres": a libpq connection string) read-only and
// checks that it holds the history table. Never throws.
Result<std::unique_ptr<ReportReader>> openReportReader(const std::string& store,
                                                       const std::string& target);

// '?' placeholders (outside string literals) become $1, $2, ...
std::string toDollarParams(const std::string& sql);

}  // namespace pgwarden::history
