/* The types and shapes a model declares (value_info, graph outputs)
 * against the ones shape inference computed. */
#include "shape_declared.h"

#include "symbolic.h"

int llmc_check_declared(const llmc_graph *g, llmc_error *err)
{
    for (int i = 0; i < g->n_values; i++) {
        const llmc_value *v = &g->values[i];
        if (v->producer < 0 && !v->is_graph_output)
            continue;
        if (v->declared_dtype != LLMC_DT_UNDEFINED && v->dtype != LLMC_DT_UNDEFINED &&
            v->declared_dtype != v->dtype)
            return llmc_fail(err, LLMC_E_INPUT,
                             "value '%s': the model declares element type %s but its producer gives %s",
                             v->name, llmc_dtype_name(v->declared_dtype), llmc_dtype_name(v->dtype));
        if (v->declared.rank < 0 || v->shape.rank < 0)
            continue;
        bool same = v->declared.rank == v->shape.rank;
        for (int d = 0; same && d < v->shape.rank; d++)
            same = llmc_aff_eq(v->declared.dims[d], v->shape.dims[d]);
        if (!same) {
            char want[512], got[512];
            llmc_shape_format(&v->declared, want, sizeof want);
            llmc_shape_format(&v->shape, got, sizeof got);
            return llmc_fail(err, LLMC_E_INPUT, "value '%s': the model declares shape %s but its producer gives %s",
                             v->name, want, got);
        }
    }
    return LLMC_OK;
}
