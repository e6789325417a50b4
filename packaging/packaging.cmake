# Debian packages from the build (scripts/package.sh; `cpack -G DEB` in a build directory):
#   ptepack      the CLI (stripped), its manual page ptepack(1), the JSON and FlatBuffers
#                schemas under /usr/share/ptepack/schema/, README.md as its documentation;
#                Depends: computed from its shared libraries by dpkg-shlibdeps
#   ptepack-dev  libptepack.a, its headers (the generated FlatBuffers headers included) and
#                the CMake package for find_package(ptepack); Depends: the -dev packages the
#                headers include, FlatBuffers pinned to the version that generated them
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(PTEPACK_HOMEPAGE "https://github.com/ptepack/ptepack")

# ptepack(1), written by hand (packaging/ptepack.1.in; CTest `manpage` holds it to every
# command's --help and to README.md's exit codes). configure_file fills in the version, the
# date of the newest packaging/changelog entry and the installed paths; gzip_file.py
# compresses it without a name or time, so the same bytes each build.
set(PTEPACK_CHANGELOG_FILE ${CMAKE_CURRENT_SOURCE_DIR}/packaging/changelog)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PTEPACK_CHANGELOG_FILE})
file(STRINGS ${PTEPACK_CHANGELOG_FILE} PTEPACK_CHANGELOG_DATE REGEX "^ -- " LIMIT_COUNT 1)
if(NOT PTEPACK_CHANGELOG_DATE MATCHES ", ([0-9][0-9]) ([A-Z][a-z][a-z]) ([0-9][0-9][0-9][0-9]) ")
  message(FATAL_ERROR "packaging/changelog: no dated entry for ptepack(1)")
endif()
set(PTEPACK_MAN_DAY ${CMAKE_MATCH_1})
set(PTEPACK_MAN_YEAR ${CMAKE_MATCH_3})
set(PTEPACK_MONTHS Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
list(FIND PTEPACK_MONTHS ${CMAKE_MATCH_2} PTEPACK_MAN_MONTH)
math(EXPR PTEPACK_MAN_MONTH "${PTEPACK_MAN_MONTH} + 1" OUTPUT_FORMAT DECIMAL)
if(PTEPACK_MAN_MONTH LESS 10)
  set(PTEPACK_MAN_MONTH 0${PTEPACK_MAN_MONTH})
endif()
set(PTEPACK_MAN_DATE ${PTEPACK_MAN_YEAR}-${PTEPACK_MAN_MONTH}-${PTEPACK_MAN_DAY})
set(PTEPACK_MAN_SCHEMA_DIR ${CMAKE_INSTALL_FULL_DATADIR}/ptepack/schema)
set(PTEPACK_MAN_DOC_DIR ${CMAKE_INSTALL_FULL_DATADIR}/doc/ptepack)
set(PTEPACK_MAN_HOMEPAGE ${PTEPACK_HOMEPAGE})
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/packaging/ptepack.1.in
               ${CMAKE_CURRENT_BINARY_DIR}/ptepack.1 @ONLY)
set(PTEPACK_MAN ${CMAKE_CURRENT_BINARY_DIR}/ptepack.1.gz)
add_custom_command(OUTPUT ${PTEPACK_MAN}
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/packaging/gzip_file.py
          ${CMAKE_CURRENT_BINARY_DIR}/ptepack.1 ${PTEPACK_MAN}
  DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/ptepack.1
          ${CMAKE_CURRENT_SOURCE_DIR}/packaging/gzip_file.py
  COMMENT "ptepack(1)" VERBATIM)
add_custom_target(ptepack_manpage ALL DEPENDS ${PTEPACK_MAN})
install(FILES ${PTEPACK_MAN} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT cli)

# Debian's documentation files for each package: the copyright and the changelog (gzipped
# without a name or time, so the same bytes each build); the CLI's also README.md (gzipped
# alike), which ptepack(1) names under SEE ALSO.
set(PTEPACK_CHANGELOG ${CMAKE_CURRENT_BINARY_DIR}/changelog.Debian.gz)
add_custom_command(OUTPUT ${PTEPACK_CHANGELOG}
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/packaging/gzip_file.py
          ${PTEPACK_CHANGELOG_FILE} ${PTEPACK_CHANGELOG}
  DEPENDS ${PTEPACK_CHANGELOG_FILE}
          ${CMAKE_CURRENT_SOURCE_DIR}/packaging/gzip_file.py VERBATIM)
set(PTEPACK_README ${CMAKE_CURRENT_BINARY_DIR}/README.md.gz)
add_custom_command(OUTPUT ${PTEPACK_README}
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/packaging/gzip_file.py
          ${CMAKE_CURRENT_SOURCE_DIR}/README.md ${PTEPACK_README}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/README.md
          ${CMAKE_CURRENT_SOURCE_DIR}/packaging/gzip_file.py VERBATIM)
add_custom_target(ptepack_changelog ALL DEPENDS ${PTEPACK_CHANGELOG})
add_custom_target(ptepack_readme ALL DEPENDS ${PTEPACK_README})
install(FILES ${PTEPACK_README} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/ptepack COMPONENT cli)
foreach(pair cli:ptepack dev:ptepack-dev)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/packaging/copyright ${PTEPACK_CHANGELOG}
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ptepack)
set(CPACK_PACKAGE_VENDOR "The ptepack authors")
set(CPACK_PACKAGE_CONTACT "The ptepack authors <ptepack@users.noreply.github.com>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli dev)
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE ${PTEPACK_HOMEPAGE})
set(CPACK_DEBIAN_CLI_PACKAGE_NAME ptepack)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_CLI_PACKAGE_SHLIBDEPS ON)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "packer for ExecuTorch model artifacts\nptepack merges program graphs and ExecuTorch .pte programs with their weights\ninto deduplicated, size-capped artifacts: .ptn packages, .pte programs, or\ndirectories of content-named .ptd or safetensors shards that variants and\nreleases share. It shows any artifact, proves it whole, and tells whether\nanything a runtime computes changed between two.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME ptepack-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The generated headers static_assert the exact FlatBuffers version that wrote them.
set(PTEPACK_FB_VERSION "${FlatBuffers_VERSION}")
if(PTEPACK_FB_VERSION STREQUAL "")
  set(PTEPACK_FB_VERSION "2.0.8")
endif()
string(REGEX MATCH "^[0-9]+\\.[0-9]+\\.[0-9]+" PTEPACK_FB_VERSION "${PTEPACK_FB_VERSION}")
string(REGEX REPLACE "^([0-9]+\\.[0-9]+\\.)([0-9]+)$" "\\1" PTEPACK_FB_PREFIX "${PTEPACK_FB_VERSION}")
string(REGEX REPLACE "^[0-9]+\\.[0-9]+\\.([0-9]+)$" "\\1" PTEPACK_FB_PATCH "${PTEPACK_FB_VERSION}")
math(EXPR PTEPACK_FB_NEXT "${PTEPACK_FB_PATCH} + 1")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libflatbuffers-dev (>= ${PTEPACK_FB_VERSION}~), libflatbuffers-dev (<< ${PTEPACK_FB_PREFIX}${PTEPACK_FB_NEXT}~), libfmt-dev, nlohmann-json3-dev, libssl-dev, zlib1g-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION
    "packer for ExecuTorch model artifacts (library and headers)\nThe ptepack library (static), its headers and the CMake package for\nfind_package(ptepack): pack, dump, verify and diff from C++.")
include(CPack)
