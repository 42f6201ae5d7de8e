#include "contrib_ops.h"

#include <string.h>

#define CONTRIB_INFO(dom, op, min_in, max_in, min_out, max_out, expander, attrs) \
    {LLMC_CONTRIB_DOMAIN_##dom, #op, min_in, max_in, min_out, max_out, attrs},
static const llmc_contrib_op_info contrib_ops[] = {LLMC_CONTRIB_OP_LIST(CONTRIB_INFO)};
#undef CONTRIB_INFO

enum { N_CONTRIB = sizeof contrib_ops / sizeof *contrib_ops };

static const char *canonical_domain(const char *domain)
{
    return !domain || strcmp(domain, "ai.onnx") == 0 ? "" : domain;
}

const llmc_contrib_op_info *llmc_contrib_op_find(const char *domain, const char *op_type)
{
    domain = canonical_domain(domain);
    for (int i = 0; i < N_CONTRIB; i++)
        if (strcmp(contrib_ops[i].domain, domain) == 0 && strcmp(contrib_ops[i].name, op_type) == 0)
            return &contrib_ops[i];
    return NULL;
}

const llmc_contrib_op_info *llmc_contrib_op_at(int i)
{
    return i >= 0 && i < N_CONTRIB ? &contrib_ops[i] : NULL;
}
