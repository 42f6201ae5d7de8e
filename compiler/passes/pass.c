/* Reporting helpers every pass shares (pass.h). */
#include <stdarg.h>

#include "pass.h"

void llmc_pass_explain(const llmc_pass_ctx *ctx, const char *pass, const llmc_graph *g, int node,
                       const char *fmt, ...)
{
    if (!ctx->explain || !ctx->log)
        return;
    const llmc_node *n = &g->nodes[node];
    va_list ap;
    va_start(ap, fmt);
    fprintf(ctx->log, "%s: node '%s' (#%d, %s) not rewritten: ", pass, n->name, node, n->op_type);
    vfprintf(ctx->log, fmt, ap);
    fputc('\n', ctx->log);
    va_end(ap);
}

void llmc_pass_detail(const llmc_pass_ctx *ctx, const char *fmt, ...)
{
    if (!ctx->detail || ctx->detail_size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->detail, ctx->detail_size, fmt, ap);
    va_end(ap);
}

const llmc_evaluator *llmc_pass_evaluator(const llmc_pass_ctx *ctx, const char *pass, llmc_error *err)
{
    if (!ctx || !ctx->evaluator) {
        llmc_fail(err, LLMC_E_INTERNAL, "%s: the pass context holds no evaluator", pass);
        return NULL;
    }
    return ctx->evaluator;
}
