# ccl-info's command line, checked against the sources it reports on:
#   cmake -DCCL_INFO=<ccl-info> -DCCL_H=<include/ccl/ccl.h> -DCONFIG_TABLE=<config_table.cc> -P cli_test.cmake
# The expected version is read from ccl.h here, independently of CMakeLists.txt and of the tool.

function(fail)
  message(FATAL_ERROR "ccl-info CLI test: ${ARGV}")
endfunction()

# Runs ccl-info with the given arguments; sets status, out and err in the caller.
function(run_info)
  execute_process(COMMAND ${CCL_INFO} ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE o
                  ERROR_VARIABLE e TIMEOUT 20)
  set(status "${rc}" PARENT_SCOPE)
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
endfunction()

file(READ ${CCL_H} header)
foreach(part MAJOR MINOR PATCH)
  if(NOT header MATCHES "#define CCL_${part} ([0-9]+)")
    fail("no CCL_${part} in ${CCL_H}")
  endif()
  set(${part} ${CMAKE_MATCH_1})
endforeach()
math(EXPR code "${MAJOR} * 10000 + ${MINOR} * 100 + ${PATCH}")
set(expected "ccl ${MAJOR}.${MINOR}.${PATCH} (version code ${code})\n")

# --version: exactly one line, the header's version, status 0.
run_info(--version)
if(NOT status EQUAL 0 OR NOT out STREQUAL expected)
  fail("--version: status ${status}, printed '${out}${err}', expected '${expected}'")
endif()

# --env: every variable of the registry, with its current value from the environment.
file(STRINGS ${CONFIG_TABLE} table_lines REGEX "\"CCL_[A-Z0-9_]+\"")
set(names "")
foreach(line IN LISTS table_lines)
  string(REGEX MATCH "\"(CCL_[A-Z0-9_]+)\"" _ "${line}")
  list(APPEND names ${CMAKE_MATCH_1})
endforeach()
list(LENGTH names count)
if(count LESS 5)
  fail("found only ${count} variables in ${CONFIG_TABLE}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env CCL_TIMEOUT=77 ${CCL_INFO} --env
                RESULT_VARIABLE status OUTPUT_VARIABLE out TIMEOUT 20)
if(NOT status EQUAL 0)
  fail("--env: status ${status}")
endif()
foreach(name IN LISTS names)
  if(NOT out MATCHES "(^|\n)${name} \\(")
    fail("--env does not list ${name}")
  endif()
endforeach()
if(NOT out MATCHES "\nCCL_TIMEOUT \\(int\\)  default: 300  current: '77'\n    [a-z]")
  fail("--env: CCL_TIMEOUT line is not 'default: 300  current: '77'' followed by its doc")
endif()

# --env-markdown: every variable as a table row, and nothing of the environment (the page
# docs/environment.md must not depend on where it was generated).
execute_process(COMMAND ${CMAKE_COMMAND} -E env CCL_TIMEOUT=77 ${CCL_INFO} --env-markdown
                RESULT_VARIABLE status OUTPUT_VARIABLE markdown TIMEOUT 20)
if(NOT status EQUAL 0 OR NOT markdown MATCHES "^# ")
  fail("--env-markdown: status ${status}, printed '${markdown}'")
endif()
foreach(name IN LISTS names)
  if(NOT markdown MATCHES "\n\\| `${name}` \\| ")
    fail("--env-markdown does not list ${name} as a table row")
  endif()
endforeach()
if(NOT markdown MATCHES "\n\\| `CCL_TIMEOUT` \\| int \\| `300` \\| [a-z]")
  fail("--env-markdown: CCL_TIMEOUT's row is not its type, default and doc")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=CCL_TIMEOUT ${CCL_INFO} --env-markdown
                RESULT_VARIABLE status OUTPUT_VARIABLE markdown_unset TIMEOUT 20)
if(NOT status EQUAL 0 OR NOT markdown STREQUAL markdown_unset)
  fail("--env-markdown: the page changes with CCL_TIMEOUT's current value")
endif()

# No option: the version line first, then the build and the variables.
run_info()
string(FIND "${out}" "${expected}" version_at)
if(NOT status EQUAL 0 OR NOT version_at EQUAL 0 OR NOT out MATCHES "\nCCL_DEBUG \\(")
  fail("no option: status ${status}, printed '${out}'")
endif()

run_info(--help)
if(NOT status EQUAL 0 OR NOT out MATCHES "^usage: ccl-info")
  fail("--help: status ${status}, printed '${out}'")
endif()

# Bad usage: status 2, the usage on stderr, nothing on stdout.
foreach(bad --bogus "--version;--env")
  run_info(${bad})
  if(NOT status EQUAL 2 OR NOT err MATCHES "usage: ccl-info" OR NOT out STREQUAL "")
    fail("'${bad}': status ${status}, stdout '${out}', stderr '${err}'")
  endif()
endforeach()
