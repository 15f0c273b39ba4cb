# metrics_bench: the hot-path cost of counter increments and histogram observations, and the time
# to render a scrape of about 500 series (prometheus-cpp TextSerializer).
add_executable(metrics_bench ${CMAKE_CURRENT_SOURCE_DIR}/metrics_bench.cpp)
target_link_libraries(metrics_bench PRIVATE pgw_metrics benchmark::benchmark)
