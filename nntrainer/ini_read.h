/* The project's own INI reader: the syntax NNTrainer's INI files are written
 * in, read as iniparser 4.1 (NNTrainer's reader) reads a well-formed file,
 * but strict where iniparser guesses: a duplicate section or key, binary
 * content, a key before any section or a malformed line is an error naming
 * the file and the line, and an allocation failure is an error, never a
 * partly read file. The syntax and every refusal are in docs/ini.md
 * ("Syntax"); nntrainer/ini.c turns the result into a model. */
#ifndef NNT_INI_READ_H
#define NNT_INI_READ_H

#include <stddef.h>
#include "nntrainer/common.h"

/* The largest file read: NNTrainer's INIs are a few kilobytes. */
#define NNT_INI_MAX_BYTES ((size_t)16 << 20)

typedef struct nnt_ini_key {
  const char *name;  /* lowercase */
  const char *value; /* as written, quotes removed; "" when empty */
  unsigned line;     /* where it starts in the file; 0 when set by nnt_ini_set */
} nnt_ini_key;

typedef struct nnt_ini_section {
  const char *name;  /* lowercase, no surrounding spaces */
  unsigned line;
  size_t first, n_keys; /* its keys, in file order: nnt_ini_key_at(ini, s, 0..n_keys-1) */
} nnt_ini_section;

typedef struct nnt_ini nnt_ini;

/* Read the INI file at path (named as given in messages). Only a regular
 * file of at most NNT_INI_MAX_BYTES is read; a FIFO, directory or device is
 * refused without blocking. Errors: NNT_ERR_IO (cannot open or read, not a
 * regular file), NNT_ERR_INVAL (too large, binary content, a syntax error,
 * a duplicate), NNT_ERR_NOMEM; messages read "<path>: line N: ...".
 * Ownership: on success *out is the caller's, freed by nnt_ini_free; on
 * error *out is NULL and nothing is left allocated. */
int nnt_ini_read_file(const char *path, nnt_ini **out, nnt_err *e);

/* The same on len bytes of text (copied; need not end in NUL), named name
 * in messages. */
int nnt_ini_parse(const char *name, const char *text, size_t len, nnt_ini **out, nnt_err *e);

/* Frees everything; NULL is a no-op. */
void nnt_ini_free(nnt_ini *ini);

size_t nnt_ini_section_count(const nnt_ini *ini);
/* Sections in file order; i < nnt_ini_section_count(). */
const nnt_ini_section *nnt_ini_section_at(const nnt_ini *ini, size_t i);
/* The section named name (case-insensitive), or NULL. */
const nnt_ini_section *nnt_ini_find_section(const nnt_ini *ini, const char *name);
/* Key i of s, i < s->n_keys. Pointers stay valid until the next
 * nnt_ini_set or nnt_ini_free. */
const nnt_ini_key *nnt_ini_key_at(const nnt_ini *ini, const nnt_ini_section *s, size_t i);
/* The key of s named key (case-insensitive), or NULL; s may be NULL. */
const nnt_ini_key *nnt_ini_find_key(const nnt_ini *ini, const nnt_ini_section *s,
                                    const char *key);
/* The value of that key, or NULL when it is absent. */
const char *nnt_ini_get(const nnt_ini *ini, const nnt_ini_section *s, const char *key);

/* Set key in the existing section named section (both case-insensitive,
 * stored lowercase) to the value_len bytes at value (copied; no NUL needed;
 * no quotes or comments are interpreted): replaces the key's value when the
 * section has it (the key keeps its place), else adds it at the end of the
 * section. Its line becomes 0. Section pointers stay valid; key pointers do
 * not. Errors: NNT_ERR_INVAL (no such section, an empty key), NNT_ERR_NOMEM
 * (the file's contents are unchanged). */
int nnt_ini_set(nnt_ini *ini, const char *section, const char *key, const char *value,
                size_t value_len, nnt_err *e);

/* Writing values that read back the same (nntrainer/ini_save.c): how to
 * write value after "key = " so that this reader and iniparser 4.1 read
 * exactly value: 0 as it is, '"' or '\'' between those quotes (needed for
 * blanks at either end, ; or #, a quote first, a backslash last). -1 when
 * it cannot be written: a control character other than tab, invalid
 * UTF-8, or both quotes in a value that needs quoting. */
int nnt_ini_value_quote(const char *value);
/* Whether name can be written as a [section] name (section != 0) or a key
 * and read back the same, up to case: not empty, no blanks at either end,
 * UTF-8 text without control characters; a section name without ']' or
 * ':'; a key without '=' that does not start with '[', '#' or ';'. */
int nnt_ini_name_writable(const char *name, int section);

#endif
