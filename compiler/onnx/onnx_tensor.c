/* TensorProto decoding: shape checks, raw_data (used in place), the typed
 * fields (converted into owned buffers), external data, and standalone
 * TensorProto files (ONNX backend test data). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"
#include "onnx_import_priv.h"
#include "pb_diagnose.h"

/* raw_data is little-endian and is used in place, and the typed fields are
 * copied with memcpy: both need a little-endian host. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "llmc's ONNX importer assumes a little-endian host"
#endif

/* "[2,3,4]" into buf (truncated to fit). */
static const char *format_dims(char *buf, size_t size, const int64_t *dims, int rank)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, i ? "," : "", dims[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

int llmc_shape_elements(const int64_t *dims, int rank, const char *what, uint64_t *count,
                        llmc_error *err)
{
    char shape[256];
    *count = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return llmc_fail(err, LLMC_E_INPUT, "%s has negative dim %" PRId64 " at axis %d", what,
                             dims[i], i);
        uint64_t d = (uint64_t)dims[i];
        if (d && *count > UINT64_MAX / d)
            return llmc_fail(err, LLMC_E_INPUT, "%s: shape %s has more elements than 64 bits can count",
                             what, format_dims(shape, sizeof shape, dims, rank));
        *count *= d;
    }
    return LLMC_OK;
}

static int decode_shape(const Onnx__TensorProto *t, const char *what, llmc_onnx_tensor *out,
                        uint64_t *nbytes, llmc_error *err)
{
    out->dtype = t->data_type;
    size_t esize = llmc_dtype_size(out->dtype);
    if (!esize)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "%s has data type %s (%d), which llmc does not support",
                         what, llmc_dtype_name(out->dtype), out->dtype);
    if (t->n_dims > LLMC_MAX_RANK)
        return llmc_fail(err, LLMC_E_UNSUPPORTED, "%s has rank %zu; llmc supports at most %d", what,
                         t->n_dims, LLMC_MAX_RANK);
    out->rank = (int)t->n_dims;
    for (int i = 0; i < out->rank; i++)
        out->dims[i] = t->dims[i];
    uint64_t count;
    int rc = llmc_shape_elements(out->dims, out->rank, what, &count, err);
    if (rc)
        return rc;
    if (count > UINT64_MAX / esize) {
        char shape[256];
        return llmc_fail(err, LLMC_E_INPUT, "%s: shape %s has more bytes than 64 bits can count", what,
                         format_dims(shape, sizeof shape, out->dims, out->rank));
    }
    *nbytes = count * esize;
    return LLMC_OK;
}

/* The typed field that holds elements of `dtype` (see TensorProto in
 * onnx.proto): int32_data also carries the narrower integer types, bool
 * and the bit patterns of float16/bfloat16. */
static size_t typed_field(const Onnx__TensorProto *t, int dtype, const char **field)
{
    switch (dtype) {
    case LLMC_DT_FLOAT: *field = "float_data"; return t->n_float_data;
    case LLMC_DT_INT64: *field = "int64_data"; return t->n_int64_data;
    case LLMC_DT_DOUBLE: *field = "double_data"; return t->n_double_data;
    case LLMC_DT_UINT32: case LLMC_DT_UINT64: *field = "uint64_data"; return t->n_uint64_data;
    default: *field = "int32_data"; return t->n_int32_data;
    }
}

static void narrow_int32_field(const Onnx__TensorProto *t, int dtype, uint64_t count, void *buf)
{
    for (uint64_t i = 0; i < count; i++) {
        int32_t v = t->int32_data[i];
        if (dtype == LLMC_DT_BOOL)
            v = v != 0;
        if (llmc_dtype_size(dtype) == 2) {
            uint16_t h = (uint16_t)v;
            memcpy((uint8_t *)buf + 2 * i, &h, 2);
        } else {
            ((uint8_t *)buf)[i] = (uint8_t)v;
        }
    }
}

static void copy_typed_field(const Onnx__TensorProto *t, int dtype, uint64_t count, void *buf)
{
    switch (dtype) {
    case LLMC_DT_FLOAT: memcpy(buf, t->float_data, count * 4); break;
    case LLMC_DT_INT64: memcpy(buf, t->int64_data, count * 8); break;
    case LLMC_DT_DOUBLE: memcpy(buf, t->double_data, count * 8); break;
    case LLMC_DT_UINT64: memcpy(buf, t->uint64_data, count * 8); break;
    case LLMC_DT_INT32: memcpy(buf, t->int32_data, count * 4); break;
    case LLMC_DT_UINT32:
        for (uint64_t i = 0; i < count; i++) {
            uint32_t v = (uint32_t)t->uint64_data[i];
            memcpy((uint8_t *)buf + 4 * i, &v, 4);
        }
        break;
    default: narrow_int32_field(t, dtype, count, buf); break;
    }
}

static int decode_typed_data(const Onnx__TensorProto *t, const char *what, llmc_onnx_tensor *out,
                             uint64_t nbytes, llmc_error *err)
{
    const char *field;
    uint64_t count = nbytes / llmc_dtype_size(out->dtype);
    size_t n = typed_field(t, out->dtype, &field);
    if (n != count) {
        char shape[256];
        return llmc_fail(err, LLMC_E_INPUT, "%s has %zu elements in %s, its shape %s needs %" PRIu64,
                         what, n, field, format_dims(shape, sizeof shape, out->dims, out->rank), count);
    }
    if (!count)
        return LLMC_OK;
    void *buf = malloc(nbytes);
    if (!buf)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory decoding %s", what);
    copy_typed_field(t, out->dtype, count, buf);
    out->data.data = buf;
    out->data.nbytes = nbytes;
    out->data.owned = true;
    return LLMC_OK;
}

int llmc_onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, llmc_ext_cache *ext,
                            llmc_onnx_tensor *out, llmc_error *err)
{
    memset(out, 0, sizeof *out);
    uint64_t nbytes = 0;
    int rc = decode_shape(t, what, out, &nbytes, err);
    if (rc)
        return rc;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (!ext)
            return llmc_fail(err, LLMC_E_UNSUPPORTED, "%s uses external data, which is not allowed here",
                             what);
        out->data.nbytes = nbytes;
        out->data.file_backed = true;   /* pages may be dropped after hashing or writing */
        return llmc_ext_data(ext, t, what, nbytes, &out->data.data, err);
    }
    if (!t->has_raw_data)
        return decode_typed_data(t, what, out, nbytes, err);
    if (t->raw_data.len != nbytes) {
        char shape[256];
        return llmc_fail(err, LLMC_E_INPUT, "%s has %zu bytes of raw_data, its shape %s of %s needs %" PRIu64,
                         what, t->raw_data.len, format_dims(shape, sizeof shape, out->dims, out->rank),
                         llmc_dtype_name(out->dtype), nbytes);
    }
    out->data.data = t->raw_data.data;
    out->data.nbytes = nbytes;
    return LLMC_OK;
}

/* ---- float16 / bfloat16 -> float32 ----
 *
 * Both conversions are exact: every float16 and every bfloat16 value is a
 * float32 value.  float16 is 1 sign, 5 exponent (bias 15), 10 mantissa
 * bits: normals rebias the exponent to 127 and shift the mantissa up by 13;
 * subnormals (m * 2^-24) are normalized into float32 normals; inf keeps its
 * sign, NaN its sign and payload (the quiet bit is the payload's top bit in
 * both formats).  bfloat16 is the upper half of a float32. */
float llmc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    } else if (!man) {
        bits = sign;
    } else {
        uint32_t e = 127 - 15 + 1;       /* the exponent of 2^-14, the subnormals' scale */
        while (!(man & 0x400u)) {        /* until the implicit bit is set */
            man <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float llmc_bfloat16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

bool llmc_dtype_is_float16(int dtype)
{
    return dtype == LLMC_DT_FLOAT16 || dtype == LLMC_DT_BFLOAT16;
}

int llmc_onnx_tensor_widen(llmc_onnx_tensor *t, const char *what, llmc_error *err)
{
    if (!llmc_dtype_is_float16(t->dtype))
        return LLMC_OK;
    uint64_t count = t->data.nbytes / 2;
    bool bf16 = t->dtype == LLMC_DT_BFLOAT16;
    t->dtype = LLMC_DT_FLOAT;
    if (!count) {
        if (t->data.owned)
            free((void *)t->data.data);
        t->data = (llmc_const){.data = NULL};
        return LLMC_OK;
    }
    if (count > SIZE_MAX / 4)
        return llmc_fail(err, LLMC_E_NOMEM, "%s: %" PRIu64 " %s elements do not fit in memory as float32", what,
                         count, bf16 ? "bfloat16" : "float16");
    float *out = malloc((size_t)count * 4);
    if (!out)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory widening %s (%" PRIu64 " %s elements) to float32",
                         what, count, bf16 ? "bfloat16" : "float16");
    const uint8_t *in = t->data.data;
    for (uint64_t i = 0; i < count; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        out[i] = bf16 ? llmc_bfloat16_to_float(h) : llmc_half_to_float(h);
    }
    if (t->data.owned)
        free((void *)t->data.data);
    t->data = (llmc_const){.data = out, .nbytes = count * 4, .owned = true};
    return LLMC_OK;
}

/* Moves the decoded tensor into *f; borrowed data (raw_data inside the
 * message, about to be freed) is copied. */
static int fill_tensor_file(const Onnx__TensorProto *t, const llmc_onnx_tensor *d, llmc_tensor_file *f)
{
    f->dtype = d->dtype;
    f->rank = d->rank;
    memcpy(f->dims, d->dims, sizeof f->dims);
    f->nbytes = d->data.nbytes;
    if (d->data.owned)
        f->data = (void *)d->data.data;
    else if (f->nbytes && (f->data = malloc(f->nbytes)) != NULL)
        memcpy(f->data, d->data.data, f->nbytes);
    f->name = strdup(t->name ? t->name : "");
    return f->name && (f->data || !f->nbytes) ? 0 : -1;
}

int llmc_read_tensor_pb_memory(const void *bytes, size_t size, const char *name, llmc_tensor_file *t,
                               llmc_error *err)
{
    memset(t, 0, sizeof *t);
    Onnx__TensorProto *msg = onnx__tensor_proto__unpack(NULL, size, bytes);
    char why[1024] = "no data_type";
    if (!msg && !llmc_pb_diagnose(&onnx__tensor_proto__descriptor, bytes, size, why, sizeof why))
        snprintf(why, sizeof why, "protobuf parse failed");
    if (!msg || !msg->has_data_type) {
        if (msg)
            onnx__tensor_proto__free_unpacked(msg, NULL);
        return llmc_fail(err, LLMC_E_INPUT, "'%s' is not a valid TensorProto file (%s)", name, why);
    }
    char what[4200];
    snprintf(what, sizeof what, "tensor file '%s'", name);
    llmc_onnx_tensor d;
    int rc = llmc_onnx_tensor_decode(msg, what, NULL, &d, err);
    if (!rc && fill_tensor_file(msg, &d, t) != 0)
        rc = llmc_fail(err, LLMC_E_NOMEM, "out of memory reading %s", what);
    if (rc)
        llmc_tensor_file_free(t);
    onnx__tensor_proto__free_unpacked(msg, NULL);
    return rc;
}

int llmc_read_tensor_pb(const char *path, llmc_tensor_file *t, llmc_error *err)
{
    memset(t, 0, sizeof *t);
    llmc_mapped_file file;
    int e = llmc_map_file(path, &file);
    if (e)
        return llmc_fail(err, LLMC_E_INPUT, "cannot open '%s': %s", path, strerror(e));
    int rc = llmc_read_tensor_pb_memory(file.map, file.size, path, t, err);
    llmc_unmap_file(&file);
    return rc;
}

void llmc_tensor_file_free(llmc_tensor_file *t)
{
    free(t->name);
    free(t->data);
    memset(t, 0, sizeof *t);
}
