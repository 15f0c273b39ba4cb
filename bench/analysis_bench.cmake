# analysis_bench: the guard analysis per statement (parse-cache miss and hit, a one-table SELECT and
# a 3-table join with a CTE) and the example `agents` chain on top of it.
add_executable(analysis_bench ${CMAKE_CURRENT_SOURCE_DIR}/analysis_bench.cpp)
target_link_libraries(analysis_bench PRIVATE pgw_guards benchmark::benchmark)
target_compile_definitions(analysis_bench PRIVATE PGW_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
