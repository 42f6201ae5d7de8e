/* A small JSON reader (RFC 8259) for tokenizer.json and tokenizer_config.json.
 *
 * json_parse() builds the whole document at once: an array of nodes and one
 * buffer of decoded strings (escapes resolved, UTF-8; a lone \uD800-\uDFFF
 * escape becomes its 3-byte generalized UTF-8 form, which no valid text
 * contains).  Children of an array or object are a linked list in document
 * order.  Nesting deeper than JSON_MAX_DEPTH is refused, so hostile input
 * cannot exhaust the stack; the 33 MB Gemma 3 tokenizer.json parses in
 * well under a second. */
#ifndef LLMC_JSON_H
#define LLMC_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#define JSON_MAX_DEPTH 64
#define JSON_NONE UINT32_MAX

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;

typedef struct {
    uint8_t kind;          /* json_kind */
    uint32_t first_child;  /* arrays/objects: first child or JSON_NONE */
    uint32_t next;         /* next sibling or JSON_NONE */
    uint32_t count;        /* arrays/objects: number of children */
    uint32_t str, str_len; /* strings: decoded bytes in json_doc.strings */
    uint32_t key, key_len; /* object members: their key, likewise */
    double number;         /* numbers */
} json_node;

typedef struct {
    json_node *nodes;      /* nodes[0] is the root value */
    uint32_t n_nodes, cap_nodes;
    char *strings;         /* every decoded string and key */
    size_t strings_len;
} json_doc;

/* Parses text[0, size).  `name` (the file path) prefixes error messages,
 * which also give the byte offset.  On failure the document is empty. */
int json_parse(const char *name, const uint8_t *text, size_t size, json_doc *doc, llmc_error *err);
void json_free(json_doc *doc);

/* The member `key` of object node `obj`, or JSON_NONE (also when obj is not
 * an object). */
uint32_t json_member(const json_doc *doc, uint32_t obj, const char *key);
/* True if node i is a string equal to s. */
int json_is_string(const json_doc *doc, uint32_t i, const char *s);
/* Kind of node i, JSON_NULL for JSON_NONE (a missing member reads as null). */
json_kind json_kind_of(const json_doc *doc, uint32_t i);

#endif
