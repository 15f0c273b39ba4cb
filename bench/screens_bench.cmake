# screens_bench: the result screens on a flagged result (UNKNOWN_VALUE with its message built) and
# the check every other result pays (a pgbench -S lookup that returned its row).
add_executable(screens_bench ${CMAKE_CURRENT_SOURCE_DIR}/screens_bench.cpp)
target_link_libraries(screens_bench PRIVATE pgw_screens benchmark::benchmark)
