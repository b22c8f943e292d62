/* The INI loader: NNTrainer's model description format, turned into the same
 * model builder calls the C API makes. The format and every key are in
 * docs/ini.md. */
#ifndef NNT_INI_H
#define NNT_INI_H

#include <stddef.h>
#include "nntrainer/model.h"

/* Load the INI at path into m (fresh from nnt_model_create; call
 * nnt_model_set_base_dir(m, <the INI's folder>) first, since relative paths
 * in the file resolve against it).
 *
 * overrides are n strings "section.key=value", or "key=value" meaning
 * [Model], applied over the file's values before anything is read; an
 * override naming a section the file lacks is an error naming it. An
 * override replaces the file's value of its key, or adds the key: it is
 * never a duplicate. Its value is taken as given, trimmed (no quotes or
 * comments); an empty value is passed on as such ("save_path=" clears the
 * save path).
 *
 * The file is read by nntrainer/ini_read.h (its syntax and refusals are in
 * docs/ini.md, "Syntax"). Errors read "<path>: line N: [<section>] <key>:
 * <what is wrong>", with path as given and the line of the key (or of the
 * section when the key is missing); an error in an overridden value ends
 * with "(from override '...')" and has no line. A missing or unreadable
 * file, or one that is not a regular file, is NNT_ERR_IO; a file over 16
 * MiB, binary content, a malformed line, a duplicate section or key, an
 * unknown key, section type or value is NNT_ERR_INVAL; a backbone section
 * or an NNTrainer key nntrainer does not implement is
 * NNT_ERR_NOT_SUPPORTED; an allocation failure is NNT_ERR_NOMEM.
 *
 * Ownership: everything the loader creates is handed to m (which frees it
 * in nnt_model_destroy) or freed before returning; on error m keeps what was
 * added before the failing section and must still be destroyed by the
 * caller. Never prints. */
int nnt_ini_load(nnt_model *m, const char *path, const char *const *overrides,
                 size_t n_overrides, nnt_err *e);

/* The same on the len bytes of INI text at text (copied; need not end in
 * NUL), named name in messages where nnt_ini_load names the path. Relative
 * paths in it resolve against the model's base dir, as for a file. */
int nnt_ini_load_text(nnt_model *m, const char *name, const char *text, size_t len,
                      const char *const *overrides, size_t n_overrides, nnt_err *e);

#endif
