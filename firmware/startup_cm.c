/* Reset and fault handling of the firmware demo on QEMU's Cortex-M boards:
 * a vector table, a reset handler that sets up C (copies .data from flash,
 * zeroes .bss, paints the stack, enables the FPU) and calls main, and fault
 * handlers that report through semihosting.  The linker scripts
 * (mps2_an386.ld, mps3_an547.ld) define the symbols used here. */
#include <stdint.h>
#include <string.h>

#include "semihost.h"
#include "stack_paint.h"

extern uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_bottom[], __stack_top[];
int main(void);

/* CPACR: full access to the FPU's coprocessors CP10 and CP11 (bits 20-23);
 * an FP instruction before this faults. */
#define CPACR (*(volatile uint32_t *)0xE000ED88u)

static void enable_fpu(void)
{
    CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
}

void reset_handler(void) __attribute__((noreturn));
void reset_handler(void)
{
    memcpy(__data_start, __data_load, (size_t)((char *)__data_end - (char *)__data_start));
    memset(__bss_start, 0, (size_t)((char *)__bss_end - (char *)__bss_start));
    stack_paint(__stack_bottom);
    enable_fpu();
    sh_exit(main());
}

static void fault_handler(void)
{
    sh_write0("firmware: fault (HardFault, MemManage, BusFault or UsageFault)\n");
    sh_exit(1);
}

/* Initial stack pointer, then the handlers of exceptions 1..6 (reset, NMI,
 * HardFault, MemManage, BusFault, UsageFault); no interrupts are used. */
__attribute__((section(".vectors"), used)) static void (*const vectors[7])(void) = {
    (void (*)(void))__stack_top, reset_handler, fault_handler, fault_handler,
    fault_handler, fault_handler, fault_handler,
};
