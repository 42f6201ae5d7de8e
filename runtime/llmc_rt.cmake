# The llmc runtime core for a CMake project (a firmware image or a hosted
# program) that compiles it with its own toolchain and flags:
#
#   include(path/to/llmc/runtime/llmc_rt.cmake)
#   target_link_libraries(my_firmware PRIVATE llmc_rt)
#
# It defines the static library target llmc_rt from the same sources as
# runtime/llmc_rt.mk (the portable core, plus the SIMD tables on x86-64 and
# AArch64 hosts; no platform files)
# and the rule that generates the tokenizer's Unicode tables (python3 and
# Debian's unicode-data).  Link libm (and libgcc) as the toolchain needs;
# docs/firmware.md lists the symbols the core references.
set(LLMC_RT_DIR ${CMAKE_CURRENT_LIST_DIR})
set(LLMC_RT_GEN ${CMAKE_CURRENT_BINARY_DIR}/llmc_rt_gen)
set(LLMC_UNICODE_DIR /usr/share/unicode CACHE PATH "Debian unicode-data's directory")

file(GLOB LLMC_RT_SOURCES CONFIGURE_DEPENDS ${LLMC_RT_DIR}/*.c ${LLMC_RT_DIR}/kernels/*.c)
# x86-64 and AArch64 runtimes carry their SIMD kernel tables (targets.c
# lists them there); only the kernel files get the ISA flags, so the rest
# still runs "generic" plans on a CPU without them.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  file(GLOB LLMC_RT_SIMD CONFIGURE_DEPENDS ${LLMC_RT_DIR}/kernels/x86/*.c)
  set_source_files_properties(${LLMC_RT_SIMD} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
  set_source_files_properties(${LLMC_RT_DIR}/kernels/x86/cpu_x86.c PROPERTIES COMPILE_OPTIONS "")
  file(GLOB LLMC_RT_AVX512 CONFIGURE_DEPENDS ${LLMC_RT_DIR}/kernels/x86/*avx512*.c)
  set_source_files_properties(${LLMC_RT_AVX512} PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512vnni")
  file(GLOB LLMC_RT_AVXVNNI CONFIGURE_DEPENDS ${LLMC_RT_DIR}/kernels/x86/*avxvnni*.c)
  set_source_files_properties(${LLMC_RT_AVXVNNI} PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavxvnni")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  file(GLOB LLMC_RT_SIMD CONFIGURE_DEPENDS ${LLMC_RT_DIR}/kernels/arm_neon/*.c)
  set_source_files_properties(${LLMC_RT_DIR}/kernels/arm_neon/q_neon_dot.c
                              PROPERTIES COMPILE_OPTIONS "-march=armv8.2-a+dotprod")
  set_source_files_properties(${LLMC_RT_DIR}/kernels/arm_neon/q_neon_i8mm.c
                              PROPERTIES COMPILE_OPTIONS "-march=armv8.2-a+i8mm")
endif()
list(APPEND LLMC_RT_SOURCES ${LLMC_RT_SIMD})
list(SORT LLMC_RT_SOURCES)

add_custom_command(
  OUTPUT ${LLMC_RT_GEN}/unicode_tables.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${LLMC_RT_GEN}
  COMMAND python3 ${LLMC_RT_DIR}/../scripts/gen_unicode.py ${LLMC_UNICODE_DIR}
          ${LLMC_RT_GEN}/unicode_tables.h
  DEPENDS ${LLMC_RT_DIR}/../scripts/gen_unicode.py
  COMMENT "llmc_rt: Unicode tables from ${LLMC_UNICODE_DIR}")

add_library(llmc_rt STATIC ${LLMC_RT_SOURCES} ${LLMC_RT_GEN}/unicode_tables.h)
target_include_directories(llmc_rt PUBLIC ${LLMC_RT_DIR} PRIVATE ${LLMC_RT_GEN})
set_target_properties(llmc_rt PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON)
