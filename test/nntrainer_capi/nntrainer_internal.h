/* Stand-in for NNTrainer's private header nntrainer_internal.h, so that
 * NNTrainer's Tizen C API tests (test/tizen_capi in its repository) build
 * against this library: the tests use only the public API, the Tizen
 * feature switch (meaningless here: a no-op) and an error log macro.
 * Used only when NNTrainer's C API tests are built against this library
 * (docs/capi.md); not part of the library. */
#ifndef NNT_CAPI_SHIM_INTERNAL_H
#define NNT_CAPI_SHIM_INTERNAL_H

#include <cstdio>

#include <nntrainer.h>

/* Tizen's feature check does not exist here: setting its state does nothing
 * (the arguments, ML_FEATURE and the like, vanish with the call). */
#define set_feature_state(...) ((void)0)

/* One line on stderr. */
#define ml_loge(...) (std::fprintf(stderr, __VA_ARGS__), (void)std::fputc('\n', stderr))

#endif
