# MALA_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer for everything built.
# MALA_FUZZ (clang only): libFuzzer coverage instrumentation and the targets in tests/fuzz; it implies the
# sanitizers, so one clang tree runs both the sanitized unit tests and the fuzzers.
if(MALA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MALA_FUZZ needs clang (libFuzzer)")
  endif()
  set(MALA_SANITIZE ON)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(MALA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
