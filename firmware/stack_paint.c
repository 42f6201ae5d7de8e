/* Stack painting (stack_paint.h). */
#include "stack_paint.h"

#define PAINT 0xC0FFEE55u
/* Words left unpainted below the caller's stack pointer: this function's
 * own frame lives there while it paints. */
#define FRAME_GUARD 32

void stack_paint(uint32_t *bottom)
{
    uint32_t *sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    for (volatile uint32_t *p = bottom; p < sp - FRAME_GUARD; p++)
        *p = PAINT;
}

size_t stack_used(const uint32_t *bottom, const uint32_t *top)
{
    const uint32_t *p = bottom;
    while (p < top && *p == PAINT)
        p++;
    return (size_t)((const char *)top - (const char *)p);
}
