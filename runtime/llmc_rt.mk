# The llmc runtime core as a makefile fragment, for a firmware (or any)
# build that compiles it with its own toolchain and flags:
#
#   LLMC_RT_GEN := build/llmc-gen        # optional: where generated headers go
#   include path/to/llmc/runtime/llmc_rt.mk
#   OBJS   += $(patsubst %.c,build/%.o,$(notdir $(LLMC_RT_SRC)))  # or any naming
#   CFLAGS += $(addprefix -I,$(LLMC_RT_INC))
#   $(OBJS): $(LLMC_RT_GEN_HEADERS)
#
# The core is C99 without malloc, stdio, threads or double arithmetic.  It
# references memcpy, memmove, memset, memcmp (what GCC requires of every
# freestanding environment) and the float libm functions of LLMC_RT_LIBM,
# no libgcc helper (its few 64-bit divisions go through rt_div64.h, not
# __aeabi_ldivmod); link with -lm.  --gc-sections with
# -ffunction-sections drops what a program does not call (the tokenizer's
# encoder and its Unicode tables when text never reaches the device).
# On x86-64 and AArch64 hosts targets.c lists the SIMD kernel tables, so a
# hosted build there adds LLMC_RT_SIMD_SRC_avx2 (kernel files with -mavx2
# -mfma -mf16c, the files named *avx512* with -mavx512f -mavx512bw
# -mavx512vl -mavx512vnni as well, those named *avxvnni* with -mavxvnni,
# cpu_x86.c without) or
# LLMC_RT_SIMD_SRC_neon (q_neon_dot.c with -march=armv8.2-a+dotprod,
# q_neon_i8mm.c with +i8mm); the main Makefile and runtime/llmc_rt.cmake do
# exactly that.  Cortex-M builds take
# LLMC_RT_SRC alone.

LLMC_RT_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
LLMC_RT_GEN ?= $(LLMC_RT_DIR)/../build/gen

LLMC_RT_SRC := $(sort $(wildcard $(LLMC_RT_DIR)/*.c $(LLMC_RT_DIR)/kernels/*.c))
LLMC_RT_INC := $(LLMC_RT_DIR) $(LLMC_RT_GEN)
LLMC_RT_SIMD_SRC_avx2 := $(sort $(wildcard $(LLMC_RT_DIR)/kernels/x86/*.c))
LLMC_RT_SIMD_SRC_neon := $(sort $(wildcard $(LLMC_RT_DIR)/kernels/arm_neon/*.c))
LLMC_RT_LIBM := ceilf cosf erff expf fabsf floorf logf lrintf powf sinf sqrtf tanhf
# Flags for a firmware build: -fno-math-errno lets sqrtf be one FPU
# instruction.  newlib's libm for Armv7E-M wraps expf, logf and powf in SVID
# error handling computed in double (soft-double on a Cortex-M4F); the link
# flags bind them to newlib's IEEE cores instead, which return the same
# values.  (Its Armv8-M libraries have unwrapped ones: no flags there.)
LLMC_RT_FW_CFLAGS := -std=c99 -ffreestanding -fno-math-errno -ffunction-sections -fdata-sections
LLMC_RT_NEWLIB_LDFLAGS := -Wl,--defsym=expf=__ieee754_expf -Wl,--defsym=logf=__ieee754_logf \
                          -Wl,--defsym=powf=__ieee754_powf

# The tokenizer's Unicode tables (classes, NFC), generated from the
# UnicodeData.txt family of Debian's unicode-data package.
LLMC_UNICODE_DIR ?= /usr/share/unicode
LLMC_RT_GEN_HEADERS := $(LLMC_RT_GEN)/unicode_tables.h
$(LLMC_RT_GEN)/unicode_tables.h: $(LLMC_RT_DIR)/../scripts/gen_unicode.py
	@mkdir -p $(dir $@)
	python3 $< $(LLMC_UNICODE_DIR) $@
