// `pgwarden report KIND`: what agents keep rediscovering, read back from a SQLite or PostgreSQL
// history store with one SQL query per report (docs/history.md defines each report).
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/result.h"
#include "history/schema.h"

namespace pgwarden::history {

enum class ReportKind { kRetries, kRepeats, kDenials, kZeros };
const char* reportKindName(ReportKind kind);  // "retries", "repeats", "denials", "zeros"
bool parseReportKind(const std::string& name, ReportKind* out);

struct ReportOptions {
  ReportKind kind = ReportKind::kRetries;
  std::string store = "sqlite";  // sqlite | postgres
  std::string target;            // the SQLite file, or the libpq connection string
  int64_t min_variants = 3;      // retries: at least this many different texts
  std::chrono::milliseconds since{0};  // only records that started this recently (0: all)
  int64_t limit = 50;
  int64_t now_us = 0;            // "now" for --since, epoch microseconds (0: the clock)
};

struct ReportCell {
  std::string text;
  bool numeric = false;
  bool null = false;
};

struct ReportTable {
  std::vector<std::string> columns;
  std::vector<std::vector<ReportCell>> rows;
};

// The report's SQL for one dialect: '?' placeholders for SQLite, $n for PostgreSQL, bound in the
// order since-cutoff (only when with_since), min_variants (retries only), limit.
std::string reportSql(ReportKind kind, Dialect dialect, bool with_since);

// Opens the store read-only, runs the report and returns its rows. Never throws.
Result<ReportTable> runReport(const ReportOptions& options);

// An aligned text table with a row count, as printed by default; long text is cut for display.
std::string formatReportText(const ReportTable& table);
// {"report": KIND, "rows": [{column: value, ...}, ...]}; numbers as numbers, text unabridged.
std::string formatReportJson(ReportKind kind, const ReportTable& table);

// What `pgwarden report` was asked, as the command line parsed it (daemon/cli.cpp checks every
// value: the kind, `--store`'s form, the counts and the duration).
struct ReportRequest {
  ReportOptions options;    // kind, min_variants, since, limit; store and target come from below
  std::string store;        // "sqlite:PATH" or "postgres:DSN"; empty: the config's history section
  std::string config_file;  // empty: /etc/pgwarden/pgwarden.yaml
  bool json = false;
};

// Splits "sqlite:PATH" / "postgres:DSN" into store and target; false when it is neither.
bool parseReportStore(const std::string& text, std::string* store, std::string* target);

// Runs `pgwarden report`: resolves the store, runs the report and prints it. Returns the process
// exit code (0 ok, 1 failure, 2 usage error).
int runReportCommand(const ReportRequest& request, std::ostream& out, std::ostream& err);

}  // namespace pgwarden::history
