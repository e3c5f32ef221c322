# hy_target_warnings(<target>): hy's own code builds warning-free.
# Third-party headers come in through SYSTEM include paths and are not affected.
function(hy_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Werror>)
endfunction()
