# What `cmake --install` puts where, and the Debian package CPack builds from it
# (`cpack -G DEB`, or packaging/build-deb for a release build). Included at the end of the
# top-level CMakeLists.txt, after every module, so the `pgwarden` target is known if it exists.
#
# Layout of the package:
#   /usr/bin/pgwarden                        the daemon
#   /etc/pgwarden/pgwarden.yaml              the annotated example config (a conffile)
#   /lib/systemd/system/pgwarden.{service,socket}
#   /usr/share/man/man8/pgwarden.8.gz, /usr/share/man/man5/pgwarden.yaml.5.gz
#   /usr/share/bash-completion/completions/pgwarden, /usr/share/zsh/vendor-completions/_pgwarden
#   /usr/share/doc/pgwarden/examples/        the example configs of packaging/examples/
#   /usr/share/doc/pgwarden/                 copyright, changelog.Debian.gz, guides, Grafana dashboard
# Relative destinations follow CMAKE_INSTALL_PREFIX (/usr in the package); /etc and /lib/systemd
# are fixed because that is where the unit and the daemon look for them.

set(PGWARDEN_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})
set(PGWARDEN_PACKAGE_MAINTAINER "pgwarden maintainers <maintainers@pgwarden.dev>"
    CACHE STRING "Maintainer field of the Debian package (a project address)")

# --- install rules -------------------------------------------------------------------------------

# daemon/ is built by its own module; the package carries the binary whenever it exists, and the
# shell completion scripts it prints from its own command-line definition.
if(TARGET pgwarden)
  install(TARGETS pgwarden RUNTIME DESTINATION bin)
  set(_pgw_completion_dir ${CMAKE_BINARY_DIR}/packaging/completion)
  install(CODE "
    file(MAKE_DIRECTORY \"${_pgw_completion_dir}\")
    foreach(_shell bash zsh)
      execute_process(COMMAND \"$<TARGET_FILE:pgwarden>\" completion \${_shell}
                      OUTPUT_FILE \"${_pgw_completion_dir}/pgwarden.\${_shell}\" RESULT_VARIABLE _rc)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR \"pgwarden completion \${_shell} failed: \${_rc}\")
      endif()
    endforeach()")
  install(FILES ${_pgw_completion_dir}/pgwarden.bash
          DESTINATION share/bash-completion/completions RENAME pgwarden)
  install(FILES ${_pgw_completion_dir}/pgwarden.zsh
          DESTINATION share/zsh/vendor-completions RENAME _pgwarden)
endif()

install(FILES ${PGWARDEN_PACKAGING_DIR}/pgwarden.yaml DESTINATION /etc/pgwarden)
install(FILES ${CMAKE_SOURCE_DIR}/systemd/pgwarden.service ${CMAKE_SOURCE_DIR}/systemd/pgwarden.socket
              ${CMAKE_SOURCE_DIR}/systemd/pgwarden@.service
        DESTINATION /lib/systemd/system)

# Man pages, the changelog and longer docs are installed gzip -9n compressed, as Debian Policy
# asks (-n keeps name and time out of the header, so the same input gives the same bytes). They
# are compressed at install time, so a plain build does no packaging work.
set(_pgw_gz_dir ${CMAKE_BINARY_DIR}/packaging/gz)
function(pgwarden_install_gzipped source destination)
  get_filename_component(_name ${source} NAME)
  install(CODE "
    file(MAKE_DIRECTORY \"${_pgw_gz_dir}\")
    execute_process(COMMAND gzip -9n -c \"${source}\"
                    OUTPUT_FILE \"${_pgw_gz_dir}/${_name}.gz\" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR \"gzip ${source} failed: \${_rc}\")
    endif()")
  install(FILES ${_pgw_gz_dir}/${_name}.gz DESTINATION ${destination})
endfunction()

pgwarden_install_gzipped(${PGWARDEN_PACKAGING_DIR}/man/pgwarden.8 share/man/man8)
pgwarden_install_gzipped(${PGWARDEN_PACKAGING_DIR}/man/pgwarden.yaml.5 share/man/man5)

set(_pgw_doc share/doc/pgwarden)
install(FILES ${PGWARDEN_PACKAGING_DIR}/debian/copyright DESTINATION ${_pgw_doc})
file(GLOB _pgw_examples CONFIGURE_DEPENDS ${PGWARDEN_PACKAGING_DIR}/examples/*)
if(_pgw_examples)
  install(FILES ${_pgw_examples} DESTINATION ${_pgw_doc}/examples)
endif()
# The README and the operator's guides in docs/ (operations, history schema, denial codes,
# metrics, agent context); ARCHITECTURE.md is for people changing the code, not running it.
file(GLOB _pgw_guides CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
list(FILTER _pgw_guides EXCLUDE REGEX "/ARCHITECTURE\\.md$")
foreach(_doc ${CMAKE_SOURCE_DIR}/README.md ${_pgw_guides})
  if(EXISTS ${_doc})
    pgwarden_install_gzipped(${_doc} ${_pgw_doc})
  endif()
endforeach()
# The dashboard stays uncompressed: it is imported into Grafana as is. Globbed so that it is
# picked up once it lands, with a re-configure.
file(GLOB _pgw_dashboards CONFIGURE_DEPENDS ${PGWARDEN_PACKAGING_DIR}/grafana/*.json)
if(_pgw_dashboards)
  install(FILES ${_pgw_dashboards} DESTINATION ${_pgw_doc}/grafana)
endif()
# The Prometheus alerting rules beside it, loaded as they are (rule_files).
install(FILES ${PGWARDEN_PACKAGING_DIR}/prometheus/pgwarden-alerts.yaml
        DESTINATION ${_pgw_doc}/prometheus)
if(EXISTS ${PGWARDEN_PACKAGING_DIR}/debian/lintian-overrides)
  install(FILES ${PGWARDEN_PACKAGING_DIR}/debian/lintian-overrides
          DESTINATION share/lintian/overrides RENAME pgwarden)
endif()

# --- Debian package ------------------------------------------------------------------------------

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pgwarden)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${PGWARDEN_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "PostgreSQL proxy that checks every SQL statement against a policy")
# The extended description; CPack puts the summary above it as the synopsis line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "pgwarden speaks the PostgreSQL wire protocol to clients (psql, JDBC,
psycopg2, pgbench) and to the server. It parses each statement, runs the
user's policy group of guards (read-only, function and table lists,
required predicates, row limits, budgets) and answers a denial with what
to do next, forwards accepted statements over read-only server
connections with timeouts, records every statement in a query history and
exports Prometheus metrics.
.
It is meant for database users that are programs, such as AI agents.")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${PGWARDEN_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
# Runtime libraries from dpkg-shlibdeps (dpkg-dev); adduser for the postinst. CPack appends the
# computed library list to these.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
# A debug-symbols package next to the stripped one, as Debian's dh_strip makes:
# pgwarden-dbgsym_<version>_<arch>.ddeb holds the daemon's DWARF as
# /usr/lib/debug/.build-id/<xx>/<rest>.debug. CPack splits it off (objcopy --only-keep-debug) and
# strips the binary of the main package itself, which it does only for files not stripped yet:
# hence no CPACK_STRIP_FILES. packaging/build-deb builds with Debian's flags, which include -g.
set(CPACK_STRIP_FILES OFF)
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
# Absolute destinations (/etc, /lib/systemd) must land in CPack's staging tree, not on this host.
# With DESTDIR staging the prefix is CPACK_INSTALL_PREFIX, whatever the build tree's own
# CMAKE_INSTALL_PREFIX is (/usr/local by default).
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PGWARDEN_PACKAGING_DIR}/debian/conffiles
    ${PGWARDEN_PACKAGING_DIR}/debian/postinst
    ${PGWARDEN_PACKAGING_DIR}/debian/prerm
    ${PGWARDEN_PACKAGING_DIR}/debian/postrm)
# 0755 for maintainer scripts and 0644 for conffiles, whatever the checkout's modes are.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

# changelog.Debian.gz: one entry for this version, dated by the commit it is built from so that
# the same source gives the same package.
set(PGWARDEN_DEB_VERSION ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE})
set(PGWARDEN_DEB_MAINTAINER "${PGWARDEN_PACKAGE_MAINTAINER}")
execute_process(COMMAND git log -1 --format=%aD
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE PGWARDEN_DEB_DATE
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT PGWARDEN_DEB_DATE)
  string(TIMESTAMP PGWARDEN_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
endif()
configure_file(${PGWARDEN_PACKAGING_DIR}/debian/changelog.in
               ${CMAKE_BINARY_DIR}/packaging/changelog.Debian @ONLY)
pgwarden_install_gzipped(${CMAKE_BINARY_DIR}/packaging/changelog.Debian ${_pgw_doc})

include(CPack)
