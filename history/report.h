// `pgwarden report KIND`: what agents keep rediscovering, read back from a SQLite or PostgreSQL
// history store with one SQL query per report (docs/history.md defines each report).
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "common/result.h"
#include "history/report_format.h"
#include "history/report_reader.h"
#include "history/schema.h"

namespace pgwarden::history {

// kConversation: one conversation's statements in order (its timeline),
// ReportOptions::conversation.
enum class ReportKind { kRetries, kRepeats, kDenials, kZeros, kConversation };
// "retries", "repeats", "denials", "zeros", "conversation"
const char* reportKindName(ReportKind kind);
bool parseReportKind(const std::string& name, ReportKind* out);

struct ReportOptions {
  ReportKind kind = ReportKind::kRetries;
  std::string store = "sqlite";  // sqlite | postgres
  std::string target;            // the SQLite file, or the libpq connection string
  int64_t min_variants = 3;      // retries: at least this many different texts
  std::chrono::milliseconds since{0};  // only records that started this recently (0: all)
  int64_t limit = 50;
  int64_t now_us = 0;            // "now" for --since, epoch microseconds (0: the clock)
  // kConversation: a conversation_id, or "session:INSTANCE:SESSION" for a client that sent none
  // (the key the other reports show).
  std::string conversation;
};

// The report's SQL for one dialect: '?' placeholders for SQLite, $n for PostgreSQL, bound in the
// order since-cutoff (only when with_since), min_variants (retries only), limit. kConversation
// binds its key first (reportParams).
std::string reportSql(ReportKind kind, Dialect dialect, bool with_since, bool session_key = false);
// The SQL and parameters runReport uses for `options`.
std::string reportSqlFor(const ReportOptions& options, Dialect dialect);
std::vector<ReportParam> reportParams(const ReportOptions& options);

// The WHERE condition ('?' placeholders) and parameters that select conversation `key`'s records
// (see ReportOptions::conversation); the studio uses it too.
std::string conversationCondition(const std::string& key, std::vector<ReportParam>* params);

// Opens the store read-only, runs the report and returns its rows. Never throws.
Result<ReportTable> runReport(const ReportOptions& options);
// Runs the report on an open reader.
Result<ReportTable> runReport(ReportReader& reader, const ReportOptions& options);

// What `pgwarden report` was asked, as the command line parsed it (daemon/cli.cpp checks every
// value: the kind, `--store`'s form, the counts and the duration).
struct ReportRequest {
  ReportOptions options;    // kind, min_variants, since, limit; store and target come from below
  std::string store;        // "sqlite:PATH" or "postgres:DSN"; empty: the config's history section
  std::string config_file;  // empty: /etc/pgwarden/pgwarden.yaml
  ReportFormat format = ReportFormat::kTable;  // --format; --json is --format json
  // A report still running after this long says so on stderr, then once a second, and how long
  // it took at the end.
  std::chrono::milliseconds progress_after{1000};
};

// Splits "sqlite:PATH" / "postgres:DSN" into store and target; false when it is neither.
bool parseReportStore(const std::string& text, std::string* store, std::string* target);

// Runs `pgwarden report`: resolves the store, runs the report and prints it. Returns the process
// exit code (0 ok, 1 failure, 2 usage error).
int runReportCommand(const ReportRequest& request, std::ostream& out, std::ostream& err);

}  // namespace pgwarden::history
