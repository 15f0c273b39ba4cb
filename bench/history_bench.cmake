# history_bench: records per second the SQLite (and, with PGWARDEN_BENCH_DSN, the PostgreSQL)
# history writers sustain, and the cost of Recorder::submit on the event loop.
add_executable(history_bench ${CMAKE_CURRENT_SOURCE_DIR}/history_bench.cpp)
target_link_libraries(history_bench PRIVATE pgw_history benchmark::benchmark)
