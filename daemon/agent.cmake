# Daemon side of the agent features: the libcurl-on-libuv webhook client and the shared budget
# store on libpq, as their own library. libcurl comes from Debian's libcurl4-openssl-dev.
pkg_check_modules(LIBCURL REQUIRED IMPORTED_TARGET libcurl)

add_library(pgw_agent_daemon STATIC
  ${CMAKE_CURRENT_LIST_DIR}/webhook_client.cpp
  ${CMAKE_CURRENT_LIST_DIR}/budget_store_pg.cpp
)
target_include_directories(pgw_agent_daemon PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(pgw_agent_daemon
  PUBLIC pgw_agent_guards PkgConfig::LIBCURL PkgConfig::LIBPQ PkgConfig::LIBUV
  PRIVATE spdlog::spdlog fmt::fmt)
