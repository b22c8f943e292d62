/* The INI loader: NNTrainer's format, turned into model builder calls. */
#ifndef NNT_INI_H
#define NNT_INI_H

#include <stddef.h>
#include "nntrainer/model.h"

/* Load the INI at path into m (fresh from nnt_model_create). overrides are
 * n strings "section.key=value" or "key=value" (meaning [Model]), applied
 * over the file's values before they are read; an override naming a section
 * the file lacks is an error. Relative paths resolve against the base dir
 * set with nnt_model_set_base_dir (the CLI sets the INI's folder). Errors
 * read "<file>: [<section>] <key>: <what>". */
int nnt_ini_load(nnt_model *m, const char *path, const char *const *overrides,
                 size_t n_overrides, nnt_err *e);

#endif
