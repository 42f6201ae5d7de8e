/* The compiler's version: what `llmc --version` prints and what a plan and
 * an exported NPU model record as their producer. */
#ifndef LLMC_VERSION_H
#define LLMC_VERSION_H

#define LLMC_VERSION "0.1.0"

#endif
