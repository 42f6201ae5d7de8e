/* Protobuf wire format (https://protobuf.dev/programming-guides/encoding/):
 * a message is a run of fields, each a varint tag (field number << 3 | wire
 * type) followed by a payload whose extent the wire type gives:
 *   0 varint, 1 eight bytes, 2 varint length + bytes, 5 four bytes;
 *   3 and 4 (groups) are deprecated and never appear in ONNX; 6, 7 are invalid.
 * Nested messages are wire type 2 and are walked with their own descriptor.
 * Unknown field numbers are skipped, as protobuf-c does. */
#include "pb_diagnose.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define PB_MAX_DEPTH 100  /* nesting deeper than this is refused, not walked */
#define PB_PATH_CAP 512
#define PB_COUNTED 64     /* fields per message whose repeat index is tracked */

typedef struct {
    const uint8_t *data;
    size_t size;
    char *buf;
    size_t cap;
} pb_walk;

static int say(pb_walk *w, size_t at, const char *path, const char *fmt, ...)
{
    int n = snprintf(w->buf, w->cap, "byte %zu, field %s: ", at, path[0] ? path : "(top level)");
    if (n >= 0 && (size_t)n < w->cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->buf + n, w->cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return 1;
}

/* `what` does not fit before `end`: the file's end or its message's. */
static int past_end(pb_walk *w, size_t at, const char *path, const char *what, size_t end)
{
    if (end == w->size)
        return say(w, at, path, "%s runs past the end of the file (%zu bytes): truncated?", what, end);
    return say(w, at, path, "%s runs past the end of the enclosing message (byte %zu)", what, end);
}

/* Reads a varint at *pos below end; 0 if it is cut short or over 10 bytes. */
static int read_varint(const uint8_t *d, size_t *pos, size_t end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 70 && *pos < end; shift += 7) {
        uint8_t b = d[(*pos)++];
        *v |= shift < 64 ? (uint64_t)(b & 0x7F) << shift : 0;
        if (b < 0x80)
            return 1;
    }
    return 0;
}

/* The wire type protobuf writes for a field of this type, unpacked. */
static unsigned scalar_wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
        return 5;
    case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 1;
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_BYTES: case PROTOBUF_C_TYPE_MESSAGE:
        return 2;
    default:
        return 0;
    }
}

static const char *wire_type_name(unsigned wt)
{
    static const char *const names[8] = {"varint", "64-bit", "length-delimited", "group start",
                                         "group end", "32-bit", "invalid (6)", "invalid (7)"};
    return names[wt & 7];
}

/* A packed repeated scalar: the payload must hold whole elements. */
static int check_packed(pb_walk *w, size_t at, const char *path, unsigned wt, size_t start, size_t len)
{
    if ((wt == 5 && len % 4) || (wt == 1 && len % 8))
        return say(w, at, path, "packed %s values take %zu bytes, not a multiple of %d", wire_type_name(wt), len,
                   wt == 5 ? 4 : 8);
    if (wt == 0 && len && w->data[start + len - 1] >= 0x80)
        return say(w, at, path, "packed varints end in the middle of a varint");
    return 0;
}

static int walk(pb_walk *w, const ProtobufCMessageDescriptor *desc, size_t pos, size_t end, char *path,
                int depth);

/* One field at `at` whose tag is already read; *pos is its payload. */
static int walk_field(pb_walk *w, const ProtobufCMessageDescriptor *desc, size_t at, uint64_t tag, size_t *pos,
                      size_t end, char *path, uint32_t *counts, int depth)
{
    unsigned wt = (unsigned)(tag & 7);
    uint64_t number = tag >> 3;
    size_t plen = strlen(path);
    const ProtobufCFieldDescriptor *f =
        number <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(desc, (unsigned)number) : NULL;
    if (f) {
        size_t index = (size_t)(f - desc->fields);
        if (f->label == PROTOBUF_C_LABEL_REPEATED && index < PB_COUNTED)
            snprintf(path + plen, PB_PATH_CAP - plen, "%s%s[%" PRIu32 "]", plen ? "." : "", f->name,
                     counts[index]++);
        else
            snprintf(path + plen, PB_PATH_CAP - plen, "%s%s", plen ? "." : "", f->name);
    } else {
        snprintf(path + plen, PB_PATH_CAP - plen, "%s#%" PRIu64, plen ? "." : "", number);
    }
    if (number == 0)
        return say(w, at, path, "field number 0 is invalid");
    if (wt == 3 || wt == 4 || wt > 5)
        return say(w, at, path, "wire type %u (%s) is not allowed", wt, wire_type_name(wt));
    uint64_t len = wt == 1 ? 8 : wt == 5 ? 4 : 0;
    if (wt == 0 && !read_varint(w->data, pos, end, &len))
        return past_end(w, at, path, "its varint", end);
    if (wt == 0)
        len = 0;
    if (wt == 2 && !read_varint(w->data, pos, end, &len))
        return past_end(w, at, path, "its length", end);
    if (len > end - *pos) {
        char what[64];
        snprintf(what, sizeof what, "its %" PRIu64 "-byte payload", len);
        return past_end(w, at, path, what, end);
    }
    size_t start = *pos;
    *pos += (size_t)len;
    if (!f)
        return 0;
    unsigned want = scalar_wire_type(f->type);
    bool packable = f->label == PROTOBUF_C_LABEL_REPEATED && want != 2;
    if (wt != want && !(packable && wt == 2))
        return say(w, at, path, "wire type %u (%s), but this field is %s", wt, wire_type_name(wt),
                   wire_type_name(want));
    if (packable && wt == 2)
        return check_packed(w, at, path, want, start, (size_t)len);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        if (depth >= PB_MAX_DEPTH)
            return say(w, at, path, "messages nest deeper than %d levels", PB_MAX_DEPTH);
        return walk(w, f->descriptor, start, start + (size_t)len, path, depth + 1);
    }
    return 0;
}

static int walk(pb_walk *w, const ProtobufCMessageDescriptor *desc, size_t pos, size_t end, char *path, int depth)
{
    uint32_t counts[PB_COUNTED] = {0};
    size_t plen = strlen(path);
    while (pos < end) {
        size_t at = pos;
        uint64_t tag;
        if (!read_varint(w->data, &pos, end, &tag))
            return past_end(w, at, path, "a field tag", end);
        if (walk_field(w, desc, at, tag, &pos, end, path, counts, depth))
            return 1;
        path[plen] = '\0';
    }
    return 0;
}

int llmc_pb_diagnose(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size, char *buf,
                     size_t cap)
{
    char path[PB_PATH_CAP] = "";
    pb_walk w = {data, size, buf, cap};
    return walk(&w, desc, 0, size, path, 0);
}
