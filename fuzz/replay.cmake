# Corpus replay in every build: each fuzz target's source linked with replay_main.cpp instead of
# libFuzzer, as replay_<name>, and one CTest fuzz_replay_<name> feeding it corpus/<name>/ and
# crashes/<name>/. Included from tests/CMakeLists.txt.
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)

# The driver is compiled once for every target.
add_library(ptepack_replay_main OBJECT ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp)
target_link_libraries(ptepack_replay_main PRIVATE ptepack_warnings ptepack_sanitizers)
target_compile_features(ptepack_replay_main PRIVATE cxx_std_20)
foreach(name IN LISTS PTEPACK_FUZZ_TARGETS)
  add_executable(replay_${name}
    ${CMAKE_CURRENT_LIST_DIR}/fuzz_${name}.cpp $<TARGET_OBJECTS:ptepack_replay_main>)
  target_link_libraries(replay_${name} PRIVATE ptepack ptepack_warnings ptepack_sanitizers)
  # Readers behind internal headers (json/json_document.h).
  target_include_directories(replay_${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../lib/src)
  target_compile_features(replay_${name} PRIVATE cxx_std_20)
  add_test(NAME fuzz_replay_${name}
    COMMAND replay_${name} ${CMAKE_CURRENT_LIST_DIR}/corpus/${name}
            ${CMAKE_CURRENT_LIST_DIR}/crashes/${name})
  set_tests_properties(fuzz_replay_${name} PROPERTIES TIMEOUT 120 LABELS fuzz)
endforeach()
