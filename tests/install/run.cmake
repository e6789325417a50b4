# CTest install_consumer: installs the built project into a staging prefix, builds
# tests/install against it with find_package(ptepack), and runs the result.
# -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=...
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/stage
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install -B ${WORK_DIR}/build
                        -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${WORK_DIR}/stage
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the consumer against the staged package failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the consumer failed (${rc})")
endif()
file(MAKE_DIRECTORY ${WORK_DIR}/out)
execute_process(COMMAND ${WORK_DIR}/build/consumer ${SOURCE_DIR}/examples ${WORK_DIR}/out
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "methods 2, verify ok")
  message(FATAL_ERROR "the consumer failed (${rc}): ${out}")
endif()
# The staged package exports one target.
file(READ ${WORK_DIR}/stage/${CMAKE_INSTALL_LIBDIR}/cmake/ptepack/ptepackTargets.cmake targets)
string(REGEX MATCHALL "add_library\\(([^ )]+)" added "${targets}")
if(NOT added STREQUAL "add_library(ptepack::ptepack")
  message(FATAL_ERROR "the package exports ${added}, not ptepack::ptepack alone")
endif()
