// Session housekeeping as drivers send it, and texts a policy must see: the fixtures of the tests
// that budgets (budget_test.cpp), the webhook guard and the Lua guard all leave housekeeping alone
// through the chain's one classification (isSessionHousekeeping, guards/policy.cpp).
#pragma once

#include <string>
#include <vector>

namespace pgwarden::agent_test {

// What pgjdbc, psycopg2 and libpq-based tools send on their own, at connect time or around a
// transaction, plus empty texts.
inline const std::vector<std::string> kHousekeeping = {
    "SET extra_float_digits = 3",
    "SET application_name = 'PostgreSQL JDBC Driver'",
    "SET DateStyle TO 'ISO'",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "BEGIN",
    "BEGIN ISOLATION LEVEL READ COMMITTED",
    "START TRANSACTION READ ONLY",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT s1",
    "RELEASE SAVEPOINT s1",
    "ROLLBACK TO SAVEPOINT s1",
    "SHOW TimeZone",
    "SHOW transaction_isolation",
    "RESET application_name",
    "DISCARD ALL",
    "DEALLOCATE ALL",
    "DEALLOCATE p1",
    "CLOSE c1",
    "",
    ";",
    "  ;  ; ",
    "BEGIN; SET LOCAL work_mem = '64MB'; COMMIT",
};

// Texts that are, or contain, something a policy must see.
inline const std::vector<std::string> kJudged = {
    "SELECT 1",
    "BEGIN; SELECT 1",
    "SET work_mem = '64MB'; SELECT 1",
    "SELECT set_config('statement_timeout', '0', false)",
    "SELECT current_setting('application_name')",
    "EXPLAIN SELECT 1",
    "VALUES (1)",
    "FETCH 10 FROM c1",
    "DECLARE c1 CURSOR FOR SELECT 1",
    "PREPARE p1 AS SELECT 1",
    "EXECUTE p1",
    "LISTEN chan",
};

// A policy service nobody listens at, and Lua scripts that refuse everything they are shown or
// fail.
inline const std::string kWebhook =
    "    - kind: http_webhook\n      url: \"http://127.0.0.1:9/check\"\n";

// A Lua script that refuses everything it is shown.
inline const std::string kLuaDenyAll =
    "    - kind: lua\n      script: |\n        function check(ctx)\n"
    "          return {action = \"deny\", code = \"SEEN\", reason = ctx.sql}\n        end\n";
// A Lua script that always fails (fail_behavior: deny by default).
inline const std::string kLuaBroken =
    "    - kind: lua\n      script: |\n        function check(ctx) error(\"broken\") end\n";

}  // namespace pgwarden::agent_test
