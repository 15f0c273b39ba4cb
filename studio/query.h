// What a studio page asks the history store: the filters read from a page's query string, and the
// SQL of each page (conversations, a conversation's timeline, the charts of the four reports),
// always bounded below by a start time so that the started_at index limits what is read.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "history/report_reader.h"
#include "history/schema.h"

namespace pgwarden::studio {

// The longest range a page may ask for, and the one it gets when it names none.
inline constexpr std::chrono::hours kMaxRange{24 * 366};
inline constexpr std::chrono::hours kDefaultRange{24};
inline constexpr int64_t kPageRows = 200;       // conversations per page
inline constexpr int64_t kTimelineRows = 2000;  // statements of one conversation shown
inline constexpr int64_t kReportRows = 50;

struct Filter {
  std::string since = "24h";  // as given (a duration), for links
  std::chrono::milliseconds range = kDefaultRange;
  std::string agent;
  std::string user;
  std::string group;
  std::string code;         // a deny code or a result screen's code (letters, digits, '_')
  std::string fingerprint;  // conversations that ran this shape
  std::string id;           // the conversation page: its key (history::ReportOptions::conversation)
};

// "a=1&b=x%20y": the decoded value of `key` ("" when absent; '+' is a space).
std::string queryParam(std::string_view query, std::string_view key);
// `s` percent-encoded for a query string value.
std::string urlEncode(std::string_view s);
// Reads the filter from a query string; an error names the parameter and why.
Result<Filter> parseFilter(std::string_view query);
// "since=24h&agent=..." for the filter's set fields (not id), to carry into links.
std::string filterQuery(const Filter& f);

// The cutoff (epoch microseconds) of the filter's range as the store's timestamp text.
std::string rangeStart(const Filter& f, int64_t now_us);

struct Sql {
  std::string text;  // '?' placeholders
  std::vector<history::ReportParam> params;
};

// Conversations in the range, newest first: conversation, agent_id, user_name, policy_group,
// statements, denials, warnings, zeros, first_at, last_at.
Sql conversationsSql(history::Dialect d, const Filter& f, int64_t now_us);
// One conversation's statements in order, every column a timeline shows.
Sql timelineSql(history::Dialect d, const Filter& f, int64_t now_us);
// Denials per time bucket (an hour, or a day for ranges over two days) and deny code: bucket,
// deny_code, denials.
Sql denialsOverTimeSql(history::Dialect d, const Filter& f, int64_t now_us);
// Zero results by table: table_name, results.
Sql zerosByTableSql(history::Dialect d, const Filter& f, int64_t now_us);

}  // namespace pgwarden::studio
