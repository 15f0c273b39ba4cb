# pgw_systemd: readiness/reload/stop notifications, watchdog, socket activation and journald-aware
# stderr logging (daemon/systemd_notify.h). Included by daemon/CMakeLists.txt; safe to include
# more than once (the unit tests include it too when the daemon module does not yet).
if(TARGET pgw_systemd)
  return()
endif()
pkg_check_modules(LIBSYSTEMD REQUIRED IMPORTED_TARGET GLOBAL libsystemd)
add_library(pgw_systemd STATIC ${CMAKE_CURRENT_LIST_DIR}/systemd_notify.cpp)
target_include_directories(pgw_systemd PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(pgw_systemd PUBLIC PkgConfig::LIBSYSTEMD spdlog::spdlog pgw_common)
