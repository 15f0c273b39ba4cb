# contention_bench: the critical sections the worker loops share per statement (recorder submit,
# metrics series, budget ledger), timed with 1 to 16 threads.
add_executable(contention_bench ${CMAKE_CURRENT_SOURCE_DIR}/contention_bench.cpp)
target_link_libraries(contention_bench PRIVATE pgw_history pgw_metrics pgw_budgets benchmark::benchmark)
