# Runs a libFuzzer binary for SECONDS seconds in WORKDIR and fails on any
# crash, leak, sanitizer report or timeout. SEEDS (optional) is a folder of
# inputs that once found a bug: they are run first, every time. Usage:
#   cmake -DFUZZER=<path> -DSECONDS=<n> -DWORKDIR=<dir> [-DSEEDS=<dir>]
#         -P run_fuzzer.cmake
file(MAKE_DIRECTORY ${WORKDIR}/corpus)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -print_final_stats=1 ${WORKDIR}/corpus ${SEEDS}
  WORKING_DIRECTORY ${WORKDIR}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer ${FUZZER} failed (exit ${rc}); crash input in ${WORKDIR}")
endif()
message(STATUS "fuzzer ran ${SECONDS} s with no crash")
