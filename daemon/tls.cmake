# pgw_tls: the TLS engine and contexts (daemon/tls.h), OpenSSL over memory BIOs. Its own library
# so tests/unit/tls links only it; pgw_daemon links it for the client and server streams.
# Included by daemon/CMakeLists.txt after pgw_daemon is defined.
if(NOT TARGET pgw_tls)
  find_package(OpenSSL REQUIRED)
  add_library(pgw_tls STATIC ${CMAKE_CURRENT_LIST_DIR}/tls.cpp)
  target_include_directories(pgw_tls PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(pgw_tls PUBLIC pgw_common yaml-cpp OpenSSL::SSL OpenSSL::Crypto)
endif()
if(TARGET pgw_daemon)
  target_link_libraries(pgw_daemon PUBLIC pgw_tls)
endif()
