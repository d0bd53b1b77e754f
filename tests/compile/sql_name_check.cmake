# ctest sql.names_checked_at_compile_time: a statement named by a literal that is not an
# embedded SQL file must not compile (sql::SqlName, src/schema/sql_catalog.hpp), and one
# that is must. Run with -DCXX=<compiler> -DROOT=<source dir> -DNAMES=<generated include
# dir> -DWORK=<scratch dir>.
file(MAKE_DIRECTORY "${WORK}")
set(head "#include \"schema/sql_catalog.hpp\"\nstd::string_view f() { return awa::sql::file(")
file(WRITE "${WORK}/known.cpp" "${head}\"queries/enqueue/insert_lane.sql\"); }\n")
file(WRITE "${WORK}/misspelt.cpp" "${head}\"queries/enqueue/insert_lanes.sql\"); }\n")
set(flags -std=c++20 -fsyntax-only -I${ROOT}/src -I${ROOT}/include -I${NAMES})
execute_process(COMMAND ${CXX} ${flags} "${WORK}/known.cpp" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "an embedded file's name did not compile:\n${err}")
endif()
execute_process(COMMAND ${CXX} ${flags} "${WORK}/misspelt.cpp" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "a misspelt SQL file name compiled")
endif()
if(NOT err MATCHES "not_an_embedded_sql_file")
  message(FATAL_ERROR "the misspelt name failed for another reason:\n${err}")
endif()
message(STATUS "a misspelt SQL file name is a compile error")
