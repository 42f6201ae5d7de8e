/* Read-only file mappings, and ONNX external data: tensors whose bytes live
 * in files next to the model (data_location = EXTERNAL, key/value entries
 * location/offset/length).  Both torch's one-file-per-tensor layout and the
 * single-file location/offset/length layout are handled the same way: each
 * file is mapped once and constants point into the mapping, so weights are
 * never copied. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_import_priv.h"

struct llmc_ext_file {
    char *real_path;
    llmc_mapped_file file;
    llmc_ext_file *next;
};

int llmc_ext_cache_init(llmc_ext_cache *c, const char *model_path, llmc_error *err)
{
    c->files = NULL;
    char *copy = strdup(model_path);
    if (!copy)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    c->model_dir = realpath(dirname(copy), NULL);
    int saved = errno;
    free(copy);
    if (!c->model_dir)
        return llmc_fail(err, LLMC_E_INPUT, "cannot resolve the folder of '%s': %s", model_path,
                         strerror(saved));
    return LLMC_OK;
}

void llmc_ext_cache_free(llmc_ext_cache *c)
{
    while (c->files) {
        llmc_ext_file *next = c->files->next;
        llmc_unmap_file(&c->files->file);
        free(c->files->real_path);
        free(c->files);
        c->files = next;
    }
    free(c->model_dir);
    c->model_dir = NULL;
}

/* Where a tensor's bytes are, as its external_data entries say. */
typedef struct {
    const char *location;
    uint64_t offset;
    uint64_t length;
    bool has_length;
} ext_ref;

/* Strict decimal: digits only, no sign, no overflow. */
static bool parse_u64(const char *s, uint64_t *v)
{
    *v = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || *v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return false;
        *v = *v * 10 + (uint64_t)(*s - '0');
    }
    return true;
}

static int parse_ext_ref(const Onnx__TensorProto *t, const char *what, ext_ref *r, llmc_error *err)
{
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *key = t->external_data[i]->key, *val = t->external_data[i]->value;
        if (!key || !val)
            continue;
        bool ok = true;
        if (strcmp(key, "location") == 0)
            r->location = val;
        else if (strcmp(key, "offset") == 0)
            ok = parse_u64(val, &r->offset);
        else if (strcmp(key, "length") == 0)
            ok = r->has_length = parse_u64(val, &r->length);
        if (!ok)
            return llmc_fail(err, LLMC_E_INPUT, "%s: external data %s '%s' is not a byte count", what,
                             key, val);
    }
    if (!r->location || !*r->location)
        return llmc_fail(err, LLMC_E_INPUT, "%s: external data has no location", what);
    return LLMC_OK;
}

/* Locations must stay inside the model's folder: no absolute paths and no
 * ".." components (symlinks are checked after resolving, see below). */
static bool location_is_relative_and_inside(const char *loc)
{
    if (loc[0] == '/')
        return false;
    for (const char *p = loc; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return false;
        p += n + (p[n] == '/');
    }
    return true;
}

static bool path_is_inside(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1)                         /* the model folder is "/" */
        return path[0] == '/';
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Resolves the location to a real path inside the model's folder. */
static int resolve_location(const llmc_ext_cache *c, const ext_ref *r, const char *what,
                            char **real, llmc_error *err)
{
    if (!location_is_relative_and_inside(r->location))
        return llmc_fail(err, LLMC_E_INPUT,
                         "%s: external data location '%s' must be a relative path inside the model folder '%s'",
                         what, r->location, c->model_dir);
    char *joined = NULL;
    if (asprintf(&joined, "%s/%s", c->model_dir, r->location) < 0)
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    *real = realpath(joined, NULL);
    int saved = errno;
    free(joined);
    if (!*real)
        return llmc_fail(err, LLMC_E_INPUT, "%s: cannot open external data file '%s' (offset %" PRIu64
                         "): %s", what, r->location, r->offset, strerror(saved));
    if (!path_is_inside(*real, c->model_dir)) {
        llmc_fail(err, LLMC_E_INPUT,
                  "%s: external data location '%s' resolves to '%s', outside the model folder '%s'",
                  what, r->location, *real, c->model_dir);
        free(*real);
        *real = NULL;
        return err->code;
    }
    return LLMC_OK;
}

/* Returns the cached mapping of `real`, mapping the file on first use.
 * Takes ownership of `real`. */
static int mapped_ext_file(llmc_ext_cache *c, char *real, const ext_ref *r, const char *what,
                           const llmc_mapped_file **out, llmc_error *err)
{
    for (llmc_ext_file *f = c->files; f; f = f->next) {
        if (strcmp(f->real_path, real) == 0) {
            free(real);
            *out = &f->file;
            return LLMC_OK;
        }
    }
    llmc_ext_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(real);
        return llmc_fail(err, LLMC_E_NOMEM, "out of memory");
    }
    f->real_path = real;
    int e = llmc_map_file(real, &f->file);
    if (e) {
        free(real);
        free(f);
        return llmc_fail(err, LLMC_E_INPUT, "%s: cannot map external data file '%s' (offset %" PRIu64
                         "): %s", what, r->location, r->offset, strerror(e));
    }
    f->next = c->files;
    c->files = f;
    *out = &f->file;
    return LLMC_OK;
}

int llmc_ext_data(llmc_ext_cache *c, const Onnx__TensorProto *t, const char *what,
                  uint64_t nbytes, const void **data, llmc_error *err)
{
    ext_ref r;
    char *real = NULL;
    const llmc_mapped_file *f = NULL;
    int rc = parse_ext_ref(t, what, &r, err);
    if (!rc)
        rc = resolve_location(c, &r, what, &real, err);
    if (!rc)
        rc = mapped_ext_file(c, real, &r, what, &f, err);
    if (rc)
        return rc;
    uint64_t length = r.has_length ? r.length : nbytes;
    if (r.offset > f->size || length > f->size - r.offset)
        return llmc_fail(err, LLMC_E_INPUT, "%s: external data at offset %" PRIu64 ", length %" PRIu64
                         " lies beyond the end of '%s' (%" PRIu64 " bytes)",
                         what, r.offset, length, r.location, f->size);
    if (length != nbytes)
        return llmc_fail(err, LLMC_E_INPUT, "%s: external data in '%s' at offset %" PRIu64
                         " has %" PRIu64 " bytes, its shape needs %" PRIu64,
                         what, r.location, r.offset, length, nbytes);
    *data = f->map ? f->map + r.offset : NULL;
    return LLMC_OK;
}
