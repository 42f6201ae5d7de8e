/* A small FlatBuffers builder, written from the binary format.
 *
 * Like the reference builders it fills the buffer back to front: children
 * are created before the tables that point at them, so every uoffset points
 * forward (to a higher address), as the format requires.  An object is
 * named by its distance from the end of the buffer (fb_ref), which stays
 * valid while the buffer grows.
 *
 * Usage: create strings and vectors, then fb_table_begin, add fields
 * (scalars equal to their schema default may simply be left out),
 * fb_table_end; finally fb_finish with the root table.  Errors (out of
 * memory, a table larger than 64 KiB, a buffer larger than 2 GiB, misuse)
 * are sticky: fb_finish reports them. */
#ifndef LLMC_FB_BUILDER_H
#define LLMC_FB_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FB_MAX_FIELDS 32

typedef uint32_t fb_ref;

typedef struct {
    uint8_t *buf;            /* the data is buf[cap - used, cap) */
    size_t cap, used;
    size_t max_align;
    bool failed;
    /* the table being built */
    bool in_table;
    size_t table_begin;
    int n_fields;
    uint32_t field_pos[FB_MAX_FIELDS];   /* fb_ref of each field, 0 = absent */
    /* vtables written so far, shared between tables with the same layout:
     * an open-addressing set of fb_refs keyed by the vtable's bytes */
    fb_ref *vtables;
    size_t vt_cap, vt_count;
} fb_builder;

void fb_init(fb_builder *b);
void fb_free(fb_builder *b);

fb_ref fb_string(fb_builder *b, const char *s);

/* A vector of scalars or structs: fb_vector_begin, then push the elements'
 * bytes from the LAST element to the first (fb_push_le per scalar, struct
 * fields also in reverse), then fb_vector_end. */
void fb_vector_begin(fb_builder *b, size_t count, size_t elem_size, size_t align);
void fb_push_le(fb_builder *b, uint64_t value, size_t size);
fb_ref fb_vector_end(fb_builder *b, size_t count);
/* A vector of tables or strings. */
fb_ref fb_vector_refs(fb_builder *b, const fb_ref *refs, size_t count);

void fb_table_begin(fb_builder *b);
/* `field` is the declaration index in the schema; `bits` the value's
 * little-endian bit pattern in `size` bytes (floats via memcpy). */
void fb_field_scalar(fb_builder *b, int field, uint64_t bits, size_t size);
void fb_field_ref(fb_builder *b, int field, fb_ref ref);
fb_ref fb_table_end(fb_builder *b);

/* Writes the root offset and the 4-byte file identifier; *data points into
 * the builder (valid until fb_free).  Returns 0, or -1 after any error. */
int fb_finish(fb_builder *b, fb_ref root, const char identifier[4],
              const uint8_t **data, size_t *size);

#endif
