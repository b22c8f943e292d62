/* The fuzz targets: plain C functions from bytes to an outcome, run by
 * libFuzzer (libfuzzer_main.c, clang) and by the replay test
 * (test/unit/test_fuzz_replay.c, any compiler) over the seed corpora and
 * the regression files. docs/fuzzing.md describes each input format.
 *
 * A target returns NNT_FUZZ_ACCEPTED when the library took the input all
 * the way (loaded, trained a step, read every batch), NNT_FUZZ_REFUSED when
 * it refused it with an error code and a message. When the library breaks a
 * promise that the sanitizers cannot see (an error without a message, a
 * refused weight file that changed the model, a batch that is not the
 * file's data, a saved file that does not load back), the target calls
 * nnt_fuzz_fail, which prints the reason and aborts: libFuzzer reports it
 * as a crash and the replay test dies with the message. */
#ifndef NNT_FUZZ_H
#define NNT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "nntrainer/common.h"

enum { NNT_FUZZ_REFUSED = 0, NNT_FUZZ_ACCEPTED = 1 };

typedef int (*nnt_fuzz_fn)(const uint8_t *data, size_t size);

/* INI text, loaded, compiled, initialized, trained one step (fuzz_ini.c). */
int nnt_fuzz_ini(const uint8_t *data, size_t size);
/* A model selector byte, then a .bin loaded into that fixed model
 * (fuzz_weights.c). */
int nnt_fuzz_weights(const uint8_t *data, size_t size);
/* IDX images and labels, gzip or plain, through prepare and the batches
 * (fuzz_idx.c). */
int nnt_fuzz_idx(const uint8_t *data, size_t size);
/* NNTrainer's raw data file, through prepare and the batches
 * (fuzz_rawfile.c). */
int nnt_fuzz_rawfile(const uint8_t *data, size_t size);
/* A script of C API calls with property strings (fuzz_capi.c). */
int nnt_fuzz_capi(const uint8_t *data, size_t size);

typedef struct nnt_fuzz_target {
  const char *name; /* the folder under test/fuzz/corpus and test/fuzz/regress */
  nnt_fuzz_fn fn;
} nnt_fuzz_target;
extern const nnt_fuzz_target nnt_fuzz_targets[];
extern const size_t nnt_fuzz_n_targets;

/* ---- shared by the targets (fuzz_util.c) ---- */

/* Once per process: one BLAS thread, no log callback. */
void nnt_fuzz_init(void);

/* A private folder for the files a target writes, made on first use and
 * removed at exit: under $NNT_FUZZ_TMPDIR, else /dev/shm (saves sync their
 * files, which costs nothing in memory), else $TMPDIR or /tmp. */
const char *nnt_fuzz_tmpdir(void);
/* tmpdir/name, in a buffer of the caller's. */
const char *nnt_fuzz_path(char *buf, size_t n, const char *name);
/* Write n bytes to path (replacing it); aborts on failure, which is the
 * machine's, not the library's. */
void nnt_fuzz_write(const char *path, const void *data, size_t n);
/* The same, gzip-compressed. */
void nnt_fuzz_write_gzip(const char *path, const void *data, size_t n);

/* Print "nnt_fuzz: <what>" and abort. */
void nnt_fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The promise every failing call keeps: rc is a negative error code, e
 * holds that code and a message. Aborts otherwise; returns rc. */
int nnt_fuzz_check_err(const char *call, int rc, const nnt_err *e);

#endif
