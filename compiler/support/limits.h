/* Bounds that every llmc command shares. */
#ifndef LLMC_LIMITS_H
#define LLMC_LIMITS_H

/* The most threads a command runs (--threads N: 1..LLMC_MAX_THREADS); the
 * roofline sizes its task table by it. */
#define LLMC_MAX_THREADS 256

#endif
