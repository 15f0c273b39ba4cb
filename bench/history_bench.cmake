# history_bench: records per second the SQLite (and, with PGWARDEN_BENCH_DSN, the PostgreSQL)
# history writers sustain, SQLite's own floor for the same rows, and the cost of
# Recorder::submit on the event loop.
add_executable(history_bench ${CMAKE_CURRENT_SOURCE_DIR}/history_bench.cpp)
find_package(SQLite3 REQUIRED)
target_link_libraries(history_bench PRIVATE pgw_history SQLite::SQLite3 benchmark::benchmark)
