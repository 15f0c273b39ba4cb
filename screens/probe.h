// The screens' one bounded read: nothing matched, and the statistics cannot tell whether a
// compared value occurs at all (an e-mail column has more values than pg_stats keeps). Where an
// index leads with the column, one indexed count of that value (capped at kProbeRowLimit rows,
// under a short statement_timeout) answers it: no row says the value is unknown
// (UNKNOWN_VALUE), some rows say how many that condition matches alone (CONDITIONS_EXCLUDE).
// What to ask and how to read the answer are here; a door runs the query off its statement's
// connection and holds the statement's reply until the answer is in (session/screen_probe.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgwarden::screens {

struct ScreenInput;

// The probe counts at most this many rows: enough for a condition's share of any table the
// screens speak about, and an index scan this short costs well under a millisecond.
inline constexpr int64_t kProbeRowLimit = 1000;
// An IN list longer than this is not probed (the probe's cost grows with it).
inline constexpr size_t kMaxProbeValues = 8;

// What to ask: comparison `comparison` of the statement's screen facts, as `sql`.
struct ProbeRequest {
  int comparison = -1;
  std::string sql;
};

// The probe of one statement run. `comparison` -1: none asked.
struct ProbeAnswer {
  enum class State : uint8_t { kNone, kAsked, kAnswered, kUnanswered };
  State state = State::kNone;
  int comparison = -1;
  int64_t rows = -1;  // rows holding the compared value(s), at most kProbeRowLimit (kAnswered)

  // Answered for comparison `i`: `rows` is what the index says.
  bool answers(int i) const { return state == State::kAnswered && comparison == i && rows >= 0; }
};

// Whether the screens would speak differently with a probe's answer: nothing matched, the
// statistics explain nothing (no UNKNOWN_VALUE or OUT_OF_RANGE from them), and an `=` / IN
// comparison of a column that leads a btree index compares values the statistics cannot
// decide (not among the MCVs, the column's values not known complete). The first such
// comparison is asked about, under `timeout_ms`; nothing when none is.
std::optional<ProbeRequest> probeRequest(const ScreenInput& in, int timeout_ms);

// The query: the statement_timeout and no sequential scan (SET LOCAL: they end with the Query's
// implicit transaction), then the count of at most kProbeRowLimit rows holding the values.
// Identifiers double-quoted, values as E'' literals (backslashes and quotes doubled), so a
// value reads the same whatever standard_conforming_strings says.
std::string probeQuery(std::string_view schema, std::string_view table, std::string_view column,
                       const std::vector<std::string>& values, int timeout_ms);

// The query's one cell (the count as text): the rows, or -1 when it is not a count.
int64_t readProbeCount(std::optional<std::string_view> cell);

}  // namespace pgwarden::screens
