/* IR rewriting API and the canonical dump / digest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_util.h"
#include "ir/ir.h"
#include "ir/ir_dump.h"
#include "support/layer_name.h"
#include "tap.h"

static char *dump_text(const llmc_graph *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    llmc_ir_dump(g, f);
    fclose(f);
    return text;
}

static void test_affine_format(void)
{
    char b[64];
    struct { llmc_affine a; const char *want; } cases[] = {
        {K(64), "64"}, {SYM_S, "S"}, {AFF(0, 1, 1), "P+S"}, {AFF(1, 2, 0), "2*S+1"},
        {AFF(-1, 1, 0), "S-1"}, {AFF(0, 0, -1), "-P"}, {K(0), "0"}, {AFF(5, -3, 2), "2*P-3*S+5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llmc_ir_format_affine(cases[i].a, b, sizeof b);
        CHECK(strcmp(b, cases[i].want) == 0, "affine formats as %s (got %s)", cases[i].want, b);
    }
}

static void test_api(void)
{
    llmc_graph g;
    llmc_graph_init(&g);
    g.opset = 17;
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S));
    int a = OP(&g, "Relu", "a", x);
    int b = OP(&g, "Neg", "b", a);
    int c = OP(&g, "Add", "c", a, b);
    g_output(&g, c);
    CHECK(llmc_graph_find_value(&g, "b") == b && llmc_graph_find_value(&g, "nope") == -1, "find_value");
    CHECK(llmc_graph_use_count(&g, a) == 2 && llmc_graph_use_count(&g, c) == 1, "use counts");
    int order[8], cycle = -1;
    int n = llmc_graph_topo_order(&g, order, &cycle);
    CHECK(n == 3 && order[0] == producer_of(&g, a) && order[2] == producer_of(&g, c), "topo order");

    /* Bypass Neg: Add reads a twice, Neg still reads it once, b is unused. */
    llmc_graph_replace_value(&g, b, a);
    CHECK(llmc_graph_use_count(&g, b) == 0 && llmc_graph_use_count(&g, a) == 3, "replace_value");
    llmc_graph_erase_node(&g, producer_of(&g, b));
    CHECK(llmc_graph_live_nodes(&g) == 2 && g.values[b].producer == -1, "erase_node");

    float one = 1.0f;
    llmc_shape s = SCALAR;
    llmc_graph_set_const(&g, a, LLMC_DT_FLOAT, &s, &one, sizeof one);
    CHECK(g.values[a].is_const && g.values[a].producer == -1 && g.values[a].konst.nbytes == 4,
          "set_const detaches the producer");
    llmc_graph_free(&g);
}

static void test_cycle(void)
{
    llmc_graph g;
    llmc_graph_init(&g);
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(2)));
    int a = llmc_graph_add_value(&g, "a", 0), b = llmc_graph_add_value(&g, "b", 0);
    llmc_graph_add_node(&g, "Add", "n0", (int[]){x, b}, 2, &a, 1);
    llmc_graph_add_node(&g, "Relu", "n1", &a, 1, &b, 1);
    int order[4], cycle = -1;
    CHECK(llmc_graph_topo_order(&g, order, &cycle) == -1 && cycle >= 0, "a cycle is reported");
    FILE *null = fopen("/dev/null", "w");
    CHECK(llmc_ir_dump(&g, null) == -1, "dump refuses a cycle");
    fclose(null);
    llmc_graph_free(&g);
}

/* x -> Relu -> {Neg, Sigmoid} -> Add, built with nodes in the given order. */
static void build_diamond(llmc_graph *g, const int *node_order)
{
    llmc_graph_init(g);
    g->opset = 17;
    int x = g_input(g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S, K(4)));
    float w[4] = {1, 2, 3, 4};
    int wc = g_const(g, "w", LLMC_DT_FLOAT, SHAPE(K(4)), w);
    int r = llmc_graph_add_value(g, "r", LLMC_DT_FLOAT);
    int n1 = llmc_graph_add_value(g, "n", LLMC_DT_FLOAT);
    int s1 = llmc_graph_add_value(g, "s", LLMC_DT_FLOAT);
    int y = llmc_graph_add_value(g, "y", LLMC_DT_FLOAT);
    for (int i = 0; i < 4; i++) {
        int id = -1;
        switch (node_order[i]) {
        case 0: id = llmc_graph_add_node(g, "Relu", "relu", &x, 1, &r, 1); break;
        case 1: id = llmc_graph_add_node(g, "Neg", "neg", &r, 1, &n1, 1); break;
        case 2: id = llmc_graph_add_node(g, "Sigmoid", "sig", &r, 1, &s1, 1); break;
        case 3:
            id = llmc_graph_add_node(g, "Add", "add", (int[]){n1, s1}, 2, &y, 1);
            attr_float(g, id, "zeta", 0.1f);
            attr_int(g, id, "alpha", 3);
            break;
        }
        (void)id;
    }
    int m = llmc_graph_add_value(g, "m", LLMC_DT_FLOAT);
    llmc_graph_add_node(g, "Mul", "mul", (int[]){y, wc}, 2, &m, 1);
    g_output(g, m);
}

static void test_dump(void)
{
    llmc_graph g1, g2;
    build_diamond(&g1, (int[]){0, 1, 2, 3});
    build_diamond(&g2, (int[]){3, 2, 1, 0});
    g1.values[llmc_graph_find_value(&g1, "r")].shape = SHAPE(K(1), SYM_S, K(4));
    g2.values[llmc_graph_find_value(&g2, "r")].shape = SHAPE(K(1), SYM_S, K(4));
    char *t1 = dump_text(&g1), *t1b = dump_text(&g1), *t2 = dump_text(&g2);
    CHECK(strcmp(t1, t1b) == 0, "dumping twice gives the same text");
    CHECK(strcmp(t1, t2) == 0, "another node-array order gives the same text");
    CHECK(llmc_ir_digest(&g1) == llmc_ir_digest(&g2) && llmc_ir_digest(&g1) != 0,
          "and the same digest");
    const char *want =
        "opset  17\n"
        "input  x float [1,S,4]\n"
        "const  w float [4] bytes=16 xxh64=";
    CHECK(strncmp(t1, want, strlen(want)) == 0, "header, inputs and constants come first");
    CHECK(strstr(t1, "node   Relu \"relu\" (x) -> (r)\n  out  r float [1,S,4]\n") != NULL,
          "node line and output type");
    CHECK(strstr(t1, "node   Neg \"neg\" (r) -> (n)\n  out  n float ?\nnode   Sigmoid \"sig\" (r) -> (s)\n") != NULL,
          "ties are broken by output name");
    CHECK(strstr(t1, "  attrs: alpha=3 zeta=0.100000001\n") != NULL, "attributes sorted, floats %%.9g");
    CHECK(strstr(t1, "output m float ?\n") != NULL, "graph outputs last");

    uint64_t before = llmc_ir_digest(&g1);
    g1.values[llmc_graph_find_value(&g1, "r")].shape.dims[1] = AFF(0, 1, 1);
    CHECK(llmc_ir_digest(&g1) != before, "a shape change changes the digest");
    int dead_v = llmc_graph_add_value(&g1, "unused", LLMC_DT_FLOAT);
    int dead_n = llmc_graph_add_node(&g1, "Relu", "dead", &dead_v, 1, &dead_v, 1);
    llmc_graph_erase_node(&g1, dead_n);
    uint64_t with_dead = llmc_ir_digest(&g1);
    g1.values[llmc_graph_find_value(&g1, "r")].shape.dims[1] = SYM_S;
    CHECK(llmc_ir_digest(&g1) == before && with_dead != before, "dead nodes are not dumped");
    free(t1);
    free(t1b);
    free(t2);
    llmc_graph_free(&g1);
    llmc_graph_free(&g2);
}

static void test_sym_in_dump(void)
{
    llmc_graph g;
    llmc_graph_init(&g);
    g.opset = 17;
    int x = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(1), SYM_S));
    int s = OP(&g, "Shape", "s", x);
    g.values[s].dtype = LLMC_DT_INT64;
    g.values[s].shape = SHAPE(K(2));
    g.values[s].n_sym = 2;
    g.values[s].sym[0] = K(1);
    g.values[s].sym[1] = AFF(0, 1, 1);
    g_output(&g, s);
    char *t = dump_text(&g);
    CHECK(strstr(t, "  out  s int64 [2] sym=[1,P+S]\n") != NULL, "symbolic contents are dumped");
    free(t);
    llmc_graph_free(&g);
}

static void test_long_chain(void)
{
    enum { N = 100000 };
    llmc_graph g;
    llmc_graph_init(&g);
    int v = g_input(&g, "x", LLMC_DT_FLOAT, SHAPE(K(4)));
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "v%d", i);
        v = OP(&g, "Relu", name, v);
    }
    g_output(&g, v);
    FILE *null = fopen("/dev/null", "w");
    CHECK(llmc_ir_dump(&g, null) == 0, "a %d-node chain dumps without recursion", N);
    fclose(null);
    llmc_graph_free(&g);
}

/* Op names -> decoder layer, and the per-layer tally compile/inspect print. */
static void test_layer_names(void)
{
    CHECK(llmc_layer_of_name("/model/layers.3/mlp/down_proj/MatMul") == 3, "/model/layers.3/... is layer 3");
    CHECK(llmc_layer_of_name("/h.11/attn/Softmax/Attention") == 11, "/h.11/... is layer 11");
    CHECK(llmc_layer_of_name("/embed_tokens/Gather") == -1 && llmc_layer_of_name("/MatMul") == -1 &&
              llmc_layer_of_name("layers.2") == -1 && llmc_layer_of_name("/x.y/z") == -1 &&
              llmc_layer_of_name("/.4/z") == -1 && llmc_layer_of_name("/layers.99999/a") == -1,
          "names without a /word.N component (or N beyond the tally) name no layer");
    llmc_layer_tally t = {{0}, 0};
    const char *ops[] = {"/wte/Gather", "/h.0/a", "/h.0/b", "/h.1/a", "/h.1/b", "/h.1/c", "/ln_f/x"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        llmc_layer_tally_add(&t, ops[i]);
    uint32_t lo, hi;
    llmc_layer_tally_range(&t, &lo, &hi);
    CHECK(t.n_layers == 2 && lo == 2 && hi == 3, "tally: 2 layers, 2..3 ops (got %lld, %u..%u)",
          (long long)t.n_layers, lo, hi);
}

int main(void)
{
    test_layer_names();
    test_affine_format();
    test_api();
    test_cycle();
    test_dump();
    test_sym_in_dump();
    test_long_chain();
    return TAP_DONE();
}
