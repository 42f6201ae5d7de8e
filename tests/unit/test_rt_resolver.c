/* The op resolver (llmc_rt.h): a session whose resolver lacks an op code,
 * a Unary kind, a Binary float32 kind, Binary's any-dtype path, a Gather or
 * a Linear kernel the plan uses is refused at init with
 * LLMC_RT_E_RESOLVER and a message naming the op and the entry; one with
 * exactly the plan's entries computes the same logits, bit for bit, as a
 * session with every op. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "llmc_rt_resolver.h"
#include "llmc_rt_internal.h"
#include "rt_testplan.h"
#include "tap.h"

enum { V = 11, D = 8, CTX = 8 };
static tp_plan tp;
static float emb_table[V][D], w_out[V][D];

/* Gather -> Unary Gelu -> Unary Tanh -> Binary Mul (by the embedding) ->
 * Linear (dense W) -> logits, and Binary Equal of the ids (bool, the
 * any-dtype path). */
static uint8_t *build_plan(size_t *size)
{
    tp_init(&tp, CTX);
    snprintf(tp.extra, sizeof tp.extra, "vocab_size: %d, n_layers: 0,", V);
    int ids = tp_tensor(&tp, "input_ids", "Int64", "1,S");
    int table = tp_weight(&tp, "embed", "Float32", "11,8", emb_table, sizeof emb_table);
    int w = tp_weight(&tp, "lm_head.weight", "Float32", "11,8", w_out, sizeof w_out);
    int emb = tp_tensor(&tp, "emb", "Float32", "1,S,8");
    int act = tp_tensor(&tp, "act", "Float32", "1,S,8");
    int act2 = tp_tensor(&tp, "act2", "Float32", "1,S,8");
    int act3 = tp_tensor(&tp, "act3", "Float32", "1,S,8");
    int same = tp_tensor(&tp, "same", "Bool", "1,S");
    int logits = tp_tensor(&tp, "logits", "Float32", "1,S,11");
    tp_op(&tp, "code: \"Gather\", name: \"embed\", inputs: [%d, %d], outputs: [%d]", table,
          ids, emb);
    tp_op(&tp, "code: \"Unary\", name: \"gelu\", kind: 16, inputs: [%d], outputs: [%d]", emb,
          act);
    tp_op(&tp, "code: \"Unary\", name: \"tanh\", kind: 7, inputs: [%d], outputs: [%d]", act,
          act2);
    tp_op(&tp, "code: \"Binary\", name: \"mul\", kind: 2, inputs: [%d, %d], outputs: [%d]", act2,
          emb, act3);
    tp_op(&tp, "code: \"Binary\", name: \"same\", kind: 7, inputs: [%d, %d], outputs: [%d]", ids,
          ids, same);
    tp_op(&tp, "code: \"Linear\", name: \"lm_head\", inputs: [%d, %d], outputs: [%d]", act3, w,
          logits);
    tp_io(&tp, 0, ids, "InputIds", 0);
    tp_io(&tp, 1, logits, "Logits", 0);
    return tp_finish(&tp, "rt_resolver", size);
}

/* Exactly the plan's entries (what `llmc inspect --resolver` lists). */
#define PLAN_OPS                                                                          \
    LLMC_RT_OP(Gather) LLMC_RT_GATHER(Dense) LLMC_RT_OP(Unary) LLMC_RT_OP(Binary) \
        LLMC_RT_OP(Linear)
#define PLAN_BINARY LLMC_RT_BINARY(Mul) LLMC_RT_BINARY_ANY_DTYPE
static LLMC_RT_RESOLVER(plan_ops, PLAN_OPS LLMC_RT_UNARY(Gelu) LLMC_RT_UNARY(Tanh) PLAN_BINARY
                                      LLMC_RT_LINEAR(Dense));
static LLMC_RT_RESOLVER(without_linear, LLMC_RT_OP(Gather) LLMC_RT_GATHER(Dense)
                                            LLMC_RT_OP(Unary) LLMC_RT_OP(Binary)
                                            LLMC_RT_UNARY(Gelu) LLMC_RT_UNARY(Tanh) PLAN_BINARY);
static LLMC_RT_RESOLVER(without_dense_gather,
                        LLMC_RT_OP(Gather) LLMC_RT_GATHER(PackedRows) LLMC_RT_OP(Unary)
                            LLMC_RT_OP(Binary) LLMC_RT_OP(Linear) LLMC_RT_UNARY(Gelu)
                                LLMC_RT_UNARY(Tanh) PLAN_BINARY LLMC_RT_LINEAR(Dense));
static LLMC_RT_RESOLVER(without_tanh, PLAN_OPS LLMC_RT_UNARY(Gelu) PLAN_BINARY
                                          LLMC_RT_LINEAR(Dense));
static LLMC_RT_RESOLVER(without_mul, PLAN_OPS LLMC_RT_UNARY(Gelu) LLMC_RT_UNARY(Tanh)
                                         LLMC_RT_BINARY(Add) LLMC_RT_BINARY_ANY_DTYPE
                                         LLMC_RT_LINEAR(Dense));
static LLMC_RT_RESOLVER(without_any_dtype, PLAN_OPS LLMC_RT_UNARY(Gelu) LLMC_RT_UNARY(Tanh)
                                               LLMC_RT_BINARY(Mul) LLMC_RT_LINEAR(Dense));
static LLMC_RT_RESOLVER(without_dense, PLAN_OPS LLMC_RT_UNARY(Gelu) LLMC_RT_UNARY(Tanh)
                                           PLAN_BINARY LLMC_RT_LINEAR(QWeightTiles));

/* uniform in [lo, hi) */
static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)rand() / ((double)RAND_MAX + 1.0));
}

static void *memory;
static size_t memory_size;

/* Init with `ops` (NULL: llmc_rt_session_init), then the logits of a
 * prompt fed at once and of one more token. */
static llmc_rt_status run(const llmc_rt_plan *plan, const llmc_rt_op_resolver *ops,
                          float logits[2][V], llmc_rt_error *err)
{
    static const int64_t prompt[] = {3, 1, 4, 1, 5};
    llmc_rt_session s;
    llmc_rt_status st =
        ops ? llmc_rt_session_init_ops(&s, plan, CTX, ops, memory, memory_size, err)
            : llmc_rt_session_init(&s, plan, memory, memory_size, err);
    if (!st)
        st = llmc_rt_session_feed(&s, prompt, 5, logits[0], err);
    if (!st)
        st = llmc_rt_session_feed(&s, &(int64_t){9}, 1, logits[1], err);
    return st;
}

static void check_refused(const llmc_rt_plan *plan, const llmc_rt_op_resolver *ops,
                          const char *want, const char *what)
{
    float logits[2][V];
    llmc_rt_error err = {0};
    llmc_rt_status st = run(plan, ops, logits, &err);
    CHECK(st == LLMC_RT_E_RESOLVER && err.code == LLMC_RT_E_RESOLVER && strstr(err.msg, want),
          "%s: refused at init: %s", what, err.msg);
}

int main(void)
{
    srand(7);
    for (int v = 0; v < V; v++)
        for (int d = 0; d < D; d++) {
            emb_table[v][d] = frand(-2.0f, 2.0f);
            w_out[v][d] = frand(-1.0f, 1.0f);
        }
    size_t size;
    uint8_t *bytes = build_plan(&size);
    llmc_rt_plan plan;
    llmc_rt_error err = {0};
    llmc_rt_status st = bytes ? llmc_rt_plan_open(&plan, bytes, size, 0, &err) : LLMC_RT_E_ARG;
    CHECK(st == LLMC_RT_OK, "the plan opens: %s", st ? err.msg : "ok");
    if (st)
        return TAP_DONE();
    memory_size = llmc_rt_session_memory(&plan);
    memory = malloc(memory_size);

    float all[2][V], only[2][V];
    st = run(&plan, NULL, all, &err);
    CHECK(st == LLMC_RT_OK, "every op (llmc_rt_session_init): prefill and decode run: %s",
          st ? err.msg : "ok");
    st = run(&plan, &llmc_rt_all_ops, only, &err);
    CHECK(st == LLMC_RT_OK && !memcmp(all, only, sizeof all),
          "llmc_rt_all_ops through llmc_rt_session_init_ops: the same logits");
    st = run(&plan, &plan_ops, only, &err);
    CHECK(st == LLMC_RT_OK && !memcmp(all, only, sizeof all),
          "only the plan's entries: bitwise the same logits as every op (%s)",
          st ? err.msg : "ok");

    check_refused(&plan, &without_linear,
                  "op 5 (Linear 'lm_head'): op Linear is not in the session's op resolver",
                  "a resolver without Linear");
    check_refused(&plan, &without_dense_gather,
                  "op 0 (Gather 'embed'): Gather kernel Dense is not in the session's op "
                  "resolver", "a resolver without Gather's Dense kernel");
    check_refused(&plan, &without_tanh,
                  "op 2 (Unary 'tanh'): Unary kind Tanh is not in the session's op resolver",
                  "a resolver without Unary kind Tanh");
    check_refused(&plan, &without_mul,
                  "op 3 (Binary 'mul'): Binary kind Mul is not in the session's op resolver",
                  "a resolver without Binary kind Mul");
    check_refused(&plan, &without_any_dtype,
                  "op 4 (Binary 'same'): LLMC_RT_BINARY_ANY_DTYPE for Binary kind Equal is not "
                  "in the session's op resolver", "a resolver without Binary's any-dtype path");
    check_refused(&plan, &without_dense,
                  "op 5 (Linear 'lm_head'): Linear kernel Dense is not in the session's op "
                  "resolver", "a resolver without Linear's Dense kernel");

    llmc_rt_plan opened;
    st = llmc_rt_plan_open_ops(&opened, bytes, size, 0, &plan_ops, &err);
    CHECK(st == LLMC_RT_OK && rt_plan_of(&opened)->n_ops == rt_plan_of(&plan)->n_ops && rt_plan_of(&opened)->n_affines == rt_plan_of(&plan)->n_affines,
          "llmc_rt_plan_open_ops with the plan's entries opens it: %s", st ? err.msg : "ok");
    st = llmc_rt_plan_open_ops(&opened, bytes, size, 0, &without_linear, &err);
    CHECK(st == LLMC_RT_E_RESOLVER &&
              strstr(err.msg, "op 5 (Linear 'lm_head'): op Linear is not in the op resolver"),
          "llmc_rt_plan_open_ops refuses an op whose checks its resolver lacks: %s", err.msg);
    st = llmc_rt_plan_open_ops(&opened, bytes, size, 0, NULL, &err);
    CHECK(st == LLMC_RT_E_ARG, "llmc_rt_plan_open_ops refuses a NULL resolver: %s", err.msg);

    bool f32_loops_match = true;
    for (int kind = 0; kind < LLMC_RT_BINARY_COUNT; kind++)
        f32_loops_match &= (llmc_rt_all_ops.binary[kind] != NULL) ==
                           k_binary_f32_loop(kind, LLMC_RT_F32, LLMC_RT_F32);
    CHECK(f32_loops_match && llmc_rt_all_ops.binary_any_dtype,
          "llmc_rt_all_ops has a float32 loop for exactly the kinds that take one");

    llmc_rt_session s;
    st = llmc_rt_session_init_ops(&s, &plan, CTX, NULL, memory, memory_size, &err);
    CHECK(st == LLMC_RT_E_ARG, "a NULL resolver is refused: %s", err.msg);
    st = llmc_rt_session_init_ops(&s, &plan, CTX, &without_tanh, memory, memory_size, &err);
    CHECK(st == LLMC_RT_E_RESOLVER && llmc_rt_session_feed(&s, &(int64_t){1}, 1, NULL, &err) == LLMC_RT_E_ARG,
          "a session refused by its resolver cannot run: %s", err.msg);
    free(memory);
    free(bytes);
    return TAP_DONE();
}
