# llmc: `make` builds build/llmc and build/libllmcrt.a; `make check` installs
# what the tests need (scripts/deps.sh) and runs every test; `make demo`
# exports a small model, compiles it and generates tokens.
CC      ?= gcc
BUILD   ?= build
WARN    := -Wall -Wextra -Werror
OPT     ?= -O2 -g
ifeq ($(SAN),1)
OPT     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
BUILD   := build-san
endif
CFLAGS_C  := -std=c11 $(WARN) $(OPT) -D_GNU_SOURCE -I. -Icompiler -I$(BUILD)/gen -Iruntime -Iruntime/platform
CFLAGS_RT := -std=c99 $(WARN) $(OPT) -Iruntime
LDLIBS    := -lprotobuf-c -lxxhash -lm -pthread
LDFLAGS   := $(filter -fsanitize=%,$(OPT))

ONNX_PROTO := /usr/include/onnx/onnx.proto
GEN_C      := $(BUILD)/gen/onnx/onnx.pb-c.c

RT_SRC   := $(wildcard runtime/*.c runtime/kernels/*.c)
# SIMD kernel tables: each ISA directory is compiled with its own flags,
# only on hosts of that architecture (kernel_table.h).
ifneq ($(filter x86_64-%,$(shell $(CC) -dumpmachine)),)
RT_SRC   += $(wildcard runtime/kernels/x86_avx2/*.c)
$(BUILD)/runtime/kernels/x86_avx2/%.o: CFLAGS_RT += -mavx2 -mfma -mf16c
$(BUILD)/fuzz/obj/runtime/kernels/x86_avx2/%.o: FUZZ_CFLAGS += -mavx2 -mfma -mf16c
endif
RT_OBJ   := $(RT_SRC:%.c=$(BUILD)/%.o)
# Optional platform files (threads): their own archive, never in libllmcrt.a.
THR_OBJ  := $(BUILD)/runtime/platform/threads_pthread.o
THR_LIB  := $(BUILD)/libllmcrt_threads.a
C_SRC    := $(filter-out compiler/main.c,$(wildcard compiler/*.c passes/*.c codegen/*.c))
C_OBJ    := $(C_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/onnx/onnx.pb-c.o
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

all: $(BUILD)/llmc $(BUILD)/libllmcrt.a $(THR_LIB)

$(GEN_C): $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen/onnx
	protoc-c --c_out=$(BUILD)/gen -I/usr/include onnx/onnx.proto

$(BUILD)/gen/onnx/onnx.pb-c.o: $(GEN_C)
	$(CC) -std=c11 $(OPT) -w -I$(BUILD)/gen -c $< -o $@

$(BUILD)/runtime/%.o: runtime/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_RT) -MMD -c $< -o $@

$(BUILD)/%.o: %.c | $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) -MMD -c $< -o $@

$(BUILD)/libllmcrt.a: $(RT_OBJ)
	rm -f $@ && ar rcs $@ $^

$(THR_OBJ): CFLAGS_RT := -std=c11 $(WARN) $(OPT) -D_POSIX_C_SOURCE=200809L -Iruntime

$(THR_LIB): $(THR_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libllmcc.a: $(C_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/llmc: $(BUILD)/compiler/main.o $(BUILD)/libllmcc.a $(BUILD)/libllmcrt.a $(THR_LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libllmcc.a $(BUILD)/libllmcrt.a $(THR_LIB) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) -Itests/unit -o $@ $< $(BUILD)/libllmcc.a $(BUILD)/libllmcrt.a $(THR_LIB) $(LDFLAGS) $(LDLIBS)

# LD_PRELOAD fault injection for t_bad_input (never sanitized: it is
# preloaded into sanitized binaries too).
FAULT_SHIM := $(BUILD)/faults/flip_write.so
$(FAULT_SHIM): tests/faults/flip_write.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -O2 -shared -fPIC -o $@ $< -ldl

unit: $(UNIT_BIN) $(FAULT_SHIM)

deps:
	scripts/deps.sh

check: deps
	$(MAKE) all unit fuzz-build
	BUILD=$(BUILD) SAN_FLAGS="$(LDFLAGS)" tests/run_all.sh

include tests/fuzz/fuzz.mk

demo: deps all
	scripts/demo.sh

# The 2.5 GB Qwen2-0.5B-shaped model: export, compile, run against ONNX Runtime.
big-model: deps all
	scripts/big_model.sh

# Kernel measurements (not a test): fp32 Linear and Attention on Qwen2-0.5B
# shapes, 1 and 2 threads.
BENCH_F32 := $(BUILD)/bench/bench_f32
$(BENCH_F32): tests/bench/bench_f32.c $(BUILD)/libllmcrt.a $(THR_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C) -o $@ $< $(BUILD)/libllmcrt.a $(THR_LIB) $(LDFLAGS) -lm -pthread

bench-f32: $(BENCH_F32)
	$(BENCH_F32)

clean:
	rm -rf build build-san

.PHONY: all unit deps check demo big-model bench-f32 clean
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
