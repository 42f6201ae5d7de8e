/* Reconciliation of a model's declared value types and shapes with
 * inferred ones (shape_declared.c). */
#ifndef LLMC_SHAPE_DECLARED_H
#define LLMC_SHAPE_DECLARED_H

#include "support/diag.h"
#include "ir/ir.h"

/* The exporter's value_info and output types and shapes must agree with
 * inference: a disagreement means the model is not what its file says
 * (LLMC_E_INPUT naming the value and both types or shapes). */
int llmc_check_declared(const llmc_graph *g, llmc_error *err);

#endif
