# MALA_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer for everything built.
# MALA_FUZZ (clang only): libFuzzer coverage instrumentation and the targets in tests/fuzz; it implies the
# sanitizers, so one clang tree runs both the sanitized unit tests and the fuzzers.
if(MALA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MALA_FUZZ needs clang (libFuzzer)")
  endif()
  set(MALA_SANITIZE ON)
endif()
# Coverage instrumentation goes only on the libraries the fuzzers exercise (see mala_fuzz_instrument calls):
# clang 14 fails on coroutine code (src/net) compiled with -fsanitize=fuzzer-no-link.
function(mala_fuzz_instrument target)
  if(MALA_FUZZ)
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
  endif()
endfunction()
if(MALA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # clang 14's -fsanitize=function emits relocations it cannot assemble in coroutine frames ("Cannot represent a
    # difference across sections"); the check guards calls through mistyped function pointers, which C++ code here
    # does not make.
    add_compile_options(-fno-sanitize=function)
  endif()
  add_link_options(-fsanitize=address,undefined)
endif()
