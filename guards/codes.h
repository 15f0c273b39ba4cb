// The documented denial/notice codes and the SQLSTATE each one is sent with (docs/denials.md).
// One place, so guards, the daemon and the docs cannot drift apart.
#pragma once

#include <string_view>

namespace pgwarden::guards::codes {

// Policy: the statement is not allowed here at all (42501 insufficient_privilege).
inline constexpr std::string_view kReadOnly = "READ_ONLY";
inline constexpr std::string_view kProtectedSetting = "PROTECTED_SETTING";
inline constexpr std::string_view kMultiStatement = "MULTI_STATEMENT";
inline constexpr std::string_view kFunctionDenied = "FUNCTION_DENIED";
inline constexpr std::string_view kTableDenied = "TABLE_DENIED";
// A statement that would show a masked column's values other than as the column itself.
inline constexpr std::string_view kMaskedColumn = "MASKED_COLUMN";
// The data-flow rule (docs/untrusted.md): a conversation that read untrusted content may not act
// (42501); the warning that comes with such a read (01000).
inline constexpr std::string_view kUntrustedFlow = "UNTRUSTED_FLOW";
inline constexpr std::string_view kUntrustedRead = "UNTRUSTED_READ";
// Limits: the statement would read or return too much (54000 program_limit_exceeded).
inline constexpr std::string_view kMissingPredicate = "MISSING_PREDICATE";
inline constexpr std::string_view kLimitTooLarge = "LIMIT_TOO_LARGE";
inline constexpr std::string_view kLimitRequired = "LIMIT_REQUIRED";
inline constexpr std::string_view kFunctionLimit = "FUNCTION_LIMIT";
inline constexpr std::string_view kRecursionUnbounded = "RECURSION_UNBOUNDED";
inline constexpr std::string_view kSeqScan = "SEQ_SCAN";
inline constexpr std::string_view kCostTooHigh = "COST_TOO_HIGH";
inline constexpr std::string_view kJoinExplosion = "JOIN_EXPLOSION";
// An operator-defined tool's call: arguments that break its schema (22023 invalid_parameter_value),
// a range wider than its range cap allows (54000), or reversed or half given (22023).
inline constexpr std::string_view kInvalidArguments = "INVALID_ARGUMENTS";
inline constexpr std::string_view kRangeTooWide = "RANGE_TOO_WIDE";
inline constexpr std::string_view kRangeReversed = "RANGE_REVERSED";
inline constexpr std::string_view kRangeRequired = "RANGE_REQUIRED";
// The text does not parse (42601 syntax_error), or is not valid UTF-8 (22021
// character_not_in_repertoire, the server's answer to such a text).
inline constexpr std::string_view kSyntaxError = "SYNTAX_ERROR";
inline constexpr std::string_view kInvalidEncoding = "INVALID_ENCODING";
// A check that needs the server could not run (58000 system_error).
inline constexpr std::string_view kPlanUnavailable = "PLAN_UNAVAILABLE";
// Rewrites and notices (01000 warning): the result is capped / was cut at max_rows.
inline constexpr std::string_view kRowsCapped = "ROWS_CAPPED";
inline constexpr std::string_view kRowsTruncated = "ROWS_TRUNCATED";

// Result screens (01000 warning, or 54000 when a group sets the code to deny): a successful result
// that is probably not the answer (docs/answers.md).
inline constexpr std::string_view kUnknownValue = "UNKNOWN_VALUE";
inline constexpr std::string_view kOutOfRange = "OUT_OF_RANGE";
inline constexpr std::string_view kUnfiltered = "UNFILTERED";
inline constexpr std::string_view kArbitraryRows = "ARBITRARY_ROWS";
inline constexpr std::string_view kPartialResult = "PARTIAL_RESULT";
inline constexpr std::string_view kFanoutJoin = "FANOUT_JOIN";
// Screens of the statement itself (they speak whatever the result holds).
inline constexpr std::string_view kNullComparison = "NULL_COMPARISON";
inline constexpr std::string_view kNotInNull = "NOT_IN_NULL";
inline constexpr std::string_view kIntegerDivision = "INTEGER_DIVISION";
inline constexpr std::string_view kDistinctMeasure = "DISTINCT_MEASURE";
inline constexpr std::string_view kOuterJoinCount = "OUTER_JOIN_COUNT";
inline constexpr std::string_view kTimestampDateBound = "TIMESTAMP_DATE_BOUND";
inline constexpr std::string_view kLeftJoinFiltered = "LEFT_JOIN_FILTERED";
// Screens of the statement read against the catalog's keys and soft-delete columns.
inline constexpr std::string_view kForeignKeyMismatch = "FOREIGN_KEY_MISMATCH";
inline constexpr std::string_view kSoftDeletedRows = "SOFT_DELETED_ROWS";
// An empty result whose conditions each match rows by the statistics, but not together.
inline constexpr std::string_view kConditionsExclude = "CONDITIONS_EXCLUDE";
// A result value outside what the group's result_assertions declare.
inline constexpr std::string_view kAssertionFailed = "ASSERTION_FAILED";
inline constexpr std::string_view kResultScreens[] = {
    kUnknownValue,     kOutOfRange,         kUnfiltered,      kArbitraryRows,
    kPartialResult,    kFanoutJoin,         kNullComparison,  kNotInNull,
    kIntegerDivision,  kDistinctMeasure,    kOuterJoinCount,  kTimestampDateBound,
    kLeftJoinFiltered, kForeignKeyMismatch, kSoftDeletedRows, kConditionsExclude,
    kAssertionFailed};

// Guarded writes (docs/writes.md). Denials: a write before the table was read (55000
// object_not_in_prerequisite_state), a write or DDL outside BEGIN (25P01 no_active_sql_transaction),
// a write that changed more rows than the group allows (54000; undone, the transaction stays open),
// DDL in a group without allow_ddl, a write hidden where pgwarden cannot count it or an escape from
// the write mode (42501), and the statement after pgwarden rolled an idle or old transaction back (25P03).
inline constexpr std::string_view kLookFirst = "LOOK_FIRST";
inline constexpr std::string_view kTransactionRequired = "TRANSACTION_REQUIRED";
inline constexpr std::string_view kTooManyRows = "TOO_MANY_ROWS";
inline constexpr std::string_view kDdlNotAllowed = "DDL_NOT_ALLOWED";
inline constexpr std::string_view kWriteHidden = "WRITE_HIDDEN";
inline constexpr std::string_view kWriteEscape = "WRITE_ESCAPE";
inline constexpr std::string_view kWriteNotAlone = "WRITE_NOT_ALONE";
inline constexpr std::string_view kTransactionRolledBack = "TRANSACTION_ROLLED_BACK";
// Transaction pooling: a statement whose effect would outlive its transaction on a shared server
// connection (0A000 feature_not_supported).
inline constexpr std::string_view kSessionState = "SESSION_STATE";
// Notices of the write mode (severity NOTICE, SQLSTATE 00000): after each statement inside a
// transaction, and the answer to COMMIT or ROLLBACK.
inline constexpr std::string_view kTransactionOpen = "TRANSACTION_OPEN";
inline constexpr std::string_view kTransactionCommitted = "TRANSACTION_COMMITTED";
inline constexpr std::string_view kTransactionDiscarded = "TRANSACTION_DISCARDED";

inline constexpr std::string_view kSqlstatePolicy = "42501";
inline constexpr std::string_view kSqlstateLimit = "54000";
inline constexpr std::string_view kSqlstateSyntax = "42601";
inline constexpr std::string_view kSqlstateCharacterNotInRepertoire = "22021";
inline constexpr std::string_view kSqlstateInvalidParameter = "22023";
inline constexpr std::string_view kSqlstateUnavailable = "58000";
inline constexpr std::string_view kSqlstateWarning = "01000";
inline constexpr std::string_view kSqlstateNotice = "00000";
inline constexpr std::string_view kSqlstatePrerequisite = "55000";
inline constexpr std::string_view kSqlstateNoTransaction = "25P01";
inline constexpr std::string_view kSqlstateTransactionTimeout = "25P03";
inline constexpr std::string_view kSqlstateNotSupported = "0A000";

// The SQLSTATE a code is sent with; 42501 for codes this table does not know (operator- or
// script-defined codes are policy denials unless their guard says otherwise).
std::string_view sqlstateFor(std::string_view code);

// Every built-in code, in documentation order.
inline constexpr std::string_view kAll[] = {kReadOnly,
                                            kProtectedSetting,
                                            kMultiStatement,
                                            kFunctionDenied,
                                            kTableDenied,
                                            kMissingPredicate,
                                            kLimitTooLarge,
                                            kLimitRequired,
                                            kFunctionLimit,
                                            kRecursionUnbounded,
                                            kSeqScan,
                                            kCostTooHigh,
                                            kJoinExplosion,
                                            kInvalidArguments,
                                            kRangeTooWide,
                                            kRangeReversed,
                                            kRangeRequired,
                                            kSyntaxError,
                                            kInvalidEncoding,
                                            kPlanUnavailable,
                                            kRowsCapped,
                                            kRowsTruncated,
                                            kUnknownValue,
                                            kOutOfRange,
                                            kUnfiltered,
                                            kArbitraryRows,
                                            kPartialResult,
                                            kFanoutJoin,
                                            kNullComparison,
                                            kNotInNull,
                                            kIntegerDivision,
                                            kDistinctMeasure,
                                            kOuterJoinCount,
                                            kTimestampDateBound,
                                            kLeftJoinFiltered,
                                            kForeignKeyMismatch,
                                            kSoftDeletedRows,
                                            kLookFirst,
                                            kTransactionRequired,
                                            kTooManyRows,
                                            kDdlNotAllowed,
                                            kWriteHidden,
                                            kWriteEscape,
                                            kWriteNotAlone,
                                            kTransactionRolledBack,
                                            kTransactionOpen,
                                            kTransactionCommitted,
                                            kTransactionDiscarded,
                                            kSessionState,
                                            kMaskedColumn,
                                            kUntrustedFlow,
                                            kUntrustedRead};

}  // namespace pgwarden::guards::codes
