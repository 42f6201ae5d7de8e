/* ONNX ModelProto -> llmc graph IR (see onnx_import.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "onnx_import.h"
#include "onnx_import_priv.h"
#include "contrib_expand.h"
#include "contrib_ops.h"
#include "onnx_if.h"
#include "onnx_ops.h"
#include "pb_diagnose.h"

/* What the graph keeps alive for its constants (g->import_state). */
typedef struct {
    Onnx__ModelProto *model;
    llmc_ext_cache ext;
} import_state;

/* Who defined a name: an ONNX node index (>= 0) or one of these. */
enum { ORIGIN_INPUT = -1, ORIGIN_INITIALIZER = -2 };

/* Open-addressing hash table from ONNX names (borrowed from the unpacked
 * model) to value ids: llmc_graph_find_value() is linear, too slow for
 * graphs with 100k values. */
typedef struct {
    const char *name;
    int value;
    int origin;
} name_slot;

typedef struct {
    const char *path;
    const uint8_t *bytes;               /* the model in memory, or NULL: map `path` */
    size_t size;
    const llmc_import_options *opt;
    llmc_graph *g;
    llmc_error *err;
    import_state *state;
    const Onnx__GraphProto *gp;         /* state->model->graph */
    name_slot *slots;
    size_t slot_mask;
    const Onnx__ValueInfoProto **inputs; /* graph inputs that are not initializers */
    size_t n_inputs;
    llmc_dim_table dims;
    char opset_problem[160];            /* reported with the unsupported operators */
    llmc_import_report report;          /* what was widened to float32 */
} importer;

/* proto2 leaves absent strings NULL (node names and domains are optional). */
static const char *or_empty(const char *s)
{
    return s ? s : "";
}

static int out_of_memory(importer *imp)
{
    return llmc_fail(imp->err, LLMC_E_NOMEM, "out of memory importing '%s'", imp->path);
}

static const char *describe_node(const importer *imp, size_t idx, char *buf, size_t size)
{
    const Onnx__NodeProto *n = imp->gp->node[idx];
    snprintf(buf, size, "node " LLMC_NAME_FMT " (#%zu, %.100s)", or_empty(n->name), idx, n->op_type);
    return buf;
}

/* ---- loading ---- */

static void import_state_free(void *p)
{
    import_state *s = p;
    if (s->model)
        onnx__model_proto__free_unpacked(s->model, NULL);
    llmc_ext_cache_free(&s->ext);
    free(s);
}

/* Hashes the serialized model and unpacks it; protobuf-c copies everything
 * it keeps, so the bytes are not needed afterwards. */
static int unpack_model(importer *imp, const uint8_t *bytes, uint64_t size)
{
    if (size == 0)
        return llmc_fail(imp->err, LLMC_E_INPUT, "'%s' is not a valid ONNX model (empty file)", imp->path);
    if (size > INT32_MAX)
        return llmc_fail(imp->err, LLMC_E_INPUT,
                         "'%s' is %" PRIu64 " bytes, over the 2 GiB protobuf limit: "
                         "larger models must keep their weights in external data files", imp->path, size);
    imp->g->source_hash = XXH64(bytes, (size_t)size, 0);
    imp->state->model = onnx__model_proto__unpack(NULL, (size_t)size, bytes);
    if (imp->state->model)
        return LLMC_OK;
    char why[1024] = "protobuf parse failed";
    llmc_pb_diagnose(&onnx__model_proto__descriptor, bytes, (size_t)size, why, sizeof why);
    return llmc_fail(imp->err, LLMC_E_INPUT, "'%s' is not a valid ONNX model (%s)", imp->path, why);
}

/* Maps the file (unless the bytes were given) and unpacks it; the mapping
 * is dropped right after. */
static int load_model(importer *imp)
{
    if (imp->bytes)
        return unpack_model(imp, imp->bytes, imp->size);
    llmc_mapped_file f;
    int e = llmc_map_file(imp->path, &f);
    if (e)
        return llmc_fail(imp->err, LLMC_E_INPUT, "cannot open '%s': %s", imp->path, strerror(e));
    int rc = unpack_model(imp, f.map, f.size);
    llmc_unmap_file(&f);
    return rc;
}

static int start_import(importer *imp)
{
    imp->state = calloc(1, sizeof *imp->state);
    if (!imp->state)
        return out_of_memory(imp);
    imp->g->import_state = imp->state;
    imp->g->import_free = import_state_free;
    int rc = load_model(imp);
    if (!rc)
        rc = llmc_ext_cache_init(&imp->state->ext, imp->path, imp->err);
    if (!rc && !imp->state->model->graph)
        rc = llmc_fail(imp->err, LLMC_E_INPUT, "'%s' is not a valid ONNX model (it has no graph)", imp->path);
    if (!rc)
        imp->gp = imp->state->model->graph;
    return rc;
}

/* If nodes become their branch's nodes (onnx_if.h). */
static int inline_ifs(importer *imp)
{
    return llmc_onnx_inline_ifs(imp->state->model->graph, imp->path, &imp->report, imp->err);
}

/* Op types, attribute names and graph input/output names are required;
 * checked once here, so later steps can use them freely. */
static int check_required_names(importer *imp)
{
    const Onnx__GraphProto *gp = imp->gp;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n->op_type || !*n->op_type)
            return llmc_fail(imp->err, LLMC_E_INPUT, "node " LLMC_NAME_FMT " (#%zu) has no op_type",
                             or_empty(n->name), i);
        for (size_t k = 0; k < n->n_attribute; k++)
            if (!n->attribute[k]->name || !*n->attribute[k]->name)
                return llmc_fail(imp->err, LLMC_E_INPUT,
                                 "node " LLMC_NAME_FMT " (#%zu, %.100s) attribute %zu has no name",
                                 or_empty(n->name), i, n->op_type, k);
    }
    for (size_t i = 0; i < gp->n_input; i++)
        if (!gp->input[i]->name || !*gp->input[i]->name)
            return llmc_fail(imp->err, LLMC_E_INPUT, "graph input #%zu has no name", i);
    for (size_t i = 0; i < gp->n_output; i++)
        if (!gp->output[i]->name || !*gp->output[i]->name)
            return llmc_fail(imp->err, LLMC_E_INPUT, "graph output #%zu has no name", i);
    return LLMC_OK;
}

/* ---- opsets and operator support ---- */

static bool is_default_domain(const char *domain)
{
    return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

static bool same_domain(const char *a, const char *b)
{
    if (is_default_domain(a) || is_default_domain(b))
        return is_default_domain(a) && is_default_domain(b);
    return strcmp(a, b) == 0;
}

/* The version the model imports for `domain`, -1 if it imports none. */
static int64_t domain_opset(const importer *imp, const char *domain)
{
    const Onnx__ModelProto *m = imp->state->model;
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (same_domain(m->opset_import[i]->domain, domain))
            return m->opset_import[i]->version;
    return -1;
}

static int check_opset(importer *imp)
{
    int64_t v = domain_opset(imp, "");
    if (v < 0)
        return llmc_fail(imp->err, LLMC_E_UNSUPPORTED,
                         "'%s' imports no opset of domain '' (llmc supports opsets %d..%d of it)", imp->path,
                         LLMC_MIN_OPSET, LLMC_MAX_OPSET);
    if (v < LLMC_MIN_OPSET || v > LLMC_MAX_OPSET)
        snprintf(imp->opset_problem, sizeof imp->opset_problem,
                 "opset %" PRId64 " of domain '' is outside the supported range %d..%d", v, LLMC_MIN_OPSET,
                 LLMC_MAX_OPSET);
    else
        imp->g->opset = (int)v;
    return LLMC_OK;
}

static bool attr_is_subgraph(const Onnx__AttributeProto *a)
{
    return a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH ||
           a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS || a->g || a->n_graphs;
}

/* Checked before operator support: a subgraph is the real reason an
 * If/Loop/Scan model cannot be compiled. */
static int refuse_subgraphs(importer *imp)
{
    char node[512];
    for (size_t i = 0; i < imp->gp->n_node; i++) {
        const Onnx__NodeProto *n = imp->gp->node[i];
        for (size_t k = 0; k < n->n_attribute; k++)
            if (attr_is_subgraph(n->attribute[k]))
                return llmc_fail(imp->err, LLMC_E_UNSUPPORTED,
                                 "%s has a subgraph attribute " LLMC_NAME_FMT ": subgraphs are not supported",
                                 describe_node(imp, i, node, sizeof node), n->attribute[k]->name);
    }
    return LLMC_OK;
}

/* An ONNX op llmc compiles, or a contrib op (contrib_ops.h) of a domain
 * the model imports. */
static bool node_supported(const importer *imp, const Onnx__NodeProto *n)
{
    if (is_default_domain(n->domain) && llmc_onnx_op_supported(n->op_type))
        return true;
    return llmc_contrib_op_find(n->domain, n->op_type) && domain_opset(imp, n->domain) >= 0;
}

/* "node 'a' (#4) com.microsoft::FusedMatMul opset 1" */
static int describe_unsupported(const importer *imp, size_t idx, const char *sep, char *buf, size_t size)
{
    const Onnx__NodeProto *n = imp->gp->node[idx];
    int64_t opset = domain_opset(imp, n->domain);
    char version[32] = "(domain not imported)";
    if (opset >= 0)
        snprintf(version, sizeof version, "%" PRId64, opset);
    bool plain = is_default_domain(n->domain);
    return snprintf(buf, size, "%snode " LLMC_NAME_FMT " (#%zu) %.100s%s%.100s opset %s", sep,
                    or_empty(n->name), idx, plain ? "" : n->domain, plain ? "" : "::",
                    n->op_type, version);
}

/* One error listing an unsupported default opset and every unsupported
 * node, cut with "... and N more" when the message buffer is full. */
static int refuse_unsupported_ops(importer *imp)
{
    size_t total = 0;
    for (size_t i = 0; i < imp->gp->n_node; i++)
        total += !node_supported(imp, imp->gp->node[i]);
    if (!total && !imp->opset_problem[0])
        return LLMC_OK;
    if (!total)
        return llmc_fail(imp->err, LLMC_E_UNSUPPORTED, "%s", imp->opset_problem);
    char msg[sizeof imp->err->msg], item[1024];
    const size_t tail_room = 48;        /* for "; ... and N more" */
    size_t used = (size_t)snprintf(msg, sizeof msg, "%s%sunsupported operators (%zu): ", imp->opset_problem,
                                   imp->opset_problem[0] ? "; " : "", total), listed = 0;
    for (size_t i = 0; i < imp->gp->n_node; i++) {
        if (node_supported(imp, imp->gp->node[i]))
            continue;
        size_t n = (size_t)describe_unsupported(imp, i, listed ? "; " : "", item, sizeof item);
        if (n >= sizeof item || used + n + tail_room >= sizeof msg)
            break;
        memcpy(msg + used, item, n + 1);
        used += n;
        listed++;
    }
    if (listed < total)
        snprintf(msg + used, sizeof msg - used, "%s... and %zu more", listed ? "; " : "", total - listed);
    return llmc_fail(imp->err, LLMC_E_UNSUPPORTED, "%s", msg);
}

/* The counts of a supported node's op: its ONNX row, else its contrib row. */
static llmc_onnx_op_info op_info(const Onnx__NodeProto *n)
{
    const llmc_onnx_op_info *onnx = is_default_domain(n->domain) ? llmc_onnx_op_find(n->op_type) : NULL;
    if (onnx)
        return *onnx;
    const llmc_contrib_op_info *c = llmc_contrib_op_find(n->domain, n->op_type);
    return (llmc_onnx_op_info){c->name, c->min_inputs, c->max_inputs, c->min_outputs, c->max_outputs};
}

/* Input and output counts against the operator's schema (onnx_ops.h), so
 * that no later step sees a Less with one input or a Where with two. */
static int check_arity(importer *imp)
{
    char node[512];
    for (size_t i = 0; i < imp->gp->n_node; i++) {
        const Onnx__NodeProto *n = imp->gp->node[i];
        llmc_onnx_op_info op = op_info(n);
        const char *what = NULL;
        int lo = 0, hi = 0;
        size_t count = 0;
        if (n->n_input < (size_t)op.min_inputs || n->n_input > (size_t)op.max_inputs)
            what = "input", lo = op.min_inputs, hi = op.max_inputs, count = n->n_input;
        else if (n->n_output < (size_t)op.min_outputs || n->n_output > (size_t)op.max_outputs)
            what = "output", lo = op.min_outputs, hi = op.max_outputs, count = n->n_output;
        if (!what)
            continue;
        char range[48];
        if (hi == LLMC_ONNX_N)
            snprintf(range, sizeof range, "at least %d", lo);
        else if (lo == hi)
            snprintf(range, sizeof range, "%d", lo);
        else
            snprintf(range, sizeof range, "%d to %d", lo, hi);
        return llmc_fail(imp->err, LLMC_E_INPUT, "%s has %zu %s%s; %s takes %s",
                         describe_node(imp, i, node, sizeof node), count, what, count == 1 ? "" : "s",
                         n->op_type, range);
    }
    return LLMC_OK;
}

/* ---- names ---- */

static int names_init(importer *imp)
{
    size_t expected = imp->gp->n_initializer + imp->gp->n_input + 1;
    for (size_t i = 0; i < imp->gp->n_node; i++)
        expected += imp->gp->node[i]->n_output;
    size_t cap = 16;
    while (cap < 2 * expected)
        cap *= 2;
    imp->slots = calloc(cap, sizeof *imp->slots);
    imp->slot_mask = cap - 1;
    return imp->slots ? LLMC_OK : out_of_memory(imp);
}

/* The slot holding `name`, or the empty slot where it belongs. */
static name_slot *name_slot_for(const importer *imp, const char *name)
{
    size_t i = (size_t)XXH64(name, strlen(name), 0) & imp->slot_mask;
    while (imp->slots[i].name && strcmp(imp->slots[i].name, name) != 0)
        i = (i + 1) & imp->slot_mask;
    return &imp->slots[i];
}

static int lookup_value(const importer *imp, const char *name)
{
    const name_slot *s = name_slot_for(imp, name);
    return s->name ? s->value : -1;
}

static const char *describe_origin(const importer *imp, int origin, char *buf, size_t size)
{
    if (origin == ORIGIN_INPUT)
        return "a graph input";
    if (origin == ORIGIN_INITIALIZER)
        return "an initializer";
    return describe_node(imp, (size_t)origin, buf, size);
}

/* Adds a value for `name`, which nothing else may define. */
static int define_value(importer *imp, const char *name, int dtype, int origin, int *id)
{
    name_slot *s = name_slot_for(imp, name);
    if (s->name) {
        char first[512], second[512];
        return llmc_fail(imp->err, LLMC_E_INPUT, "value " LLMC_NAME_FMT " is defined twice: by %s and by %s", name,
                         describe_origin(imp, s->origin, first, sizeof first),
                         describe_origin(imp, origin, second, sizeof second));
    }
    *id = llmc_graph_add_value(imp->g, name, dtype);
    if (*id < 0)
        return out_of_memory(imp);
    *s = (name_slot){name, *id, origin};
    return LLMC_OK;
}

/* Defines `name` as a constant; takes ownership of t's data. */
static int define_const(importer *imp, const char *name, int origin, llmc_onnx_tensor *t)
{
    int id;
    int rc = define_value(imp, name, t->dtype, origin, &id);
    if (rc) {
        if (t->data.owned)
            free((void *)t->data.data);
        return rc;
    }
    llmc_value *v = &imp->g->values[id];
    v->is_const = true;
    v->konst = t->data;
    v->shape.rank = t->rank;
    for (int i = 0; i < t->rank; i++)
        v->shape.dims[i] = llmc_aff_const(t->dims[i]);
    return LLMC_OK;
}

/* ---- float16 / bfloat16: widened to float32 ---- */

/* 0 for float16, 1 for bfloat16 (the report's index). */
static int half_kind(int dtype)
{
    return dtype == LLMC_DT_BFLOAT16;
}

/* The element type llmc computes a declared type in: float32 for the
 * 16-bit floats, counted in `counts`. */
static int widened_type(int dtype, uint32_t *counts)
{
    if (!llmc_dtype_is_float16(dtype))
        return dtype;
    counts[half_kind(dtype)]++;
    return LLMC_DT_FLOAT;
}

/* Decodes `t` (from the model's message) and widens a 16-bit float tensor
 * to float32.  The 16-bit raw_data the message holds is freed at once, so
 * a model stored in the .onnx file is held once, as float32. */
static int decode_widened(importer *imp, Onnx__TensorProto *t, const char *what, llmc_onnx_tensor *out)
{
    int rc = llmc_onnx_tensor_decode(t, what, &imp->state->ext, out, imp->err);
    if (rc || !llmc_dtype_is_float16(out->dtype))
        return rc;
    int kind = half_kind(out->dtype);
    bool in_message = !out->data.owned && t->has_raw_data && out->data.nbytes &&
                      out->data.data == (const void *)t->raw_data.data;
    rc = llmc_onnx_tensor_widen(out, what, imp->err);
    if (rc) {
        if (out->data.owned)
            free((void *)out->data.data);
        out->data = (llmc_const){.data = NULL};
        return rc;
    }
    if (in_message) {
        free(t->raw_data.data);         /* protobuf-c allocates each bytes field with malloc */
        t->raw_data.data = NULL;
        t->raw_data.len = 0;
    }
    imp->report.consts[kind]++;
    imp->report.const_bytes += out->data.nbytes;
    return LLMC_OK;
}

/* ---- initializers ---- */

static int import_initializers(importer *imp)
{
    if (imp->gp->n_sparse_initializer)
        return llmc_fail(imp->err, LLMC_E_UNSUPPORTED, "'%s' has sparse initializers, which llmc does not support",
                         imp->path);
    for (size_t i = 0; i < imp->gp->n_initializer; i++) {
        Onnx__TensorProto *t = imp->gp->initializer[i];
        if (!t->name || !*t->name)
            return llmc_fail(imp->err, LLMC_E_INPUT, "initializer #%zu has no name", i);
        char what[512];
        snprintf(what, sizeof what, "initializer " LLMC_NAME_FMT, t->name);
        llmc_onnx_tensor tensor;
        int rc = decode_widened(imp, t, what, &tensor);
        if (!rc)
            rc = define_const(imp, t->name, ORIGIN_INITIALIZER, &tensor);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* ---- graph inputs and their dims ---- */

/* Old exports (IR < 4) also list initializers as graph inputs; those are
 * constants, not inputs. */
static bool is_initializer(const importer *imp, const char *name)
{
    const name_slot *s = name_slot_for(imp, name);
    return s->name && s->origin == ORIGIN_INITIALIZER;
}

static int collect_inputs(importer *imp)
{
    imp->inputs = malloc(sizeof *imp->inputs * (imp->gp->n_input + 1));
    if (!imp->inputs)
        return out_of_memory(imp);
    for (size_t i = 0; i < imp->gp->n_input; i++)
        if (!is_initializer(imp, imp->gp->input[i]->name))
            imp->inputs[imp->n_inputs++] = imp->gp->input[i];
    return LLMC_OK;
}

static int bind_dims(importer *imp)
{
    return llmc_dim_table_build(&imp->dims, imp->opt, imp->gp, imp->inputs, imp->n_inputs, imp->err);
}

static int import_input(importer *imp, const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto__Tensor *tt = llmc_onnx_tensor_type(vi);
    if (!tt)
        return llmc_fail(imp->err, LLMC_E_UNSUPPORTED, "input " LLMC_NAME_FMT " is not a tensor", vi->name);
    if (!llmc_dtype_size(tt->elem_type))
        return llmc_fail(imp->err, LLMC_E_UNSUPPORTED,
                         "input " LLMC_NAME_FMT " has data type %s (%d), which llmc does not support",
                         vi->name, llmc_dtype_name(tt->elem_type), tt->elem_type);
    llmc_shape shape;
    int id, rc = llmc_input_shape(&imp->dims, vi, &shape, imp->err);
    if (!rc)
        rc = define_value(imp, vi->name, widened_type(tt->elem_type, imp->report.inputs), ORIGIN_INPUT, &id);
    if (rc)
        return rc;
    imp->g->values[id].is_graph_input = true;
    imp->g->values[id].shape = shape;
    imp->g->inputs[imp->g->n_inputs++] = id;
    return LLMC_OK;
}

static int import_inputs(importer *imp)
{
    imp->g->inputs = malloc(sizeof(int) * (imp->n_inputs + 1));
    if (!imp->g->inputs)
        return out_of_memory(imp);
    for (size_t i = 0; i < imp->n_inputs; i++) {
        int rc = import_input(imp, imp->inputs[i]);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* ---- Constant nodes ---- */

/* A constant of `count` elements copied from `src`: a scalar (rank 0) or a
 * vector (rank 1). */
static int small_constant(importer *imp, int dtype, const void *src, size_t count, int rank,
                          llmc_onnx_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = rank;
    t->dims[0] = (int64_t)count;
    t->data.nbytes = count * llmc_dtype_size(dtype);
    if (!count)
        return LLMC_OK;
    void *buf = malloc(t->data.nbytes);
    if (!buf)
        return out_of_memory(imp);
    memcpy(buf, src, t->data.nbytes);
    t->data.data = buf;
    t->data.owned = true;
    return LLMC_OK;
}

static int constant_tensor(importer *imp, size_t idx, llmc_onnx_tensor *t)
{
    const Onnx__NodeProto *n = imp->gp->node[idx];
    char node[512], what[1024];
    describe_node(imp, idx, node, sizeof node);
    if (n->n_output != 1 || !*n->output[0] || n->n_attribute != 1)
        return llmc_fail(imp->err, LLMC_E_INPUT, "%s must have one output and one value attribute", node);
    const Onnx__AttributeProto *a = n->attribute[0];
    snprintf(what, sizeof what, "%s attribute " LLMC_NAME_FMT, node, a->name);
    if (strcmp(a->name, "value") == 0 && a->t)
        return decode_widened(imp, a->t, what, t);
    if (strcmp(a->name, "value_float") == 0)
        return small_constant(imp, LLMC_DT_FLOAT, &a->f, 1, 0, t);
    if (strcmp(a->name, "value_floats") == 0)
        return small_constant(imp, LLMC_DT_FLOAT, a->floats, a->n_floats, 1, t);
    if (strcmp(a->name, "value_int") == 0)
        return small_constant(imp, LLMC_DT_INT64, &a->i, 1, 0, t);
    if (strcmp(a->name, "value_ints") == 0)
        return small_constant(imp, LLMC_DT_INT64, a->ints, a->n_ints, 1, t);
    return llmc_fail(imp->err, LLMC_E_UNSUPPORTED,
                     "%s is not supported (only value, value_float(s) and value_int(s))", what);
}

/* ---- nodes ---- */

static bool is_constant_node(const Onnx__NodeProto *n)
{
    return strcmp(n->op_type, "Constant") == 0;
}

/* First pass over the nodes: every output gets its value (Constant nodes
 * become constants), so inputs can be resolved whatever the node order. */
static int define_node_outputs(importer *imp)
{
    for (size_t i = 0; i < imp->gp->n_node; i++) {
        const Onnx__NodeProto *n = imp->gp->node[i];
        int rc = LLMC_OK, id;
        if (is_constant_node(n)) {
            llmc_onnx_tensor t;
            rc = constant_tensor(imp, i, &t);
            if (!rc)
                rc = define_const(imp, n->output[0], (int)i, &t);
        }
        for (size_t k = 0; !rc && !is_constant_node(n) && k < n->n_output; k++)
            if (*n->output[k])
                rc = define_value(imp, n->output[k], LLMC_DT_UNDEFINED, (int)i, &id);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* Value ids of a node's input or output names; "" (an omitted optional)
 * is -1. */
static int resolve_names(importer *imp, size_t idx, const char *kind, char **names, size_t n, int *ids)
{
    for (size_t k = 0; k < n; k++) {
        ids[k] = *names[k] ? lookup_value(imp, names[k]) : -1;
        if (ids[k] < 0 && *names[k]) {
            char node[512];
            return llmc_fail(imp->err, LLMC_E_INPUT,
                             "%s %s %zu " LLMC_NAME_FMT " is not defined by any node, input or initializer",
                             describe_node(imp, idx, node, sizeof node), kind, k, names[k]);
        }
    }
    return LLMC_OK;
}

static int node_attr_value(importer *imp, size_t idx, const Onnx__AttributeProto *a, llmc_attr *at,
                           llmc_onnx_tensor *tensor)
{
    char node[512], what[1024];
    describe_node(imp, idx, node, sizeof node);
    snprintf(what, sizeof what, "%s attribute " LLMC_NAME_FMT, node, a->name);
    switch (a->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: at->f = a->f; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: at->i = a->i; break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        at->s = a->s.len ? strndup((const char *)a->s.data, a->s.len) : strdup("");
        if (!at->s)
            return out_of_memory(imp);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        at->n_floats = (int)a->n_floats;
        at->floats = a->floats;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        at->n_ints = (int)a->n_ints;
        at->ints = a->ints;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        break;                          /* llmc_attr has no list of strings; no supported op reads one */
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
        if (!a->t)
            return llmc_fail(imp->err, LLMC_E_INPUT, "%s has no tensor", what);
        int rc = decode_widened(imp, a->t, what, tensor);
        if (rc)
            return rc;
        at->t_dtype = tensor->dtype;
        at->t_rank = tensor->rank;
        memcpy(at->t_dims, tensor->dims, sizeof at->t_dims);
        at->t_data = tensor->data;
        break;
    }
    default:
        return llmc_fail(imp->err, LLMC_E_UNSUPPORTED, "%s has attribute type %d, which llmc does not support",
                         what, (int)a->type);
    }
    return LLMC_OK;
}

/* Cast(to = float16 / bfloat16) computes in float32: to = float. */
static bool is_cast_to(const importer *imp, size_t idx, const Onnx__AttributeProto *a)
{
    return strcmp(imp->gp->node[idx]->op_type, "Cast") == 0 && strcmp(a->name, "to") == 0 &&
           a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
}

static int import_attr(importer *imp, int node_id, size_t idx, const Onnx__AttributeProto *a)
{
    llmc_attr at;
    llmc_onnx_tensor tensor;
    memset(&at, 0, sizeof at);
    memset(&tensor, 0, sizeof tensor);
    at.name = a->name;
    at.type = (int)a->type;
    int rc = node_attr_value(imp, idx, a, &at, &tensor);
    if (!rc && is_cast_to(imp, idx, a) && at.i >= INT32_MIN && at.i <= INT32_MAX)
        at.i = widened_type((int)at.i, imp->report.casts);
    if (!rc && llmc_node_add_attr(imp->g, node_id, &at) != 0)     /* deep copy */
        rc = out_of_memory(imp);
    free(at.s);
    if (tensor.data.owned)
        free((void *)tensor.data.data);
    return rc;
}

static int add_node(importer *imp, size_t idx, const int *ins, const int *outs)
{
    const Onnx__NodeProto *n = imp->gp->node[idx];
    int id = llmc_graph_add_node(imp->g, n->op_type, n->name, ins, (int)n->n_input, outs, (int)n->n_output);
    if (id < 0)
        return out_of_memory(imp);
    /* Other domains than the default one are contrib ops, expanded later
     * (expand_contrib). */
    if (!is_default_domain(n->domain)) {
        char *domain = strdup(n->domain);
        if (!domain)
            return out_of_memory(imp);
        free(imp->g->nodes[id].domain);
        imp->g->nodes[id].domain = domain;
    }
    imp->g->nodes[id].opset = (int)domain_opset(imp, n->domain);
    for (size_t k = 0; k < n->n_attribute; k++) {
        int rc = import_attr(imp, id, idx, n->attribute[k]);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

static int import_node(importer *imp, size_t idx)
{
    const Onnx__NodeProto *n = imp->gp->node[idx];
    int *ids = malloc(sizeof(int) * (n->n_input + n->n_output + 1));
    if (!ids)
        return out_of_memory(imp);
    int *outs = ids + n->n_input;
    int rc = resolve_names(imp, idx, "input", n->input, n->n_input, ids);
    if (!rc)
        rc = resolve_names(imp, idx, "output", n->output, n->n_output, outs);
    if (!rc)
        rc = add_node(imp, idx, ids, outs);
    free(ids);
    return rc;
}

static int import_nodes(importer *imp)
{
    for (size_t i = 0; i < imp->gp->n_node; i++) {
        int rc = is_constant_node(imp->gp->node[i]) ? LLMC_OK : import_node(imp, i);
        if (rc)
            return rc;
    }
    return LLMC_OK;
}

/* ---- graph outputs and the final check ---- */

static int import_outputs(importer *imp)
{
    imp->g->outputs = malloc(sizeof(int) * (imp->gp->n_output + 1));
    if (!imp->g->outputs)
        return out_of_memory(imp);
    for (size_t i = 0; i < imp->gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = imp->gp->output[i];
        int id = lookup_value(imp, vi->name);
        if (id < 0)
            return llmc_fail(imp->err, LLMC_E_INPUT,
                             "graph output " LLMC_NAME_FMT " is not defined by any node, input or initializer",
                             vi->name);
        llmc_shape shape;
        int rc = llmc_output_shape(&imp->dims, vi, &shape, imp->err);
        if (rc)
            return rc;
        llmc_value *v = &imp->g->values[id];
        const Onnx__TypeProto__Tensor *tt = llmc_onnx_tensor_type(vi);
        int elem = tt ? widened_type(tt->elem_type, imp->report.outputs) : LLMC_DT_UNDEFINED;
        if (v->dtype == LLMC_DT_UNDEFINED)
            v->dtype = elem;
        if (v->shape.rank < 0)
            v->shape = shape;
        if (!v->is_const && !v->is_graph_input) {
            v->declared = shape;
            v->declared_dtype = elem;
        }
        v->is_graph_output = true;
        imp->g->outputs[imp->g->n_outputs++] = id;
    }
    return LLMC_OK;
}

/* value_info: element types and, where every dim is a number or a bound
 * dim_param, the shape the exporter claims; shape inference checks it. */
static int import_value_info(importer *imp)
{
    for (size_t i = 0; i < imp->gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = imp->gp->value_info[i];
        int id = vi->name ? lookup_value(imp, vi->name) : -1;
        const Onnx__TypeProto__Tensor *tt = llmc_onnx_tensor_type(vi);
        if (id < 0 || !tt)
            continue;   /* describes nothing this graph computes, or not a tensor */
        llmc_value *v = &imp->g->values[id];
        if (v->is_const || v->is_graph_input)
            continue;
        int rc = llmc_output_shape(&imp->dims, vi, &v->declared, imp->err);
        if (rc)
            return rc;
        int elem = widened_type(tt->elem_type, imp->report.value_infos);
        if (v->dtype == LLMC_DT_UNDEFINED)
            v->dtype = elem;
        v->declared_dtype = elem;
    }
    return LLMC_OK;
}

/* ONNX Runtime's contrib ops become default-domain nodes (contrib_ops.h). */
static int expand_contrib(importer *imp)
{
    return llmc_expand_contrib(imp->g, imp->path, imp->err);
}

static int check_acyclic(importer *imp)
{
    llmc_graph *g = imp->g;
    int *order = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    int cycle_node = -1;
    if (!order)
        return out_of_memory(imp);
    int n = llmc_graph_topo_order(g, order, &cycle_node);
    free(order);
    if (n >= 0)
        return LLMC_OK;
    if (cycle_node < 0)
        return out_of_memory(imp);
    return llmc_fail(imp->err, LLMC_E_INPUT, "the graph has a cycle through node " LLMC_NAME_FMT " (%s)",
                     g->nodes[cycle_node].name, g->nodes[cycle_node].op_type);
}

static int import_model(importer *imp)
{
    static int (*const steps[])(importer *) = {
        start_import, inline_ifs, check_required_names, check_opset, refuse_subgraphs, refuse_unsupported_ops,
        check_arity,
        names_init, import_initializers, collect_inputs, bind_dims, import_inputs,
        define_node_outputs, import_nodes, import_outputs, import_value_info, expand_contrib, check_acyclic,
    };
    llmc_graph_init(imp->g);
    int rc = LLMC_OK;
    for (size_t i = 0; !rc && i < sizeof steps / sizeof *steps; i++)
        rc = steps[i](imp);
    free(imp->slots);
    free(imp->inputs);
    llmc_dim_table_free(&imp->dims);
    if (rc)
        llmc_graph_free(imp->g);
    if (imp->opt && imp->opt->report)
        *imp->opt->report = imp->report;
    return rc;
}

/* Appends printf output to buf (kept NUL-terminated, cut when full). */
static void append(char *buf, size_t size, size_t *used, const char *fmt, ...)
{
    if (*used >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, size - *used, fmt, ap);
    va_end(ap);
    *used = n < 0 ? size : *used + (size_t)n;
}

/* "a float16 and b bfloat16" / "a float16" / "b bfloat16" */
static const char *kinds(char *buf, size_t size, const uint32_t *n)
{
    if (n[0] && n[1])
        snprintf(buf, size, "%u float16 and %u bfloat16", n[0], n[1]);
    else
        snprintf(buf, size, "%u %s", n[0] + n[1], n[1] ? "bfloat16" : "float16");
    return buf;
}

void llmc_import_report_line(const llmc_import_report *r, char *buf, size_t size)
{
    uint32_t tensors[2];
    for (int k = 0; k < 2; k++)
        tensors[k] = r->consts[k] + r->inputs[k] + r->outputs[k] + r->value_infos[k];
    if (!size)
        return;
    buf[0] = 0;
    if (!tensors[0] && !tensors[1] && !r->casts[0] && !r->casts[1])
        return;
    const struct { const uint32_t *n; const char *what; } parts[] = {
        {r->consts, "constants"}, {r->inputs, "graph inputs"}, {r->outputs, "graph outputs"},
        {r->value_infos, "value_info entries"},
    };
    char k[64];
    size_t used = 0;
    append(buf, size, &used, "import: %s tensors widened to float32 (", kinds(k, sizeof k, tensors));
    const char *sep = "";
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        if (!parts[i].n[0] && !parts[i].n[1])
            continue;
        append(buf, size, &used, "%s%u %s", sep, parts[i].n[0] + parts[i].n[1], parts[i].what);
        if (parts[i].n == r->consts)
            append(buf, size, &used, ", %.1f KiB as float32", (double)r->const_bytes / 1024.0);
        sep = "; ";
    }
    append(buf, size, &used, ")");
    if (r->casts[0] || r->casts[1])
        append(buf, size, &used, ", %u Casts to %s now cast to float32",
               r->casts[0] + r->casts[1], r->casts[0] && r->casts[1] ? "float16 or bfloat16"
                                                                    : r->casts[1] ? "bfloat16" : "float16");
    append(buf, size, &used, ": llmc computes in float32 and feeds and returns float32");
}

int llmc_import_onnx(const char *path, const llmc_import_options *opt, llmc_graph *g, llmc_error *err)
{
    importer imp = {.path = path, .opt = opt, .g = g, .err = err};
    return import_model(&imp);
}

int llmc_import_onnx_memory(const void *bytes, size_t size, const char *path,
                            const llmc_import_options *opt, llmc_graph *g, llmc_error *err)
{
    /* A non-NULL pointer even for size 0, so load_model does not map `path`. */
    static const uint8_t empty[1];
    importer imp = {.path = path, .bytes = bytes ? bytes : empty, .size = size, .opt = opt, .g = g,
                    .err = err};
    return import_model(&imp);
}
