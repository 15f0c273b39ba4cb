// PARTIAL_RESULT: the row cap cut the result, so any total, count or set of distinct values the
// client computes from these rows is partial. Suggests the aggregate that answers it on the server.
#include <cctype>
#include <optional>
#include <string>

#include "guards/codes.h"
#include "guards/guard_util.h"
#include "screens/screen_util.h"

namespace pgwarden::screens::detail {

namespace {
constexpr size_t kMaxQuotedSql = 400;

bool digit(char c) { return c >= '0' && c <= '9'; }

// `sql` with each $n replaced by its bound value as a literal (NULL for none), skipping quoted
// strings, quoted identifiers, dollar quotes and comments; nullopt when a $n has no text value.
std::optional<std::string> inlineParams(std::string_view sql,
                                        const std::vector<std::optional<std::string>>* params) {
  std::string out;
  size_t i = 0;
  const auto copyUntil = [&](std::string_view close, size_t from) {
    const size_t end = sql.find(close, from);
    const size_t stop = end == std::string_view::npos ? sql.size() : end + close.size();
    out.append(sql.substr(i, stop - i));
    i = stop;
  };
  while (i < sql.size()) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      // '' and "" inside are a closing quote and an opening one: copying quote to quote is exact.
      copyUntil(std::string_view(&sql[i], 1), i + 1);
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      copyUntil("\n", i);
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      copyUntil("*/", i + 2);
    } else if (c == '$' && i + 1 < sql.size() && digit(sql[i + 1])) {
      size_t j = i + 1;
      size_t n = 0;
      while (j < sql.size() && digit(sql[j]) && n < 100000)
        n = n * 10 + static_cast<size_t>(sql[j++] - '0');
      if (!params || n == 0 || n > params->size()) return std::nullopt;
      const auto& v = (*params)[n - 1];
      out += v ? quoteLiteral(*v) : "NULL";
      i = j;
    } else if (c == '$') {
      const size_t tag_end = sql.find('$', i + 1);
      if (tag_end == std::string_view::npos) {
        out += c;
        ++i;
      } else {
        copyUntil(sql.substr(i, tag_end - i + 1), tag_end + 1);
      }
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

// Without a trailing LIMIT n: a count over the query counts every row, not the cap.
void dropTrailingLimit(std::string& sql) {
  size_t end = sql.size();
  while (end > 0 && digit(sql[end - 1])) --end;
  if (end == sql.size()) return;
  size_t k = end;
  while (k > 0 && std::isspace(static_cast<unsigned char>(sql[k - 1]))) --k;
  if (k == end || k < 6) return;
  std::string word = sql.substr(k - 5, 5);
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (word != "limit" || !std::isspace(static_cast<unsigned char>(sql[k - 6]))) return;
  sql.resize(k - 6);
  while (!sql.empty() && std::isspace(static_cast<unsigned char>(sql.back()))) sql.pop_back();
}

}  // namespace

void partialResult(const ScreenInput& in, Findings& out) {
  if (!in.result.truncated) return;
  guards::GuardResult r;
  r.code = std::string(guards::codes::kPartialResult);
  const std::string n = std::to_string(in.result.rows);
  r.message = "Only the first " + n +
              " rows came back: totals, counts, averages or distinct values computed from them are "
              "partial, not the answer. Compute them on the server with an aggregate (count(*), "
              "sum(...), count(DISTINCT ...)) and GROUP BY.";
  const std::string_view sql = in.sql;
  // A runnable statement: parameters as their values, the trailing LIMIT (a tool's cap) gone.
  std::optional<std::string> inner;
  if (!sql.empty() && sql.size() <= kMaxQuotedSql) inner = inlineParams(sql, in.params);
  if (inner) {
    while (!inner->empty() &&
           (inner->back() == ';' || std::isspace(static_cast<unsigned char>(inner->back())))) {
      inner->pop_back();
    }
    dropTrailingLimit(*inner);
    // A line comment at the end would swallow the closing parenthesis.
    if (inner->find("--") != std::string::npos) *inner += '\n';
    r.hint = "SELECT count(*) FROM (" + *inner + ") AS q";
  } else {
    r.hint = "SELECT count(*), count(DISTINCT <column>) FROM <table> WHERE ...";
  }
  r.facts.add("rows", in.result.rows).add("row_cap", in.result.row_cap);
  out.push_back(std::move(r));
}

}  // namespace pgwarden::screens::detail
