# history_bench: records per second the SQLite (and, with PGWARDEN_BENCH_DSN, the PostgreSQL)
# history writers sustain, SQLite's own floor for the same rows, and the cost of
# Recorder::submit on the event loop.
add_executable(history_bench ${CMAKE_CURRENT_SOURCE_DIR}/history_bench.cpp)
find_package(SQLite3 REQUIRED)
# spdlog the compiled library, as pgw_history uses it: one default logger, so the level main()
# sets also quiets the writer thread's lines, which would otherwise land in the JSON on stdout.
find_package(spdlog REQUIRED)
target_link_libraries(history_bench PRIVATE pgw_history SQLite::SQLite3 spdlog::spdlog benchmark::benchmark)
