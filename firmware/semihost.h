/* Arm semihosting from a bare-metal Cortex-M: the debugger (here QEMU's
 * -semihosting) services `bkpt 0xAB` with the operation in r0 and its
 * parameter in r1 (Arm's "Semihosting for AArch32 and AArch64", v2). */
#ifndef LLMC_FW_SEMIHOST_H
#define LLMC_FW_SEMIHOST_H

#include <stddef.h>
#include <stdint.h>

/* Writes a NUL-terminated string to the host's stdout. */
void sh_write0(const char *s);
/* Writes n bytes (no NUL among them) to the host's stdout. */
void sh_write(const char *s, size_t n);
/* Writes an unsigned decimal number. */
void sh_write_u(uint64_t v);
/* Ends the program: status 0 -> the host process exits 0, anything else
 * -> it exits 1.  Does not return. */
void sh_exit(int status) __attribute__((noreturn));

#endif
