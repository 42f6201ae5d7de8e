# libFuzzer targets (included by the Makefile).  Everything the targets link
# is rebuilt with clang under -fsanitize=fuzzer-no-link,address,undefined
# into $(BUILD)/fuzz/; `make fuzz-build` builds the targets, `make fuzz
# FUZZ_SECONDS=N` also generates the seed corpora (scripts/fuzz_seeds.sh)
# and runs every target N seconds (tests/fuzz/run_target.sh), failing if
# any of them finds a crash, leak, sanitizer report or hang.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_TARGETS := fuzz_onnx_import fuzz_onnx_tensor fuzz_compile fuzz_plan_open fuzz_plan_run fuzz_tokenizer \
                fuzz_calibrate fuzz_chunked fuzz_delegate
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_OPT     := -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_CFLAGS  := -std=c11 $(WARN) $(FUZZ_OPT) -D_GNU_SOURCE -I. -Icompiler -I$(BUILD)/gen -Iruntime -Iruntime/platform
FUZZ_LIB_OBJ := $(C_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(RT_SRC:%.c=$(FUZZ_DIR)/obj/%.o) \
                $(FUZZ_DIR)/obj/runtime/platform/threads_pthread.o $(REF_SRC:%.c=$(FUZZ_DIR)/obj/%.o) \
                $(FUZZ_DIR)/obj/onnx.pb-c.o $(FUZZ_DIR)/obj/tests/fuzz/fuzz_model_dir.o \
                $(FUZZ_DIR)/obj/tests/fuzz/chunked_common.o
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)

$(FUZZ_DIR)/obj/onnx.pb-c.o: $(GEN_C)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=c11 $(FUZZ_OPT) -w -I$(BUILD)/gen -c $< -o $@

$(FUZZ_DIR)/obj/%.o: %.c | $(GEN_C)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_DIR)/obj/runtime/unicode.o: $(LLMC_RT_GEN_HEADERS)

$(FUZZ_DIR)/libfuzzdeps.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_DIR)/libfuzzdeps.a
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

fuzz-build: $(FUZZ_BINS)

fuzz: deps all fuzz-build
	BUILD=$(BUILD) scripts/fuzz_seeds.sh
	@fail=0; for t in $(FUZZ_TARGETS); do \
	    BUILD=$(BUILD) tests/fuzz/run_target.sh $$t $(FUZZ_SECONDS) || fail=1; \
	done; exit $$fail

# Keep the targets' objects, which make would otherwise delete as intermediates.
.SECONDARY: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/obj/tests/fuzz/%.o)
.PHONY: fuzz fuzz-build
