/* llmc check-onnx CASE_DIR: compiles CASE_DIR/model.onnx, runs it on every
 * test_data_set_N/input_K.pb and compares with output_K.pb. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "codegen/codegen.h"
#include "llmc_rt.h"
#include "onnx_import.h"
#include "passes/pipeline.h"

#define MAX_PASSES 64
#define MAX_IO 64

static const char check_help[] =
    "usage: llmc check-onnx CASE_DIR [--rtol R] [--atol A]\n"
    "\n"
    "Runs an ONNX backend test case (CASE_DIR/model.onnx with test_data_set_*/input_*.pb\n"
    "and output_*.pb) through the compiler and the runtime.  Floats match when\n"
    "|out - ref| <= atol + rtol * |ref| (defaults rtol 1e-3, atol 1e-7, as ONNX's runner);\n"
    "integers and bools must be equal.  Exit 0 on pass, 7 on a mismatch.\n";

typedef struct {
    double rtol, atol;
    double worst_abs;          /* largest |out - ref| seen */
    char worst_where[256];
} tolerance;

/* Compares one output; returns LLMC_OK or LLMC_E_MISMATCH with a message. */
static int compare_tensor(const llmc_rt_tensor *out, const llmc_tensor_file *ref, const char *where,
                          tolerance *tol, llmc_error *err)
{
    if (out->dtype != ref->dtype)
        return llmc_fail(err, LLMC_E_MISMATCH, "%s: dtype %d, expected %d", where, out->dtype, ref->dtype);
    if (out->rank != ref->rank || memcmp(out->dims, ref->dims, sizeof(int64_t) * (size_t)ref->rank))
        return llmc_fail(err, LLMC_E_MISMATCH, "%s: shape differs from the reference (rank %d vs %d)", where,
                         out->rank, ref->rank);
    size_t elem = llmc_dtype_size(ref->dtype), n = elem ? ref->nbytes / elem : 0;
    if (ref->dtype != LLMC_DT_FLOAT) {
        if (memcmp(out->data, ref->data, ref->nbytes))
            return llmc_fail(err, LLMC_E_MISMATCH, "%s: values differ", where);
        return LLMC_OK;
    }
    const float *a = out->data, *b = ref->data;
    for (size_t i = 0; i < n; i++) {
        if (isnan(b[i]) && isnan(a[i]))
            continue;
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d) || d > tol->worst_abs) {
            tol->worst_abs = isnan(d) ? INFINITY : d;
            snprintf(tol->worst_where, sizeof tol->worst_where, "%.200s[%zu]", where, i);
        }
        if (!(d <= tol->atol + tol->rtol * fabs((double)b[i])))
            return llmc_fail(err, LLMC_E_MISMATCH, "%s[%zu] = %.9g, expected %.9g (|diff| %.3g)", where, i,
                             (double)a[i], (double)b[i], d);
    }
    return LLMC_OK;
}

/* Reads DIR/<prefix>K.pb for K = 0.. until one is missing. */
static int read_tensors(const char *dir, const char *prefix, llmc_tensor_file *t, int *n, llmc_error *err)
{
    *n = 0;
    for (int k = 0; k < MAX_IO; k++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s%d.pb", dir, prefix, k);
        if (stat(path, &st) != 0)
            break;
        int rc = llmc_read_tensor_pb(path, &t[k], err);
        if (rc)
            return rc;
        (*n)++;
    }
    return LLMC_OK;
}

static void free_tensors(llmc_tensor_file *t, int n)
{
    for (int i = 0; i < n; i++)
        llmc_tensor_file_free(&t[i]);
}

static int run_data_set(llmc_rt_session *s, const char *dir, tolerance *tol, llmc_error *err)
{
    llmc_tensor_file in[MAX_IO], ref[MAX_IO];
    int n_in = 0, n_ref = 0, rc;
    memset(in, 0, sizeof in);
    memset(ref, 0, sizeof ref);
    rc = read_tensors(dir, "input_", in, &n_in, err);
    if (!rc)
        rc = read_tensors(dir, "output_", ref, &n_ref, err);
    if (!rc && (uint32_t)n_in != s->plan->n_inputs)
        rc = llmc_fail(err, LLMC_E_INPUT, "%s: %d input files for %u model inputs", dir, n_in, s->plan->n_inputs);
    if (!rc && (uint32_t)n_ref != s->plan->n_outputs)
        rc = llmc_fail(err, LLMC_E_INPUT, "%s: %d output files for %u model outputs", dir, n_ref, s->plan->n_outputs);
    llmc_rt_tensor args[MAX_IO];
    for (int k = 0; !rc && k < n_in; k++) {
        args[k].dtype = in[k].dtype;
        args[k].rank = in[k].rank;
        memcpy(args[k].dims, in[k].dims, sizeof args[k].dims);
        args[k].data = in[k].data;
    }
    llmc_rt_error rt = {0};
    if (!rc && llmc_rt_session_run(s, 0, 0, args, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", dir, rt.msg);
    for (int k = 0; !rc && k < n_ref; k++) {
        llmc_rt_tensor out;
        char where[512];
        llmc_rt_io io;
        llmc_rt_plan_io(s->plan, 1, (uint32_t)k, &io);
        snprintf(where, sizeof where, "%.300s output %d '%.150s'", dir, k, io.name);
        if (llmc_rt_session_output(s, (uint32_t)k, &out, &rt) != LLMC_RT_OK)
            rc = llmc_fail(err, LLMC_E_RUNTIME, "%s: %s", where, rt.msg);
        else
            rc = compare_tensor(&out, &ref[k], where, tol, err);
    }
    free_tensors(in, n_in);
    free_tensors(ref, n_ref);
    return rc;
}

static int compile_case(const char *case_dir, uint8_t **plan, size_t *size, llmc_error *err)
{
    char model[4096];
    snprintf(model, sizeof model, "%s/model.onnx", case_dir);
    llmc_graph g;
    llmc_graph_init(&g);
    llmc_import_options io = {0};
    llmc_pass_ctx ctx = {.max_context = 1};
    llmc_pass_record records[MAX_PASSES];
    int n_records = 0;
    int rc = llmc_import_onnx(model, &io, &g, err);
    if (!rc)
        rc = llmc_pipeline_run(&g, &ctx, NULL, records, &n_records, err);
    llmc_codegen_options co = {.max_context = 1, .n_passes = n_records, .passes = records};
    if (!rc)
        rc = llmc_codegen_to_memory(&g, &co, plan, size, NULL, err);
    llmc_graph_free(&g);
    return rc;
}

static int is_data_set(const struct dirent *e)
{
    return strncmp(e->d_name, "test_data_set_", 14) == 0;
}

static int run_case(const char *case_dir, tolerance *tol, int *n_sets, llmc_error *err)
{
    uint8_t *bytes = NULL;
    size_t size = 0;
    int rc = compile_case(case_dir, &bytes, &size, err);
    llmc_rt_plan plan;
    llmc_rt_session s;
    llmc_rt_error rt = {0};
    void *mem = NULL;
    if (!rc && llmc_rt_plan_open(&plan, bytes, size, LLMC_RT_VERIFY_HASHES, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "plan rejected: %s", rt.msg);
    size_t mem_size = rc ? 0 : llmc_rt_session_memory(&plan);
    if (!rc && !(mem = malloc(mem_size ? mem_size : 1)))
        rc = llmc_fail(err, LLMC_E_NOMEM, "cannot allocate %zu bytes", mem_size);
    if (!rc && llmc_rt_session_init(&s, &plan, mem, mem_size, &rt) != LLMC_RT_OK)
        rc = llmc_fail(err, LLMC_E_RUNTIME, "session: %s", rt.msg);
    struct dirent **sets = NULL;
    int n = rc ? 0 : scandir(case_dir, &sets, is_data_set, alphasort);
    for (int i = 0; i < n; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", case_dir, sets[i]->d_name);
        if (!rc)
            rc = run_data_set(&s, dir, tol, err);
        free(sets[i]);
    }
    free(sets);
    *n_sets = n;
    if (!rc && n <= 0)
        rc = llmc_fail(err, LLMC_E_INPUT, "%s has no test_data_set_* folder", case_dir);
    free(mem);
    free(bytes);
    return rc;
}

int llmc_cmd_check_onnx(int argc, char **argv)
{
    if (llmc_cli_wants_help(argc, argv)) {
        fputs(check_help, stdout);
        return 0;
    }
    tolerance tol = {.rtol = 1e-3, .atol = 1e-7};
    const char *case_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol")) && i + 1 < argc) {
            char *end;
            double v = strtod(argv[i + 1], &end);
            if (*end || v < 0)
                return llmc_cli_usage("check-onnx", "%s wants a non-negative number", argv[i]);
            *(argv[i][2] == 'r' ? &tol.rtol : &tol.atol) = v;
            i++;
        } else if (argv[i][0] == '-' || case_dir) {
            return llmc_cli_usage("check-onnx", "unexpected argument '%s'", argv[i]);
        } else {
            case_dir = argv[i];
        }
    }
    if (!case_dir)
        return llmc_cli_usage("check-onnx", "missing CASE_DIR");
    llmc_error err = {0};
    int n_sets = 0;
    int rc = run_case(case_dir, &tol, &n_sets, &err);
    if (rc) {
        printf("FAIL %s: %s\n", case_dir, err.msg);
        return rc;
    }
    printf("PASS %s (%d data sets, worst |diff| %.3g%s%s)\n", case_dir, n_sets, tol.worst_abs,
           tol.worst_where[0] ? " at " : "", tol.worst_where);
    return 0;
}
