/* Helpers shared by the cmocka tests. */
#ifndef NNT_TEST_UTIL_H
#define NNT_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "nntrainer/common.h"
#include "nntrainer/compute/backend.h"
#include "nntrainer/dataset.h"

/* Fill with uniform values in [lo, hi) from a seeded rng. */
void tu_fill_uniform(nnt_rng *r, float *x, size_t n, float lo, float hi);
/* n uniform values in [lo, hi) in a malloc'd array (at least one float). */
float *tu_rand(nnt_rng *r, size_t n, float lo, float hi);
/* A malloc'd copy of n floats; n zeroed doubles (calloc). */
float *tu_dup(const float *x, size_t n);
double *tu_dzeros(size_t n);
/* Fails the test ("<what>[i]: got, expected want") unless every
 * |got - want| <= tol * max(1, |want|); tu_expect1 for one value. */
void tu_expect_vs(const char *what, const float *got, const double *want, size_t n,
                  double tol);
void tu_expect1(const char *what, double got, double want, double tol);
/* max |a - b| / max(1, |b|) over n values. */
double tu_max_rel_err(const float *a, const float *b, size_t n);
/* Fails the test ("<label>: max relative error E > tol", the label
 * formatted like printf) when tu_max_rel_err(got, want, n) > tol. */
void tu_expect_close(const float *got, const float *want, size_t n, double tol,
                     const char *fmt, ...);
/* test/golden/layers/<name>.bin (gen_layers.py) as tu_read_floats reads it. */
float *tu_golden_layer(const char *name, size_t *n);
/* Read a whole file of little-endian float32; returns a malloc'd array and
 * its length in *n, or NULL (and fails the test) if it cannot be read. */
float *tu_read_floats(const char *path, size_t *n);
/* Path under test/ (NNT_TEST_DATA_DIR) formatted like printf, static buffer. */
const char *tu_data_path(const char *fmt, ...);
/* A fresh temporary directory (removed by tu_rmdir). */
char *tu_mkdtemp(void);
void tu_rmdir(const char *dir);
/* A fresh temporary folder for each test of a file that gives these as
 * its cmocka setup and teardown. */
extern char *tu_dir;
int tu_dir_setup(void **state);
int tu_dir_teardown(void **state);
/* Write n bytes to tu_dir/name (fails the test when it cannot); @return the
 * path, in a static buffer. tu_write_text writes a string. */
const char *tu_write(const char *name, const void *data, size_t n);
const char *tu_write_text(const char *name, const char *text);
/* Run the nntrainer tool in tu_dir with args and the environment
 * assignments env ("" for none); capture stdout and stderr into out;
 * @return the exit code (-1 when it did not exit). */
int tu_run_cli_env(const char *env, const char *args, char *out, size_t n);
int tu_run_cli(const char *args, char *out, size_t n);
/* The CLI's "on <device>: D device, H host" (nnt_bytes_str figures) in
 * bytes; *slack is the most the printed rounding may hide. Fails the test
 * when out has no such phrase. */
void tu_cli_memory(const char *out, double *device, double *host, double *slack);
/* The number after "key": in the JSON text out; fails the test if none. */
size_t tu_json_size(const char *out, const char *key);
/* Log messages captured through nnt_log_set: tu_log_start clears the
 * record and installs the capture, tu_log_stop removes it and sets the
 * level back to notice. All messages are counted, the first TU_LOG_MAX
 * kept. */
#define TU_LOG_MAX 32
typedef struct tu_log {
  int n;
  int level[TU_LOG_MAX];
  char msg[TU_LOG_MAX][NNT_LOG_MSG_MAX];
} tu_log;
extern tu_log tu_logged;
void tu_log_start(void);
void tu_log_stop(void);
/* Print the kept messages (to explain a failure). */
void tu_log_print(void);
/* The one kept message at level containing a, b and c (c may be NULL);
 * fails the test when there is none or more than one. */
const char *tu_log_expect(int level, const char *a, const char *b, const char *c);
/* How many kept messages have level. */
int tu_log_count(int level);

/* Training against golden steps. steps holds per step the loss, then the
 * weight pool's wfloats floats; tu_watch_cb (a training progress callback,
 * ud a tu_watch) keeps the worst relative error of each (tu_max_rel_err's
 * measure) and counts the steps. */
typedef struct nnt_model nnt_model;
struct nnt_progress;
typedef struct tu_watch {
  nnt_model *m;
  const float *steps;
  size_t wfloats;
  unsigned step;
  double worst_w, worst_loss;
} tu_watch;
void tu_watch_cb(const struct nnt_progress *p, void *ud);
/* The model of test/golden/training/<name>/model.ini (INI overrides as
 * nnt_ini_load takes them), its folder the base directory, compiled and
 * initialized, init.bin loaded; fails the test on any error. */
nnt_model *tu_golden_model(const char *name, const char *const *overrides, size_t n_over);
/* Train m (from tu_golden_model) one epoch and check the loss and every
 * weight after each step against losses.bin and step_<k>.bin of
 * test/golden/training/<name>: as many steps as losses, each within a
 * relative error of 1e-5. */
void tu_golden_train(nnt_model *m, const char *name);

/* A new model whose base directory is the folder of the INI at path (the
 * INI is not loaded). */
nnt_model *tu_model_for_ini(const char *path);
/* Add to m a layer from a table row of n strings: type, name, then key,
 * value pairs up to a NULL or the row's end; every call is asserted to
 * succeed (e receives the messages). */
void tu_add_layer(nnt_model *m, const char *const *row, size_t n, nnt_err *e);
/* The loss values a plan holds (its tensors named "<layer>:loss0"), and
 * the loss layers of a model. */
struct nnt_mgr;
unsigned tu_loss_tensors(const struct nnt_mgr *g);
unsigned tu_loss_nodes(const nnt_model *m);
/* Central difference of m's training-mode forward loss (nnt_model_forward)
 * in x[j], a host float the forward reads: (J(x[j] + eps) - J(x[j] - eps))
 * / 2 eps in double, x[j] put back after. */
double tu_model_fd(nnt_model *m, float *x, size_t j, float eps);
/* Every weight of m, read through its buffer (nnt_tensor_get) in weight
 * order, into a malloc'd array of m->wpool_floats floats. */
float *tu_weights_of(nnt_model *m);
/* The model of the INI text ini (written as file name in the test's
 * folder) with 8 synthetic training samples of 5 classes, compiled,
 * initialized and planned for training: on the fake device where fake,
 * with memory_optimization=false where unoptimized, reruns within
 * rerun_share of the forward's FLOPs (0: the default), and every tensor
 * poisoned once its lifetime ends (a step that read one past its end would
 * change the weights). Fails the test on an error. */
nnt_model *tu_load_poisoned(const char *name, const char *ini, int fake, int unoptimized,
                            double rerun_share);
/* Every weight of the layer named name set to 3e38 (finite): its output
 * w x + b overflows wherever an input is above about 0.14. */
void tu_overflow_weights(nnt_model *m, const char *name);
/* The node of m's compiled graph running the layer named name (exactly);
 * fails the test when there is none. */
const struct nnt_node *tu_node(const nnt_model *m, const char *name);
/* The training schedule's first step of kind (an nnt_step_kind) for the
 * layer named name; fails the test when there is none. */
unsigned tu_step_of(const nnt_model *m, const char *name, int kind);
/* Fails the test when be is a Vulkan backend whose validation record holds
 * a message (each instance has its own record, gone with the instance), so
 * every test checks its own instance before it frees it. Any other backend
 * passes. */
void tu_assert_validation_silent(const nnt_backend *be);
/* tu_assert_validation_silent, then nnt_backend_free. */
void tu_backend_free_checked(nnt_backend *be);
/* A new GPU backend instance (the test fails when there is none). */
nnt_backend *tu_gpu(void);
/* Keep Mesa's lavapipe loaded until exit (a no-op without Vulkan): it
 * leaks a little on its own, which test/lsan-vulkan.supp suppresses by its
 * name, but the loader unloads it with the last device and LeakSanitizer
 * cannot name a library gone before exit. Call before the first device. */
void tu_keep_vulkan_driver(void);
/* The whole of a Vulkan test program in a build without Vulkan: that
 * engine=gpu is refused, saying why. */
int tu_main_without_vulkan(void);
/* tu_assert_validation_silent on m's backend, then nnt_model_destroy. */
void tu_model_destroy_checked(nnt_model *m);
/* A whole file into a malloc'd array, its size in *n; fails the test when
 * it cannot be read. */
unsigned char *tu_file_bytes(const char *path, size_t *n);
/* Fails the test unless files a and b hold the same bytes. */
void tu_assert_same_file(const char *a, const char *b);
/* tu_dir/name, in one of 4 static buffers used in turn. */
const char *tu_path_in(const char *name);
/* Call fn(path, ud) for every .ini file under Applications/ and
 * benchmarks/models/ of the source tree (folders walked recursively,
 * dot-names skipped); @return how many. */
size_t tu_each_app_ini(void (*fn)(const char *path, void *ud), void *ud);

/* Two compute threads, the pool's workers started as a model's run starts
 * them (nnt_cpu_set_threads alone leaves ops on the calling thread), and
 * back to one; tu_one_thread returns how many jobs the ops in between
 * split over the workers. */
void tu_two_threads(void);
unsigned long tu_one_thread(void);

/* Assert that an error message contains a substring, printing both. */
#define tu_assert_contains(haystack, needle)                                   \
  do {                                                                         \
    if (!strstr((haystack), (needle)))                                         \
      fail_msg("expected '%s' in message: %s", (needle), (haystack));          \
  } while (0)

/* Datasets: a shape of one input stream of `in` floats and one label
 * stream of `lab`; the next batch copied into in/lab (1 when one was
 * copied, 0 at the end of the epoch, or the error code, with *end agreeing);
 * an IDX file (the header of type and dims, then n bytes; gzip or not). */
nnt_ds_shape tu_ds_shape1(size_t in, size_t lab);
int tu_ds_next(nnt_dataset *d, float **in, float **lab, nnt_err *e);
void tu_write_idx(const char *path, int gz, uint8_t type, const uint32_t *dims, int nd,
                  const void *data, size_t n);

#endif
