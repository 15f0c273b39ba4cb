# pgwarden's metrics: the registry and exposition, process figures and the HTTP endpoint
# (/metrics, /healthz, /readyz). Included by daemon/CMakeLists.txt, or by the metrics tests and
# benchmark when built on their own; paths are absolute so either place works.
if(NOT TARGET pgw_metrics)
  add_library(pgw_metrics STATIC
    ${CMAKE_SOURCE_DIR}/daemon/metrics.cpp
    ${CMAKE_SOURCE_DIR}/daemon/process_metrics.cpp
    ${CMAKE_SOURCE_DIR}/daemon/http_server.cpp
  )
  target_include_directories(pgw_metrics PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(pgw_metrics PUBLIC pgw_common PkgConfig::LIBUV spdlog::spdlog fmt::fmt)
endif()
