# contention_bench: the critical sections the worker loops share per statement (recorder submit,
# metrics series, budget ledger), timed with 1 to 16 threads.
add_executable(contention_bench ${CMAKE_CURRENT_SOURCE_DIR}/contention_bench.cpp)
# spdlog the compiled library, as the libraries use it, so the level main() sets reaches them.
find_package(spdlog REQUIRED)
target_link_libraries(contention_bench PRIVATE pgw_history pgw_metrics pgw_budgets spdlog::spdlog
                      benchmark::benchmark)
