# Turns every .sql file under SQL_DIR into one C++ source, so SQL lives in .sql files
# and the binaries need no files at run time. Run by CMake at build time (see
# CMakeLists.txt); the output changes only when an input does.
#
# Optional, for a catalogue other than the library's (tools/chaos/CMakeLists.txt):
#   SQL_NAMESPACE  namespace that defines all_files() (default: awa::sql)
#   SQL_HEADER     header the output includes; it must declare SQL_NAMESPACE::all_files()
#                  and make SqlFile visible in SQL_NAMESPACE (default: schema/sql_catalog.hpp)
#   SQL_LABEL      the folder named in the "Generated from" line (default: sql/)
# Two catalogues linked into one binary need different namespaces.
if(NOT DEFINED SQL_NAMESPACE)
  set(SQL_NAMESPACE "awa::sql")
endif()
if(NOT DEFINED SQL_HEADER)
  set(SQL_HEADER "schema/sql_catalog.hpp")
endif()
if(NOT DEFINED SQL_LABEL)
  set(SQL_LABEL "sql/")
endif()
file(GLOB_RECURSE sql_files RELATIVE "${SQL_DIR}" "${SQL_DIR}/*.sql")
list(SORT sql_files)
set(body "// Generated from ${SQL_LABEL} by cmake/embed_sql.cmake. Do not edit.\n")
string(APPEND body "#include \"${SQL_HEADER}\"\n\nnamespace ${SQL_NAMESPACE} {\nnamespace {\n")
string(APPEND body "constexpr SqlFile kFiles[] = {\n")
foreach(rel IN LISTS sql_files)
  file(READ "${SQL_DIR}/${rel}" content)
  string(FIND "${content}" ")awa_sql\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${rel} contains the raw-string delimiter )awa_sql\"")
  endif()
  # A statement of queries/ starts with its own name, "-- awa:<folder>/<name>": prepared
  # statements are named after it (pg::Connection::cached_statement_name), and
  # pg_stat_activity and the server's logs show which statement runs.
  if(rel MATCHES "^queries/(.*)\\.sql$")
    set(content "-- awa:${CMAKE_MATCH_1}\n${content}")
  endif()
  string(APPEND body "    {\"${rel}\", R\"awa_sql(${content})awa_sql\"},\n")
endforeach()
string(APPEND body "};\n}  // namespace\n\n")
string(APPEND body "std::span<const SqlFile> all_files() { return kFiles; }\n\n}  // namespace ${SQL_NAMESPACE}\n")
set(out "${OUTPUT}")
if(EXISTS "${out}")
  file(READ "${out}" old)
  if(old STREQUAL body)
    return()
  endif()
endif()
file(WRITE "${out}" "${body}")
