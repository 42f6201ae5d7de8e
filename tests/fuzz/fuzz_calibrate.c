/* The calibration input of `llmc compile --calibrate TEXT` and
 * `--calibrate-ids FILE` (compiler/tools/text_ids.c, calibrate.c): the
 * fuzzed bytes are the file.  Every input is read both ways, as a text
 * encoded by the plan's tokenizer (llmc_encode_text_file) and as token ids
 * (llmc_read_ids against the plan's vocabulary, lines as windows), and what
 * the readers return is checked (ids in range, line ends increasing up to
 * the id count).  Inputs of up to RUN_MAX_BYTES then calibrate both ways
 * (llmc_calibrate_plan: the readers, the empty-input check, the windows of
 * WINDOW tokens run under the Linear observer, the percentile clips); the
 * compile around it (import, passes, quantization) is fuzz_compile's.
 *
 * The plan is an unquantized Qwen2 at export_llm.py's fuzz size (hidden 16)
 * with a byte-level tokenizer that scripts/fuzz_seeds.sh compiles; $FUZZ_CALIBRATE_PLAN names it (default
 * build/fuzz/models/calibrate.plan), opened once. */
#include <stdio.h>

#include "fuzz_common.h"
#include "llmc_rt_internal.h"
#include "tools/calibrate.h"
#include "tools/text_ids.h"

#define RUN_MAX_BYTES 32
#define WINDOW 8

static llmc_rt_plan plan;
static uint8_t *plan_bytes;
static char input_path[160];

static void unload(void)
{
    free(plan_bytes);
    remove(input_path);
}

static void load_plan(void)
{
    const char *path = getenv("FUZZ_CALIBRATE_PLAN");
    path = path ? path : "build/fuzz/models/calibrate.plan";
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && !fseek(f, 0, SEEK_END) && (size = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
        (plan_bytes = malloc((size_t)size)) && fread(plan_bytes, 1, (size_t)size, f) != (size_t)size)
        size = -1;
    llmc_rt_error err = {0};
    if (!f || size <= 0 || llmc_rt_plan_open(&plan, plan_bytes, (size_t)size, 0, &err) != LLMC_RT_OK ||
        !llmc_rt_tokenizer_memory(&plan, 0)) {
        fprintf(stderr, "fuzz_calibrate: no plan with a tokenizer at '%s' (scripts/fuzz_seeds.sh "
                "writes it) %s\n", path, err.msg);
        abort();
    }
    fclose(f);
    snprintf(input_path, sizeof input_path, "%s.calibrate.txt", fuzz_model_path());
    atexit(unload);
}

/* A new file each time: ext4 writes a file truncated to zero back to disk
 * when it is closed, which took a fifth of every execution (perf). */
static void write_input(const uint8_t *data, size_t size)
{
    remove(input_path);
    FILE *f = fopen(input_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
        perror("fuzz_calibrate: writing the input file");
        abort();
    }
}

/* What the readers hand the calibration run. */
static void check_ids(const llmc_id_list *ids, const llmc_id_list *ends, int64_t vocab, size_t size)
{
    if (ids->n > size + 1)
        abort(); /* a token covers at least one byte, an id at least one digit */
    for (size_t i = 0; i < ids->n; i++)
        if (ids->ids[i] < 0 || (vocab && ids->ids[i] >= vocab))
            abort();
    for (size_t k = 0; k < ends->n; k++)
        if (ends->ids[k] <= (k ? ends->ids[k - 1] : 0) || ends->ids[k] > (int64_t)ids->n)
            abort();
    if (vocab && ids->n && (!ends->n || ends->ids[ends->n - 1] != (int64_t)ids->n))
        abort(); /* the ids file's last line closes without a line break */
}

static void read_both_ways(size_t size)
{
    llmc_id_list ids = {0}, ends = {0};
    llmc_error err = {0};
    if (llmc_encode_text_file(&plan, input_path, &ids, &err) == LLMC_OK)
        check_ids(&ids, &ends, 0, size);
    free(ids.ids);
    ids = (llmc_id_list){0};
    if (llmc_read_ids(input_path, rt_plan_of(&plan)->vocab_size, &ids, &ends, &err) == LLMC_OK)
        check_ids(&ids, &ends, rt_plan_of(&plan)->vocab_size, size);
    free(ids.ids);
    free(ends.ids);
}

static void calibrate_both_ways(void)
{
    for (int as_ids = 0; as_ids < 2; as_ids++) {
        llmc_calibrate_options opt = {.text = as_ids ? NULL : input_path,
                                      .ids = as_ids ? input_path : NULL,
                                      .percentile = 99.9, .context = WINDOW};
        llmc_calibration c;
        llmc_error err = {0};
        if (llmc_calibrate_plan(&plan, &opt, &c, &err) != LLMC_OK)
            continue;
        if (!c.tokens || !c.windows || !c.n)
            abort(); /* a calibration that succeeds saw tokens and Linears */
        llmc_calibration_free(&c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!plan_bytes)
        load_plan();
    write_input(data, size);
    read_both_ways(size);
    if (size <= RUN_MAX_BYTES)
        calibrate_both_ways();
    return 0;
}
