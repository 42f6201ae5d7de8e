/* FlatBuffers builder (see fb_builder.h).  Layout rules it follows:
 *   - every scalar is aligned to its size, relative to the buffer start;
 *     because we fill from the end, "aligned" means the distance from the
 *     end is a multiple of the alignment and fb_finish pads the total size
 *     to the largest alignment used;
 *   - uoffset = target address - address of the uoffset itself (> 0);
 *   - a table starts with an soffset: table address - vtable address;
 *   - a vtable is uint16 [vtable bytes, table bytes, field offsets...]. */
#include "fb_builder.h"

#include <stdlib.h>
#include <string.h>

/* uoffsets are 32-bit; keep every distance positive as an int32 too. */
#define FB_MAX_SIZE ((size_t)INT32_MAX)

void fb_init(fb_builder *b)
{
    memset(b, 0, sizeof *b);
    b->max_align = 1;
}

void fb_free(fb_builder *b)
{
    free(b->buf);
    free(b->vtables);
    memset(b, 0, sizeof *b);
}

/* Makes room for n more bytes; the data moves to the end of the new block. */
static bool reserve(fb_builder *b, size_t n)
{
    if (b->failed)
        return false;
    if (b->used + n > FB_MAX_SIZE) {
        b->failed = true;
        return false;
    }
    if (b->cap - b->used >= n)
        return true;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap - b->used < n)
        cap *= 2;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        b->failed = true;
        return false;
    }
    if (b->used)
        memcpy(buf + cap - b->used, b->buf + b->cap - b->used, b->used);
    free(b->buf);
    b->buf = buf;
    b->cap = cap;
    return true;
}

static uint8_t *head(fb_builder *b)
{
    return b->buf + b->cap - b->used;
}

static void push_bytes(fb_builder *b, const void *bytes, size_t n)
{
    if (!reserve(b, n))
        return;
    b->used += n;
    if (n)
        memcpy(head(b), bytes, n);
}

static void push_zeros(fb_builder *b, size_t n)
{
    if (!n || !reserve(b, n))
        return;
    b->used += n;
    memset(head(b), 0, n);
}

static void put_le(uint8_t *dst, uint64_t value, size_t size)
{
    for (size_t i = 0; i < size; i++)
        dst[i] = (uint8_t)(value >> (8 * i));
}

void fb_push_le(fb_builder *b, uint64_t value, size_t size)
{
    if (!reserve(b, size))
        return;
    b->used += size;
    put_le(head(b), value, size);
}

/* Pads so that after `extra` more bytes the distance from the end is a
 * multiple of `align` (a power of two). */
static void prep(fb_builder *b, size_t align, size_t extra)
{
    if (align > b->max_align)
        b->max_align = align;
    push_zeros(b, (align - ((b->used + extra) & (align - 1))) & (align - 1));
}

/* The uoffset stored at the next 4 bytes pushed, pointing at `ref`. */
static void push_uoffset(fb_builder *b, fb_ref ref)
{
    prep(b, 4, 0);
    fb_push_le(b, (uint64_t)(b->used + 4 - ref), 4);
}

static bool outside_table(fb_builder *b)
{
    if (b->in_table)
        b->failed = true;   /* objects cannot nest inside a table's fields */
    return !b->failed;
}

fb_ref fb_string(fb_builder *b, const char *s)
{
    size_t len = strlen(s);
    if (!outside_table(b))
        return 0;
    prep(b, 4, len + 1);
    push_zeros(b, 1);
    push_bytes(b, s, len);
    fb_push_le(b, len, 4);
    return (fb_ref)b->used;
}

void fb_vector_begin(fb_builder *b, size_t count, size_t elem_size, size_t align)
{
    if (!outside_table(b))
        return;
    /* the uint32 count sits right before element 0, which is aligned */
    prep(b, align > 4 ? align : 4, count * elem_size);
}

fb_ref fb_vector_end(fb_builder *b, size_t count)
{
    fb_push_le(b, count, 4);
    return (fb_ref)b->used;
}

fb_ref fb_vector_refs(fb_builder *b, const fb_ref *refs, size_t count)
{
    fb_vector_begin(b, count, 4, 4);
    for (size_t i = count; i-- > 0;)
        push_uoffset(b, refs[i]);
    return fb_vector_end(b, count);
}

void fb_table_begin(fb_builder *b)
{
    if (!outside_table(b))
        return;
    b->in_table = true;
    b->table_begin = b->used;
    b->n_fields = 0;
    memset(b->field_pos, 0, sizeof b->field_pos);
}

static bool field_ok(fb_builder *b, int field)
{
    if (!b->in_table || field < 0 || field >= FB_MAX_FIELDS)
        b->failed = true;
    if (b->failed)
        return false;
    if (field + 1 > b->n_fields)
        b->n_fields = field + 1;
    return true;
}

void fb_field_scalar(fb_builder *b, int field, uint64_t bits, size_t size)
{
    if (!field_ok(b, field))
        return;
    prep(b, size, 0);
    fb_push_le(b, bits, size);
    b->field_pos[field] = (uint32_t)b->used;
}

void fb_field_ref(fb_builder *b, int field, fb_ref ref)
{
    if (!field_ok(b, field))
        return;
    push_uoffset(b, ref);
    b->field_pos[field] = (uint32_t)b->used;
}

/* FNV-1a over the vtable's uint16 entries. */
static size_t vtable_hash(const uint16_t *vt, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        h = (h ^ (vt[i] & 0xff)) * 1099511628211ull;
        h = (h ^ (vt[i] >> 8)) * 1099511628211ull;
    }
    return (size_t)h;
}

static bool vtable_equals(fb_builder *b, fb_ref ref, const uint16_t *vt, int n)
{
    const uint8_t *p = b->buf + b->cap - ref;
    for (int i = 0; i < n; i++)
        if ((uint16_t)(p[2 * i] | p[2 * i + 1] << 8) != vt[i])
            return false;
    return true;
}

static bool vtable_set_grow(fb_builder *b)
{
    size_t cap = b->vt_cap ? b->vt_cap * 2 : 64;
    fb_ref *set = calloc(cap, sizeof *set);
    if (!set)
        return false;
    for (size_t i = 0; i < b->vt_cap; i++) {
        fb_ref ref = b->vtables[i];
        if (!ref)
            continue;
        const uint8_t *p = b->buf + b->cap - ref;
        uint16_t vt[2 + FB_MAX_FIELDS];
        int n = (p[0] | p[1] << 8) / 2;
        for (int k = 0; k < n; k++)
            vt[k] = (uint16_t)(p[2 * k] | p[2 * k + 1] << 8);
        size_t slot = vtable_hash(vt, n) & (cap - 1);
        while (set[slot])
            slot = (slot + 1) & (cap - 1);
        set[slot] = ref;
    }
    free(b->vtables);
    b->vtables = set;
    b->vt_cap = cap;
    return true;
}

/* Returns the vtable with these entries, writing it if it is new. */
static fb_ref intern_vtable(fb_builder *b, const uint16_t *vt, int n)
{
    if (2 * (b->vt_count + 1) > b->vt_cap && !vtable_set_grow(b)) {
        b->failed = true;
        return 0;
    }
    size_t slot = vtable_hash(vt, n) & (b->vt_cap - 1);
    for (; b->vtables[slot]; slot = (slot + 1) & (b->vt_cap - 1))
        if (vtable_equals(b, b->vtables[slot], vt, n))
            return b->vtables[slot];
    for (int i = n; i-- > 0;)
        fb_push_le(b, vt[i], 2);
    if (b->failed)
        return 0;
    b->vtables[slot] = (fb_ref)b->used;
    b->vt_count++;
    return (fb_ref)b->used;
}

fb_ref fb_table_end(fb_builder *b)
{
    if (!b->in_table)
        b->failed = true;
    prep(b, 4, 0);
    fb_push_le(b, 0, 4);   /* soffset, patched below */
    b->in_table = false;
    if (b->failed)
        return 0;
    fb_ref table = (fb_ref)b->used;
    if (table - b->table_begin > UINT16_MAX) {
        b->failed = true;
        return 0;
    }
    uint16_t vt[2 + FB_MAX_FIELDS];
    int n = 2 + b->n_fields;
    vt[0] = (uint16_t)(2 * n);
    vt[1] = (uint16_t)(table - b->table_begin);
    for (int i = 0; i < b->n_fields; i++)
        vt[2 + i] = b->field_pos[i] ? (uint16_t)(table - b->field_pos[i]) : 0;
    fb_ref vtable = intern_vtable(b, vt, n);
    if (b->failed)
        return 0;
    /* table address - vtable address, with addresses = end - ref */
    put_le(b->buf + b->cap - table, (uint32_t)(int32_t)((int64_t)vtable - (int64_t)table), 4);
    return table;
}

int fb_finish(fb_builder *b, fb_ref root, const char identifier[4],
              const uint8_t **data, size_t *size)
{
    if (b->in_table)
        b->failed = true;
    prep(b, b->max_align > 4 ? b->max_align : 4, 8);
    push_bytes(b, identifier, 4);
    push_uoffset(b, root);
    if (b->failed)
        return -1;
    *data = head(b);
    *size = b->used;
    return 0;
}
