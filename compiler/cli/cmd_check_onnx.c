/* llmc check-onnx CASE_DIR: compiles CASE_DIR/model.onnx, runs it on every
 * test_data_set_N/input_K.pb and compares with output_K.pb. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "llmc_rt.h"
#include "onnx/onnx_import.h"
#include "codegen/evaluate.h"
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
static int same_shape(const llmc_shape *s, const llmc_tensor_file *ref)
{
    if (s->rank != ref->rank)
        return 0;
    for (int d = 0; d < ref->rank; d++)
        if (s->dims[d].c != ref->dims[d])
            return 0;
    return 1;
}

static int compare_tensor(const llmc_eval_tensor *out, const llmc_tensor_file *ref, const char *where,
                          tolerance *tol, llmc_error *err)
{
    if (out->dtype != ref->dtype)
        return llmc_fail(err, LLMC_E_MISMATCH, "%s: dtype %d, expected %d", where, out->dtype, ref->dtype);
    if (!same_shape(&out->shape, ref) || out->nbytes != ref->nbytes)
        return llmc_fail(err, LLMC_E_MISMATCH, "%s: shape differs from the reference (rank %d vs %d)", where,
                         out->shape.rank, ref->rank);
    size_t elem = llmc_dtype_size(ref->dtype), n = elem ? ref->nbytes / elem : 0;
    if (ref->dtype != LLMC_DT_FLOAT) {
        if (ref->nbytes && memcmp(out->data, ref->data, ref->nbytes))   /* empty: data may be NULL */
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

/* ONNX operands an ahead-of-time compiler needs at compile time: shapes,
 * axes, slice bounds, split sizes, range bounds.  Backend test cases often
 * feed them as graph inputs; check-onnx binds such inputs to the data set's
 * values as constants, as a deployable model would hold them. */
static int is_shape_operand(const char *op, int k)
{
    static const struct { const char *op; unsigned mask; } table[] = {
        {"Reshape", 1u << 1}, {"Expand", 1u << 1}, {"Squeeze", 1u << 1}, {"Unsqueeze", 1u << 1},
        {"ReduceSum", 1u << 1}, {"ReduceMean", 1u << 1}, {"ReduceMax", 1u << 1}, {"ReduceMin", 1u << 1},
        {"ReduceProd", 1u << 1}, {"Split", 1u << 1}, {"Slice", 0x1eu}, {"ConstantOfShape", 1u << 0},
        {"Range", 0x7u}, {"CumSum", 1u << 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(table[i].op, op))
            return k < 32 && (table[i].mask >> k & 1u);
    return 0;
}

static int only_shape_uses(const llmc_graph *g, int value)
{
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const llmc_node *n = &g->nodes[i];
        for (int k = 0; !n->dead && k < n->n_inputs; k++) {
            if (n->inputs[k] != value)
                continue;
            if (!is_shape_operand(n->op_type, k))
                return 0;
            uses++;
        }
    }
    return uses > 0 && !g->values[value].is_graph_output;
}

/* Turns shape-operand inputs into constants; `in` is compacted to the
 * inputs that remain, in graph order. */
static int bind_shape_inputs(llmc_graph *g, llmc_tensor_file *in, int *n_in, llmc_error *err)
{
    if (*n_in != g->n_inputs)
        return llmc_fail(err, LLMC_E_INPUT, "%d input files for %d model inputs", *n_in, g->n_inputs);
    int kept = 0;
    for (int k = 0; k < g->n_inputs; k++) {
        int v = g->inputs[k];
        int integer = in[k].dtype == LLMC_DT_INT64 || in[k].dtype == LLMC_DT_INT32;
        if (!integer || !only_shape_uses(g, v)) {
            llmc_tensor_file keep = in[k];
            in[k] = in[kept];
            in[kept] = keep;
            g->inputs[kept++] = v;
            continue;
        }
        llmc_shape shape = {.rank = in[k].rank};
        for (int d = 0; d < in[k].rank; d++)
            shape.dims[d] = llmc_aff_const(in[k].dims[d]);
        if (llmc_graph_set_const(g, v, in[k].dtype, &shape, in[k].data, in[k].nbytes))
            return llmc_fail(err, LLMC_E_NOMEM, "out of memory binding input '%s'", g->values[v].name);
        g->values[v].is_graph_input = false;
    }
    g->n_inputs = kept;
    *n_in = kept;
    return LLMC_OK;
}

static int import_case(const char *case_dir, llmc_graph *g, llmc_error *err)
{
    char model[4096];
    snprintf(model, sizeof model, "%s/model.onnx", case_dir);
    llmc_import_options io = {0};
    return llmc_import_onnx(model, &io, g, err);
}

static int compile_graph(llmc_graph *g, llmc_tensor_file *in, int *n_in, llmc_error *err)
{
    llmc_pass_ctx ctx = {.evaluator = &llmc_runtime_evaluator, .max_context = 1};
    llmc_pass_record records[MAX_PASSES];
    int n_records = 0;
    int rc = bind_shape_inputs(g, in, n_in, err);
    return rc ? rc : llmc_pipeline_run(g, &ctx, NULL, records, &n_records, err);
}

/* Runs the compiled graph on the runtime (llmc_evaluate_graph: codegen to
 * an in-memory plan, verify, execute) and compares every output. */
static int execute(const llmc_graph *g, const llmc_tensor_file *in, int n_in, const llmc_tensor_file *ref,
                   int n_ref, const char *dir, tolerance *tol, llmc_error *err)
{
    if (n_ref != g->n_outputs)
        return llmc_fail(err, LLMC_E_INPUT, "%s: %d output files for %d model outputs", dir, n_ref, g->n_outputs);
    llmc_rt_tensor args[MAX_IO];
    llmc_eval_tensor outs[MAX_IO];
    memset(outs, 0, sizeof outs);
    for (int k = 0; k < n_in; k++) {
        args[k].dtype = in[k].dtype;
        args[k].rank = in[k].rank;
        memcpy(args[k].dims, in[k].dims, sizeof args[k].dims);
        args[k].data = in[k].data;
    }
    int rc = llmc_evaluate_graph(g, 0, 0, 1, args, outs, err);
    for (int k = 0; !rc && k < n_ref; k++) {
        char where[512];
        snprintf(where, sizeof where, "%.300s output %d '%.150s'", dir, k, g->values[g->outputs[k]].name);
        rc = compare_tensor(&outs[k], &ref[k], where, tol, err);
    }
    for (int k = 0; k < n_ref; k++)
        llmc_eval_tensor_free(&outs[k]);
    return rc;
}

/* Compiles the case for this data set's shape operands, runs, compares.
 * The model is imported first: a model llmc rejects (e.g. a sequence input)
 * is reported as such, not as a data file that does not parse as a tensor. */
static int run_data_set(const char *case_dir, const char *dir, tolerance *tol, llmc_error *err)
{
    llmc_tensor_file in[MAX_IO], ref[MAX_IO];
    int n_in = 0, n_ref = 0, n_read = 0;
    memset(in, 0, sizeof in);
    memset(ref, 0, sizeof ref);
    llmc_graph g;
    llmc_graph_init(&g);
    int rc = import_case(case_dir, &g, err);
    if (!rc)
        rc = read_tensors(dir, "input_", in, &n_in, err);
    n_read = n_in;
    if (!rc)
        rc = read_tensors(dir, "output_", ref, &n_ref, err);
    if (!rc)
        rc = compile_graph(&g, in, &n_in, err);
    if (!rc)
        rc = execute(&g, in, n_in, ref, n_ref, dir, tol, err);
    llmc_graph_free(&g);
    free_tensors(in, n_read);
    free_tensors(ref, n_ref);
    return rc;
}

static int is_data_set(const struct dirent *e)
{
    return strncmp(e->d_name, "test_data_set_", 14) == 0;
}

static int run_case(const char *case_dir, tolerance *tol, int *n_sets, llmc_error *err)
{
    struct dirent **sets = NULL;
    int n = scandir(case_dir, &sets, is_data_set, alphasort);
    int rc = LLMC_OK;
    for (int i = 0; i < n; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", case_dir, sets[i]->d_name);
        if (!rc)
            rc = run_data_set(case_dir, dir, tol, err);
        free(sets[i]);
    }
    free(sets);
    *n_sets = n;
    if (!rc && n <= 0)
        rc = llmc_fail(err, LLMC_E_INPUT, "%s has no test_data_set_* folder", case_dir);
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
