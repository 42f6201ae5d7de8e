# llmc: `make` builds build/llmc and build/libllmcrt.a; `make check` installs
# what the tests need (scripts/deps.sh) and runs every test; `make demo`
# exports a small model, compiles it and generates tokens.
CC      ?= gcc
BUILD   ?= build
WARN    := -Wall -Wextra -Werror
OPT     ?= -O2 -g
ifeq ($(SAN),1)
OPT     := -O2 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
BUILD   := build-san
endif
CFLAGS_C  := -std=c11 $(WARN) $(OPT) -D_GNU_SOURCE -I. -Icompiler -I$(BUILD)/gen -Iruntime -Iruntime/platform
CFLAGS_RT := -std=c99 $(WARN) $(OPT) -Iruntime -I$(BUILD)/gen
LDLIBS    := -lprotobuf-c -lxxhash -lm -pthread
LDFLAGS   := $(filter -fsanitize=%,$(OPT))

ONNX_PROTO := /usr/include/onnx/onnx.proto
GEN_C      := $(BUILD)/gen/onnx/onnx.pb-c.c

# The runtime's sources come from the fragment firmware builds include too.
LLMC_RT_GEN := $(BUILD)/gen
# `make` alone builds `all` (the fragment below defines the first rule).
.DEFAULT_GOAL := all
include runtime/llmc_rt.mk
RT_SRC   := $(LLMC_RT_SRC)
# x86-64 builds add the AVX2 kernel table.  Only its kernel files get
# -mavx2 -mfma -mf16c: cpu_x86.c (the check that runs before the table is
# chosen) and the rest of the runtime stay baseline x86-64, so the runtime
# still runs plans for "generic" on a CPU without AVX2.
IS_X86_64 := $(filter x86_64-%,$(shell $(CC) -dumpmachine))
AVX2_FLAGS := -mavx2 -mfma -mf16c
ifneq ($(IS_X86_64),)
AVX2_SRC := $(wildcard runtime/kernels/x86/*.c)
AVX2_KERNEL_SRC := $(filter-out %/cpu_x86.c,$(AVX2_SRC))
RT_SRC   += $(AVX2_SRC)
$(AVX2_KERNEL_SRC:%.c=$(BUILD)/%.o): CFLAGS_RT += $(AVX2_FLAGS)
# the files named *avx512* add AVX-512 (their table is chosen only on a CPU
# that has it)
AVX512_VNNI_FLAGS := -mavx512f -mavx512bw -mavx512vl -mavx512vnni
AVX512_OBJ := $(patsubst %.c,%.o,$(wildcard runtime/kernels/x86/*avx512*.c))
$(addprefix $(BUILD)/,$(AVX512_OBJ)): CFLAGS_RT += $(AVX512_VNNI_FLAGS)
# and the files named *avxvnni* AVX-VNNI (vpdpbusd on YMM, VEX-encoded)
AVXVNNI_FLAGS := -mavxvnni
AVXVNNI_OBJ := $(patsubst %.c,%.o,$(wildcard runtime/kernels/x86/*avxvnni*.c))
$(addprefix $(BUILD)/,$(AVXVNNI_OBJ)): CFLAGS_RT += $(AVXVNNI_FLAGS)
endif
RT_OBJ   := $(RT_SRC:%.c=$(BUILD)/%.o)
# Optional platform files (threads): their own archive, never in libllmcrt.a.
REF_SRC  := $(addprefix runtime/platform/,ref_delegate.c ref_prepare.c ref_kernels.c)
THR_OBJ  := $(BUILD)/runtime/platform/threads_pthread.o $(REF_SRC:%.c=$(BUILD)/%.o)
THR_LIB  := $(BUILD)/libllmcrt_threads.a
# The compiler's folders, one job each (docs/architecture.md): everything but
# the CLI's two entry points goes into libllmcc.a.
C_DIRS   := compiler/support compiler/ir compiler/onnx compiler/tokenizer compiler/passes compiler/codegen \
            compiler/tools compiler/npu compiler/cli
C_SRC    := $(filter-out compiler/cli/main.c compiler/cli/main_run.c,$(wildcard $(C_DIRS:%=%/*.c)))
# The AVX2 loops of `llmc bench --roofline` (compiled with -mavx2 -mfma below,
# called only after a cpuid check): x86-64 hosts only.
X86_HOST := $(filter x86_64-%,$(shell $(CC) -dumpmachine))
ifeq ($(X86_HOST),)
C_SRC    := $(filter-out compiler/tools/roofline_x86.c,$(C_SRC))
endif
C_OBJ    := $(C_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/onnx/onnx.pb-c.o
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

all: $(BUILD)/llmc $(BUILD)/libllmcrt.a $(THR_LIB)

$(GEN_C): $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen/onnx
	protoc-c --c_out=$(BUILD)/gen -I/usr/include onnx/onnx.proto

$(BUILD)/gen/onnx/onnx.pb-c.o: $(GEN_C)
	$(CC) -std=c11 $(OPT) -w -I$(BUILD)/gen -c $< -o $@

# The tokenizer's Unicode tables: the fragment's rule.
$(BUILD)/runtime/unicode.o: $(LLMC_RT_GEN_HEADERS)

$(BUILD)/runtime/%.o: runtime/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_RT) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) -MMD -MP -c $< -o $@

$(BUILD)/libllmcrt.a: $(RT_OBJ)
	rm -f $@ && ar rcs $@ $^

$(THR_OBJ): CFLAGS_RT := -std=c11 $(WARN) $(OPT) -D_POSIX_C_SOURCE=200809L -Iruntime
# The reference delegate stands in for an NPU: -O3 lets gcc vectorize its
# int8 dot products (chunked prefill of the trained model: 287 -> 1,030 tok/s).
$(REF_SRC:%.c=$(BUILD)/%.o): CFLAGS_RT += -O3

$(THR_LIB): $(THR_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libllmcc.a: $(C_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/llmc: $(BUILD)/compiler/cli/main.o $(BUILD)/libllmcc.a $(THR_LIB) $(BUILD)/libllmcrt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libllmcc.a $(THR_LIB) $(BUILD)/libllmcrt.a $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) -Itests/unit -o $@ $< $(BUILD)/libllmcc.a $(THR_LIB) $(BUILD)/libllmcrt.a $(LDFLAGS) $(LDLIBS)

# LD_PRELOAD fault injection for t_bad_input (never sanitized: it is
# preloaded into sanitized binaries too).
FAULT_SHIM := $(BUILD)/faults/flip_write.so
$(FAULT_SHIM): tests/faults/flip_write.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -O2 -shared -fPIC -o $@ $< -ldl

unit: $(UNIT_BIN) $(FAULT_SHIM)

# Kernel measurements (not a test): decode GEMV and prefill GEMM of the
# AVX2 table against a STREAM-like read, on 1 and 2 threads.
BENCH_Q := $(BUILD)/bench/bench_qlinear
$(BENCH_Q): tests/bench/bench_qlinear.c $(BUILD)/libllmcc.a $(THR_LIB) $(BUILD)/libllmcrt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) $(AVX2_FLAGS) -o $@ $< $(BUILD)/libllmcc.a $(THR_LIB) $(BUILD)/libllmcrt.a \
	  $(LDFLAGS) -lm -pthread

bench-kernels: $(BENCH_Q)
	$(BENCH_Q)

# NEON kernels (runtime/kernels/arm_neon/, never in RT_SRC: the wildcard
# above does not descend into it): cross-compiled for AArch64 with the
# -march each kernel file needs, linked statically with their test, and run
# under qemu-aarch64 by tests/t_neon.sh.
A64_CC     ?= aarch64-linux-gnu-gcc
A64_DIR    := $(BUILD)/aarch64
A64_CFLAGS := -std=c99 $(WARN) -O2 -Iruntime -Iruntime/kernels -Iruntime/kernels/arm_neon
A64_SRC    := $(wildcard runtime/kernels/arm_neon/*.c)
A64_OBJ    := $(A64_SRC:%.c=$(A64_DIR)/%.o)
A64_TEST   := $(A64_DIR)/test_neon_quant

# -fno-schedule-insns: the tile loops keep 24 (SDOT) or 20 (SMMLA)
# independent accumulators in registers; gcc's scheduling before register
# allocation stretches the live ranges and spills some of them.
$(A64_DIR)/runtime/kernels/arm_neon/q_neon_dot.o: A64_ARCH := -march=armv8.2-a+dotprod -fno-schedule-insns
$(A64_DIR)/runtime/kernels/arm_neon/q_neon_i8mm.o: A64_ARCH := -march=armv8.2-a+i8mm -fno-schedule-insns

$(A64_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(A64_CC) $(A64_CFLAGS) $(A64_ARCH) -MMD -MP -c $< -o $@

# (tensor_traits.o: the packed shapes' initializers)
$(A64_TEST): tests/unit_arm/test_neon_quant.c $(A64_OBJ) $(A64_DIR)/runtime/tensor_traits.o tests/unit/tap.h
	$(A64_CC) $(A64_CFLAGS) -Itests/unit -static -o $@ $< $(A64_OBJ) $(A64_DIR)/runtime/tensor_traits.o -lm

# The runtime and `llmc run` for Linux on AArch64 (build/aarch64/llmc-run):
# the portable core, the NEON tables, the pthread platform file and the run
# command (compiler/cli/main_run.c), cross-compiled and linked statically so
# tests/t_aarch64.sh can run it under qemu-aarch64 against the x86 build.
A64_RUN     := $(A64_DIR)/llmc-run
A64_CLI_SRC := compiler/cli/main_run.c compiler/cli/cmd_run.c compiler/cli/cli.c compiler/cli/npu_options.c \
               compiler/support/file_map.c compiler/support/diag.c compiler/support/out_file.c \
               compiler/npu/npu_prefill.c
A64_PLATFORM_SRC := runtime/platform/threads_pthread.c $(REF_SRC)
A64_RUN_OBJ := $(patsubst %.c,$(A64_DIR)/%.o,$(LLMC_RT_SRC) $(A64_CLI_SRC) \
               $(A64_PLATFORM_SRC)) $(A64_OBJ)
$(patsubst %.c,$(A64_DIR)/%.o,$(LLMC_RT_SRC)): A64_CFLAGS += -I$(BUILD)/gen
$(patsubst %.c,$(A64_DIR)/%.o,$(LLMC_RT_SRC)): $(LLMC_RT_GEN_HEADERS)
$(patsubst %.c,$(A64_DIR)/%.o,$(A64_CLI_SRC)): A64_CFLAGS := -std=c11 $(WARN) -O2 -D_GNU_SOURCE \
               -I. -Icompiler -I$(BUILD)/gen -Iruntime -Iruntime/platform
$(patsubst %.c,$(A64_DIR)/%.o,$(A64_PLATFORM_SRC)): A64_CFLAGS := -std=c11 $(WARN) -O2 \
               -D_POSIX_C_SOURCE=200809L -Iruntime

$(A64_RUN): $(A64_RUN_OBJ)
	$(A64_CC) -static -o $@ $^ -lm -pthread

aarch64-tests: $(A64_TEST) $(A64_RUN)

# ---- Firmware: the runtime core, freestanding, for Cortex-M ---------------
# `make firmware` compiles the core (runtime/llmc_rt.mk's LLMC_RT_SRC) with
# arm-none-eabi-gcc for each of FW_CPUS into build/firmware/<cpu>/libllmcrt.a;
# scripts/firmware_core.sh then fails on any undefined symbol beyond the
# documented ones and reports the linked size with every op and with the
# firmware demo plan's op resolver (llmc inspect --resolver: docs/firmware.md).
FW_CC    ?= arm-none-eabi-gcc
FW_AR    ?= arm-none-eabi-ar
FW_CPUS  := cortex-m4 cortex-m55
FW_ARCH_cortex-m4  := -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16
FW_ARCH_cortex-m55 := -mcpu=cortex-m55 -mthumb -mfloat-abi=hard
FW_LD_cortex-m4    := $(LLMC_RT_NEWLIB_LDFLAGS)
FW_CFLAGS := $(LLMC_RT_FW_CFLAGS) -Os $(WARN) -Wdouble-promotion $(addprefix -I,$(LLMC_RT_INC))
FW_LIBS  := $(FW_CPUS:%=$(BUILD)/firmware/%/libllmcrt.a)

define FW_CPU_RULES
$(BUILD)/firmware/$(1)/%.o: %.c $(LLMC_RT_GEN_HEADERS)
	@mkdir -p $$(dir $$@)
	$(FW_CC) $(FW_ARCH_$(1)) $(FW_CFLAGS) -MMD -MP -c $$< -o $$@
$(BUILD)/firmware/$(1)/libllmcrt.a: $(LLMC_RT_SRC:%.c=$(BUILD)/firmware/$(1)/%.o)
	rm -f $$@ && $(FW_AR) rcs $$@ $$^
endef
$(foreach c,$(FW_CPUS),$(eval $(call FW_CPU_RULES,$(c))))

# The Cortex-M archives alone (built with the rest by `make check`).
firmware-libs: $(FW_LIBS)

firmware: $(FW_LIBS) $(BUILD)/llmc
	BUILD=$(BUILD) FW_LIB_DIR="$(FW_LIB_DIR)" FW_CC=$(FW_CC) FW_CPUS="$(FW_CPUS)" \
	  FW_ARCH_cortex_m4="$(FW_ARCH_cortex-m4)" FW_ARCH_cortex_m55="$(FW_ARCH_cortex-m55)" \
	  LLMC_RT_LIBM="$(LLMC_RT_LIBM)" FW_CFLAGS="$(FW_CFLAGS)" \
	  FW_LD_cortex_m4="$(FW_LD_cortex-m4)" FW_LD_cortex_m55="$(FW_LD_cortex-m55)" \
	  scripts/firmware_core.sh

# The trained model as firmware on QEMU's mps2-an386 and mps3-an547, its
# ids checked against the host runtime's (docs/firmware.md, "The firmware demo").
firmware-demo: deps all
	BUILD=$(BUILD) scripts/firmware_demo.sh

# ---- make install: the compiler, the runtime archives, the public headers
# and a pkg-config file (llmc-rt) for hosted builds ------------------------
PREFIX  ?= /usr/local
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
# (llmc_rt_internal.h serves the llmc tools and tests and is not installed)
RT_PUBLIC_HEADERS := runtime/llmc_rt.h runtime/llmc_rt_resolver.h runtime/plan_enums.h \
                     runtime/platform/llmc_threads.h runtime/platform/llmc_ref_delegate.h
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/include/llmc
	install -m 755 $(BUILD)/llmc $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(THR_LIB) $(BUILD)/libllmcrt.a $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(RT_PUBLIC_HEADERS) $(DESTDIR)$(PREFIX)/include/llmc/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' runtime/llmc-rt.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/llmc-rt.pc

deps:
	scripts/deps.sh

# `make check`: the build, NPROC jobs at a time, then tests/run_all.sh (NPROC
# tests at a time) over the tier of this build: san for SAN=1, else plain
# (the tiers: tests/run_all.sh).  Besides `all unit` the build makes what
# the tier's tests name in their "# needs:" header lines (run_all.sh
# --needs): the fuzz targets, the AArch64 and Cortex-M builds for the plain
# tier only.
NPROC      ?= $(shell nproc 2>/dev/null || echo 1)
CHECK_TIER := $(if $(filter 1,$(SAN)),san,plain)
check: deps
	$(MAKE) -j$(NPROC) all unit $$(BUILD=$(BUILD) TIER=$(CHECK_TIER) tests/run_all.sh --needs)
	BUILD=$(BUILD) TIER=$(CHECK_TIER) SAN_FLAGS="$(LDFLAGS)" TEST_JOBS=$(NPROC) tests/run_all.sh

# `make check-tsan`: the tests that run threads, under ThreadSanitizer, in a
# build folder of its own: the compiler, the runtime archives and
# test_rt_threads built with -fsanitize=thread, then tests/run_all.sh over
# test_rt_threads (the pool), t_threads (compile and run on 1, 2 and 4
# threads) and t_sessions_parallel (1..8 sessions of one plan on as many
# threads, 4 decode steps each instead of 16: TSan runs the program about
# ten times slower, and every session still prefills while others decode).
# A report stops its process (halt_on_error) and is written to
# build-tsan/tsan/; any file there fails the target, whatever the test made
# of the exit code.  -Wno-tsan: gcc warns that TSan does not model
# atomic_thread_fence; the pool's fences order only its seqlock's atomic
# fields, and what guards plain memory is release/acquire on atomics, which
# TSan does model.
TSAN_BUILD := build-tsan
TSAN_OPT   := -O2 -g -fsanitize=thread -Wno-tsan
TSAN_TESTS := test_rt_threads t_threads t_sessions_parallel
TSAN_LOGS  := $(TSAN_BUILD)/tsan
check-tsan: deps
	$(MAKE) -j$(NPROC) BUILD=$(TSAN_BUILD) OPT="$(TSAN_OPT)" \
	  $(addprefix $(TSAN_BUILD)/,llmc libllmcrt.a libllmcrt_threads.a tests/test_rt_threads)
	rm -rf $(TSAN_LOGS) && mkdir -p $(TSAN_LOGS)
	TSAN_OPTIONS="halt_on_error=1 log_path=$(abspath $(TSAN_LOGS))/report" BUILD=$(TSAN_BUILD) \
	  TIER=san SAN_FLAGS=-fsanitize=thread SESSIONS_STEPS=4 TESTS="$(TSAN_TESTS)" \
	  TEST_JOBS=$(NPROC) \
	  tests/run_all.sh; rc=$$?; \
	  for f in $(TSAN_LOGS)/report*; do [ -e "$$f" ] && cat "$$f" && rc=1; done; exit $$rc

include tests/fuzz/fuzz.mk
# (the fuzz build compiles the runtime again: the same flags for the same files)
$(AVX2_KERNEL_SRC:%.c=$(FUZZ_DIR)/obj/%.o): FUZZ_CFLAGS += $(AVX2_FLAGS)
$(addprefix $(FUZZ_DIR)/obj/,$(AVX512_OBJ)): FUZZ_CFLAGS += $(AVX512_VNNI_FLAGS)
$(addprefix $(FUZZ_DIR)/obj/,$(AVXVNNI_OBJ)): FUZZ_CFLAGS += $(AVXVNNI_FLAGS)

ifneq ($(X86_HOST),)
$(BUILD)/compiler/tools/roofline_x86.o: CFLAGS_C += -mavx2 -mfma
$(FUZZ_DIR)/obj/compiler/tools/roofline_x86.o: FUZZ_CFLAGS += -mavx2 -mfma
endif

# The tokenizer parity test on every fortune file and Genesis..Deuteronomy.
tokenizer-parity: deps all
	TOKENIZER_FULL=1 BUILD=$(BUILD) tests/t_tokenizer.sh

demo: deps all
	scripts/demo.sh

# Every model family in the float16 and pre-quantized kinds compared with
# ONNX Runtime (make check runs the families whose difference meets a
# kind's; this is the whole cross product, about 15 minutes on 2 cores).
ALL_FAMILIES := llama qwen2 gpt2 phi qwen3 llama32 smollm2 smollm3 granite olmo2 phi3 mistral gemma2 gemma3
check-families: deps all
	BUILD=$(BUILD) FP16_FAMILIES="$(ALL_FAMILIES)" tests/t_fp16.sh; fp16=$$?; \
	BUILD=$(BUILD) PREQUANT_FAMILIES="$(ALL_FAMILIES)" tests/t_prequant.sh && [ $$fp16 -eq 0 ]

# The 2.5 GB Qwen2-0.5B-shaped model: export, compile, run against ONNX Runtime.
big-model: deps all
	scripts/big_model.sh

# Kernel measurements (not a test): fp32 Linear and Attention on Qwen2-0.5B
# shapes, 1 and 2 threads.
BENCH_F32 := $(BUILD)/bench/bench_f32
$(BENCH_F32): tests/bench/bench_f32.c $(BUILD)/libllmcc.a $(THR_LIB) $(BUILD)/libllmcrt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) -o $@ $< $(BUILD)/libllmcc.a $(THR_LIB) $(BUILD)/libllmcrt.a $(LDFLAGS) -lm -pthread

bench-f32: $(BENCH_F32)
	$(BENCH_F32)

# The soak (not in `make check`): the trained model generates 10^5 tokens
# through repeated full contexts for every KV cache dtype, its RSS sampled
# and its reference context compared (scripts/soak.sh, docs/testing.md).
# tests/t_reverify.sh drives the same program.
SOAK_BIN := $(BUILD)/soak/llmc-soak
$(SOAK_BIN): tests/soak/soak.c $(BUILD)/libllmcc.a $(BUILD)/libllmcrt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) -o $@ $< $(BUILD)/libllmcc.a $(BUILD)/libllmcrt.a $(LDFLAGS) $(LDLIBS)

soak-bin: $(SOAK_BIN)

soak: all $(SOAK_BIN)
	BUILD=$(BUILD) nice scripts/soak.sh

# The kernel benchmarks are built (not run) with the tests, so that a change
# of the kernels' interfaces cannot leave them uncompilable unnoticed.
ifneq ($(X86_HOST),)
unit: $(BENCH_Q) $(BENCH_F32)
endif

clean:
	rm -rf build build-san build-tsan


.PHONY: firmware firmware-libs firmware-demo install soak soak-bin check-families
.PHONY: all unit deps check check-tsan demo tokenizer-parity big-model clean bench-kernels bench-f32 aarch64-tests
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
