/* Stack high-water measurement: paint the unused stack with a pattern at
 * reset, later find the lowest word that no longer holds it. */
#ifndef LLMC_FW_STACK_PAINT_H
#define LLMC_FW_STACK_PAINT_H

#include <stddef.h>
#include <stdint.h>

/* Fills [bottom, the caller's frame) with the paint pattern. */
void stack_paint(uint32_t *bottom);
/* Bytes of [bottom, top) the program has used since stack_paint. */
size_t stack_used(const uint32_t *bottom, const uint32_t *top);

#endif
