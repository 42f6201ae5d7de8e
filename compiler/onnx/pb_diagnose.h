/* Why protobuf-c refused a message: walks the wire format with the
 * message's descriptor and names the first byte offset and field path
 * (e.g. "graph.node[2].op_type") where the bytes stop making sense. */
#ifndef LLMC_PB_DIAGNOSE_H
#define LLMC_PB_DIAGNOSE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Writes the reason into buf and returns 1, or returns 0 when the wire
 * structure looks sound (protobuf-c failed for a subtler reason). */
int llmc_pb_diagnose(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size,
                     char *buf, size_t cap);

#endif
