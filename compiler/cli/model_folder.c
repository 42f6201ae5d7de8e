/* The model of a downloaded folder (model_folder.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_folder.h"
#include "support/file_map.h"
#include "support/json.h"

/* More *.onnx files than this in one folder is not a model download. */
#define MAX_CANDIDATES 64
/* The longest folder path taken: with a name under it (rel, 512), a path
 * fits LLMC_FOLDER_PATH. */
#define FOLDER_CHARS (LLMC_FOLDER_PATH / 2)
/* Room for the candidates' list in a message (llmc_error holds 4096). */
#define LIST_CHARS 3072

/* The legacy decoder files of optimum and of older transformers.js exports:
 * file stem -> variant name.  decoder_model_merged before decoder_model,
 * which is a prefix of it. */
#define LEGACY_DECODERS(X)                          \
    X(MERGED, "decoder_model_merged", "merged")     \
    X(WITH_PAST, "decoder_with_past_model", "with_past") \
    X(NO_PAST, "decoder_model", "no_past")

typedef enum {
#define LEGACY_ENUM(id, stem, name) LEGACY_##id,
    LEGACY_DECODERS(LEGACY_ENUM)
#undef LEGACY_ENUM
    LEGACY_COUNT,
    NOT_LEGACY = LEGACY_COUNT
} legacy_kind;

static const struct {
    const char *stem, *variant;
} legacy[LEGACY_COUNT] = {
#define LEGACY_ROW(id, stem, name) {stem, name},
    LEGACY_DECODERS(LEGACY_ROW)
#undef LEGACY_ROW
};

typedef struct {
    char rel[512];           /* under the folder: "onnx/model_q4.onnx" */
    char variant[256];
    legacy_kind kind;
    size_t suffix_at;        /* legacy: where in rel what follows the stem ("" or "_quantized") starts */
    bool superseded;         /* a decoder_with_past_model of its suffix is the one */
} candidate;

typedef struct {
    candidate c[MAX_CANDIDATES];
    int n;
    const char *layout;      /* set by genai_config.json; else by where the model is */
} candidates;

bool llmc_is_folder(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool starts_with(const char *s, const char *prefix)
{
    return !strncmp(s, prefix, strlen(prefix));
}

/* The variant name of a file whose name without ".onnx" is stem[0, len)
 * (a pointer into c->rel). */
static void name_variant(candidate *c, const char *stem, size_t len)
{
    c->kind = NOT_LEGACY;
    if (len == 5 && starts_with(stem, "model")) {
        snprintf(c->variant, sizeof c->variant, "fp32");
        return;
    }
    if (len > 6 && starts_with(stem, "model_")) {
        snprintf(c->variant, sizeof c->variant, "%.*s", (int)(len - 6), stem + 6);
        return;
    }
    for (int k = 0; k < LEGACY_COUNT; k++) {
        size_t n = strlen(legacy[k].stem);
        if (len >= n && starts_with(stem, legacy[k].stem) && (len == n || stem[n] == '_')) {
            c->kind = (legacy_kind)k;
            c->suffix_at = (size_t)(stem + n - c->rel);
            snprintf(c->variant, sizeof c->variant, "%s%.*s", legacy[k].variant, (int)(len - n),
                     stem + n);
            return;
        }
    }
    snprintf(c->variant, sizeof c->variant, "%.*s", (int)len, stem);
}

static int add_candidate(candidates *cs, const char *folder, const char *rel, llmc_error *err)
{
    char path[LLMC_FOLDER_PATH];
    if (cs->n == MAX_CANDIDATES)
        return llmc_fail(err, LLMC_E_INPUT, "'%s': more than %d ONNX files; name the model "
                         "file instead of the folder", folder, MAX_CANDIDATES);
    candidate *c = &cs->c[cs->n];
    if ((size_t)snprintf(c->rel, sizeof c->rel, "%s", rel) >= sizeof c->rel ||
        (size_t)snprintf(path, sizeof path, "%s/%s", folder, rel) >= sizeof path)
        return llmc_fail(err, LLMC_E_INPUT, "'%s/%s': path too long", folder, rel);
    if (!is_file(path))   /* a directory named *.onnx, a dangling link */
        return LLMC_OK;
    const char *base = strrchr(c->rel, '/') ? strrchr(c->rel, '/') + 1 : c->rel;
    name_variant(c, base, strlen(base) - strlen(".onnx"));
    cs->n++;
    return LLMC_OK;
}

/* Every *.onnx of folder/sub ("" for the folder itself); a missing sub is
 * no error. */
static int list_onnx(const char *folder, const char *sub, candidates *cs, llmc_error *err)
{
    char dir[LLMC_FOLDER_PATH], rel[512];
    snprintf(dir, sizeof dir, "%s%s%s", folder, *sub ? "/" : "", sub);
    DIR *d = opendir(dir);
    int rc = LLMC_OK;
    for (struct dirent *e; !rc && d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".onnx"))
            continue;
        snprintf(rel, sizeof rel, "%s%s%s", sub, *sub ? "/" : "", e->d_name);
        rc = add_candidate(cs, folder, rel, err);
    }
    if (d)
        closedir(d);
    return rc;
}

/* model.decoder.filename of folder/genai_config.json, the one candidate;
 * *found is false when there is no such file. */
static int genai_candidate(const char *folder, candidates *cs, bool *found, llmc_error *err)
{
    char path[LLMC_FOLDER_PATH];
    snprintf(path, sizeof path, "%s/genai_config.json", folder);
    *found = is_file(path);
    if (!*found)
        return LLMC_OK;
    llmc_mapped_file f = {0};
    json_doc doc = {0};
    int rc = llmc_open_input(path, false, &f, err);
    if (!rc)
        rc = json_parse(path, f.map, f.size, &doc, err);
    uint32_t name = rc ? JSON_NONE
                       : json_member(&doc, json_member(&doc, json_member(&doc, 0, "model"),
                                                       "decoder"), "filename");
    char file[256] = "";
    bool named = json_kind_of(&doc, name) == JSON_STRING && doc.nodes[name].str_len < sizeof file;
    if (named)   /* strings in doc are not NUL-terminated */
        memcpy(file, doc.strings + doc.nodes[name].str, doc.nodes[name].str_len);
    if (!rc && (!named || !*file || strlen(file) != doc.nodes[name].str_len || file[0] == '/' ||
                strstr(file, "..")))
        rc = llmc_fail(err, LLMC_E_INPUT, "'%s': model.decoder.filename is not the name of a "
                       "file in the folder", path);
    int before = cs->n;
    if (!rc)
        rc = add_candidate(cs, folder, file, err);
    if (!rc && cs->n == before)
        rc = llmc_fail(err, LLMC_E_INPUT, "'%s' names model.decoder.filename '%s', which is not "
                       "in '%s'", path, file, folder);
    cs->layout = "onnxruntime-genai";
    json_free(&doc);
    llmc_unmap_file(&f);
    return rc;
}

static int by_rel(const void *a, const void *b)
{
    return strcmp(((const candidate *)a)->rel, ((const candidate *)b)->rel);
}

/* A legacy decoder_model[_X] or decoder_model_merged[_X] gives way to the
 * decoder_with_past_model[_X] in the same directory. */
static void mark_superseded(candidates *cs)
{
    for (int i = 0; i < cs->n; i++) {
        candidate *c = &cs->c[i];
        if (c->kind != LEGACY_MERGED && c->kind != LEGACY_NO_PAST)
            continue;
        const char *slash = strrchr(c->rel, '/');
        int dir_len = slash ? (int)(slash - c->rel + 1) : 0;
        for (int j = 0; j < cs->n; j++) {
            const candidate *o = &cs->c[j];
            c->superseded |= o->kind == LEGACY_WITH_PAST &&
                             !strcmp(o->rel + o->suffix_at, c->rel + c->suffix_at) &&
                             !strncmp(o->rel, c->rel, (size_t)dir_len) &&
                             !strchr(o->rel + dir_len, '/');
        }
    }
}

/* "fp32 (onnx/model.onnx), q4 (onnx/model_q4.onnx)" of the candidates whose
 * pick[] is set. */
static void list_candidates(const candidates *cs, const bool *pick, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < cs->n; i++) {
        if (!pick[i])
            continue;
        int n = snprintf(out + at, cap - at, "%s%s (%s)", at ? ", " : "", cs->c[i].variant,
                         cs->c[i].rel);
        if (n < 0 || (size_t)n >= cap - at) {
            strcpy(out + (at + 6 <= cap ? at : cap - 6), ", ...");
            return;
        }
        at += (size_t)n;
    }
}

/* The index of the candidate --variant names (its variant name, file name
 * or path under the folder), or of the one candidate left; -1 with *err. */
static int choose(const char *folder, const candidates *cs, const char *variant, llmc_error *err)
{
    bool all[MAX_CANDIDATES], pick[MAX_CANDIDATES];
    int n = 0, last = -1;
    for (int i = 0; i < cs->n; i++) {
        const candidate *c = &cs->c[i];
        const char *base = strrchr(c->rel, '/') ? strrchr(c->rel, '/') + 1 : c->rel;
        all[i] = true;
        pick[i] = variant ? !strcmp(variant, c->variant) || !strcmp(variant, base) ||
                                !strcmp(variant, c->rel)
                          : !c->superseded;
        n += pick[i];
        last = pick[i] ? i : last;
    }
    if (n == 1)
        return last;
    char list[LIST_CHARS];
    list_candidates(cs, n ? pick : all, list, sizeof list);
    if (!variant)
        llmc_fail(err, LLMC_E_USAGE, "'%s' holds %d ONNX models; choose one with --variant: %s",
                  folder, n, list);
    else if (n)
        llmc_fail(err, LLMC_E_USAGE, "--variant '%s' names %d models of '%s': %s; give the "
                  "file's path under the folder instead", variant, n, folder, list);
    else
        llmc_fail(err, LLMC_E_USAGE, "'%s' has no model of --variant '%s'; it has: %s", folder,
                  variant, list);
    return -1;
}

/* tokenizer.json beside the model, else at the top of the folder. */
static void find_tokenizer(const char *folder, const char *rel, llmc_model_folder *out)
{
    const char *slash = strrchr(rel, '/');
    snprintf(out->tokenizer, sizeof out->tokenizer, "%s/%.*stokenizer.json", folder,
             slash ? (int)(slash - rel + 1) : 0, rel);
    if (!is_file(out->tokenizer))
        snprintf(out->tokenizer, sizeof out->tokenizer, "%s/tokenizer.json", folder);
    if (!is_file(out->tokenizer))
        out->tokenizer[0] = 0;
}

int llmc_model_folder_find(const char *folder, const char *variant, llmc_model_folder *out,
                           llmc_error *err)
{
    candidates cs;
    char dir[FOLDER_CHARS];
    size_t len = strlen(folder);
    while (len > 1 && folder[len - 1] == '/')   /* "dir/" names files "dir/x" */
        len--;
    if (len >= sizeof dir)
        return llmc_fail(err, LLMC_E_INPUT, "'%s': path too long", folder);
    snprintf(dir, sizeof dir, "%.*s", (int)len, folder);
    memset(&cs, 0, sizeof cs);
    memset(out, 0, sizeof *out);
    bool genai;
    int rc = genai_candidate(dir, &cs, &genai, err);
    if (!rc && !genai)
        rc = list_onnx(dir, "", &cs, err);
    if (!rc && !genai)
        rc = list_onnx(dir, "onnx", &cs, err);
    if (rc)
        return rc;
    if (!cs.n)
        return llmc_fail(err, LLMC_E_INPUT, "'%s' holds no ONNX model: looked for "
                         "genai_config.json (onnxruntime-genai), *.onnx in the folder (optimum: "
                         "model.onnx, decoder_model_merged.onnx, decoder_with_past_model.onnx, "
                         "decoder_model.onnx) and in onnx/ (transformers.js: model.onnx, "
                         "model_<variant>.onnx)", dir);
    qsort(cs.c, (size_t)cs.n, sizeof cs.c[0], by_rel);
    mark_superseded(&cs);
    int i = choose(dir, &cs, variant, err);
    if (i < 0)
        return err->code;
    const candidate *c = &cs.c[i];
    snprintf(out->model, sizeof out->model, "%s/%s", dir, c->rel);
    snprintf(out->variant, sizeof out->variant, "%s", c->variant);
    out->layout = cs.layout ? cs.layout : starts_with(c->rel, "onnx/") ? "transformers.js"
                                                                       : "optimum";
    find_tokenizer(dir, c->rel, out);
    return LLMC_OK;
}
