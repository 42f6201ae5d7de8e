/* CPU feature checks of the NEON targets, without libc (no getauxval).
 *
 * The AArch64 ID registers are EL1 registers, but since Linux 4.11
 * (HWCAP_CPUID) an EL0 `mrs` of one traps into the kernel, which emulates
 * it with the sanitized value it shows user space: the features every CPU
 * of the system has.  qemu-user emulates the same reads (checked by
 * tests/t_neon.sh under -cpu max, cortex-a76 and cortex-a53).  An older
 * kernel raises SIGILL instead. */
#include "q_neon.h"

/* A feature field: 4 bits, 0 = absent, 1 or more = present (the ID
 * scheme's unsigned fields only grow). */
static bool field_set(uint64_t reg, int shift)
{
    return ((reg >> shift) & 15u) != 0;
}

static uint64_t id_aa64isar0(void)
{
    uint64_t v;
    __asm__("mrs %0, ID_AA64ISAR0_EL1" : "=r"(v));
    return v;
}

static uint64_t id_aa64isar1(void)
{
    uint64_t v;
    __asm__("mrs %0, ID_AA64ISAR1_EL1" : "=r"(v));
    return v;
}

/* ID_AA64ISAR0_EL1.DP, bits [47:44]: SDOT/UDOT. */
bool rt_cpu_arm_dotprod_ok(void)
{
    return field_set(id_aa64isar0(), 44);
}

/* ID_AA64ISAR1_EL1.I8MM, bits [55:52]: SMMLA/UMMLA/USMMLA (and USDOT). */
bool rt_cpu_arm_i8mm_ok(void)
{
    return field_set(id_aa64isar1(), 52);
}
