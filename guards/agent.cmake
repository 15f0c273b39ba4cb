# Agent-facing guard kinds (lua, http_webhook, budget) and the agent context helpers, as their own
# library on top of pgw_guards. Lua 5.4 comes from Debian's liblua5.4-dev through pkg-config.
pkg_check_modules(LUA54 REQUIRED IMPORTED_TARGET lua5.4)
find_package(nlohmann_json REQUIRED)

add_library(pgw_agent_guards STATIC
  ${CMAKE_CURRENT_LIST_DIR}/agent_context.cpp
  ${CMAKE_CURRENT_LIST_DIR}/budget.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lua_guard.cpp
  ${CMAKE_CURRENT_LIST_DIR}/webhook_guard.cpp
)
target_include_directories(pgw_agent_guards PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(pgw_agent_guards
  PUBLIC pgw_guards
  PRIVATE PkgConfig::LUA54 nlohmann_json::nlohmann_json spdlog::spdlog fmt::fmt)
