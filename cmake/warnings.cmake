# Warnings are errors for Mala's own code (not for generated or third-party headers).
add_library(mala_warnings INTERFACE)
target_compile_options(mala_warnings INTERFACE -Wall -Wextra -Wpedantic -Werror -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # g++ 12 reports false positives on std::vector/std::string with -O2 (GCC bugs 105329, 105651).
  target_compile_options(mala_warnings INTERFACE -Wno-restrict -Wno-stringop-overflow -Wno-array-bounds)
endif()
