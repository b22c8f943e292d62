/* The model: layers, optimizer, datasets and [Model] properties, built the
 * same way by the INI loader and by the C API; then compiled into a graph,
 * initialized (weights allocated), trained, saved and loaded. */
#ifndef NNT_MODEL_H
#define NNT_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "nntrainer/common.h"
#include "nntrainer/layer.h"
#include "nntrainer/dataset.h"
#include "nntrainer/optimizer.h"

typedef struct nnt_model nnt_model;

typedef enum nnt_ds_mode {
  NNT_DS_TRAIN = 0,
  NNT_DS_VALID = 1,
  NNT_DS_TEST = 2,
} nnt_ds_mode;

int nnt_model_create(nnt_model **out, nnt_err *e);
/* Destroys everything the model owns (layers, optimizer, datasets). */
void nnt_model_destroy(nnt_model *m);

/* [Model] keys: type, epochs, batch_size, loss, save_path, continue_train,
 * memory_optimization, clip_grad_by_norm; ours: seed, memory_planner,
 * memory_budget (bytes, K/M/G suffixes; planning a mode over it fails),
 * check_finite (default true: stop training on a value that is not finite).
 * Relative save_path resolves against the base dir (nnt_model_set_base_dir). */
int nnt_model_set_property(nnt_model *m, const char *key, const char *value,
                           nnt_err *e);
/* Folder that relative paths resolve against (the INI's folder). */
int nnt_model_set_base_dir(nnt_model *m, const char *dir, nnt_err *e);
const char *nnt_model_base_dir(const nnt_model *m);

/* Takes ownership of l on success. Names must be unique. */
int nnt_model_add_layer(nnt_model *m, nnt_layer *l, nnt_err *e);
/* Takes ownership of o on success (replacing an earlier optimizer). */
int nnt_model_set_optimizer(nnt_model *m, nnt_optimizer *o, nnt_err *e);
/* Takes ownership of ds on success (replacing an earlier one of the mode). */
int nnt_model_set_dataset(nnt_model *m, nnt_ds_mode mode, nnt_dataset *ds,
                          nnt_err *e);

/* Resolve the graph: realize activation/flatten/loss nodes, connect inputs,
 * sort, infer shapes, assign execution orders. */
int nnt_model_compile(nnt_model *m, nnt_err *e);
/* Allocate and initialize weights (or load them from save_path when it
 * exists and the model was loaded with weights / continue_train). On
 * error the model is compiled and not initialized, as before the call. */
int nnt_model_initialize(nnt_model *m, nnt_err *e);
/* Undo nnt_model_compile on a model not yet initialized: the graph goes,
 * the layers, optimizer, datasets and properties stay, so that compile can
 * run again (the C API compiles and initializes in one call, which must
 * leave the model as it was when initialize fails). */
void nnt_model_uncompile(nnt_model *m);

/* Progress of training, given to the callback after every batch and at the
 * end of every epoch. The library never prints; the CLI draws this. */
typedef struct nnt_progress {
  unsigned epoch, epochs;      /* 1-based */
  size_t batch, batches;       /* 1-based; batches is 0 when unknown */
  float loss;                  /* running mean training loss this epoch */
  float batch_loss;            /* the loss of the batch just trained */
  double samples_per_sec;
  double elapsed_s;
  int epoch_done;              /* 1 at the end of an epoch: fields below set */
  double step_ms;              /* mean time of a training step this epoch */
  float train_loss;
  int has_valid;
  float valid_loss, valid_accuracy;
} nnt_progress;
typedef void (*nnt_progress_cb)(const nnt_progress *p, void *user_data);

/* Train for the model's epochs. Stops with the dataset's error on failure;
 * with check_finite, NNT_ERR_RANGE at the first step where the loss, an
 * output, a gradient or a moving statistic is not finite, or before a
 * checkpoint with a weight that is not (the message names the epoch, the
 * iteration, the layer and the weight): no such gradient is applied and
 * no checkpoint is written after that step (train_check.c).
 * NNT_ERR_CANCELED after nnt_model_request_stop. */
int nnt_model_train(nnt_model *m, nnt_progress_cb cb, void *user_data,
                    nnt_err *e);
/* Ask nnt_model_train or nnt_model_evaluate, running in another thread or
 * calling a callback, to stop: it returns NNT_ERR_CANCELED after the step
 * in progress, or at once while it waits for data; the data producer
 * stops too. The weights are those of the last completed step and no
 * checkpoint is written for the epoch that was stopped. Only an atomic
 * store: safe from any thread, any callback and a signal handler. The
 * request stands until a train or evaluate returns, so one made while
 * none runs stops the next one before its first step. */
void nnt_model_request_stop(nnt_model *m);
/* Forget a stop request not acted on yet. */
void nnt_model_clear_stop(nnt_model *m);
/* Loss and accuracy (argmax of output vs argmax of label) over a dataset. */
int nnt_model_evaluate(nnt_model *m, nnt_ds_mode mode, float *loss,
                       float *accuracy, nnt_err *e);

/* Weight file: NNTrainer's format (docs/weights.md), saved atomically
 * (nnt_file_save). with_state adds, after the weights, Adam's tag and
 * moments (for an adam optimizer) and the epoch and iteration counters.
 * Weights or moments that are not finite are not written: the file on disk
 * stays as it was. */
int nnt_model_save_weights(nnt_model *m, const char *path, int with_state,
                           nnt_err *e);
/* Load a weight file of exactly one of this model's layouts; anything else
 * (another model's file, trailing bytes, values that are not finite,
 * counters no run writes, a path that is not a regular file) is refused
 * with the model unchanged. On success the model holds the file's weights,
 * its Adam moments (zero when the file has none) and its counters (zero
 * when it has none). */
int nnt_model_load_weights(nnt_model *m, const char *path, nnt_err *e);

/* Transfer learning: copy the weights of the named layers from src to dst,
 * both initialized. Each layer must exist in both with the same weights
 * (names and shapes); all are checked before any is copied. The copied
 * weights' optimizer state in dst restarts from zero. A layer without
 * weights copies nothing. The copy can be taken and put in two steps
 * (for callers that must not hold both models at once). */
int nnt_model_copy_layer_weights(nnt_model *dst, nnt_model *src, const char *const *layers,
                                 size_t n, nnt_err *e);
typedef struct nnt_wcopy nnt_wcopy;
int nnt_model_weights_take(nnt_model *src, const char *const *layers, size_t n,
                           nnt_wcopy **out, nnt_err *e);
int nnt_model_weights_put(nnt_model *dst, const nnt_wcopy *c, nnt_err *e);
void nnt_wcopy_free(nnt_wcopy *c);

/* Read-only views for summary and tests. */
unsigned nnt_model_epochs(const nnt_model *m);
unsigned nnt_model_batch_size(const nnt_model *m);
size_t nnt_model_layer_count(const nnt_model *m);       /* as added */
nnt_layer *nnt_model_layer_at(nnt_model *m, size_t i);
nnt_layer *nnt_model_find_layer(nnt_model *m, const char *name);
/* Rename a layer the model owns; the name must stay unique. On error the
 * layer keeps its name. */
int nnt_model_rename_layer(nnt_model *m, nnt_layer *l, const char *name, nnt_err *e);
nnt_optimizer *nnt_model_optimizer(nnt_model *m);
/* Give back the optimizer (or a mode's dataset) without destroying it: the
 * caller owns what is returned (NULL when none). */
nnt_optimizer *nnt_model_detach_optimizer(nnt_model *m);
nnt_dataset *nnt_model_detach_dataset(nnt_model *m, nnt_ds_mode mode);
int nnt_model_is_compiled(const nnt_model *m);
int nnt_model_is_initialized(const nnt_model *m);
/* Shapes (with the batch) of the model's inputs and outputs after compile;
 * at most max; @return how many there are. The outputs are what the last
 * layers give before any loss: for a softmax cross-entropy loss, the
 * probabilities. */
unsigned nnt_model_input_dims(const nnt_model *m, nnt_dim *dims, unsigned max);
unsigned nnt_model_output_dims(const nnt_model *m, nnt_dim *dims, unsigned max);
/* Forward on given inputs (one array of batch samples per model input) in
 * inference mode; copy the outputs (as nnt_model_output_dims) to out[]. */
int nnt_model_infer(nnt_model *m, const float *const *in, float *const *out, nnt_err *e);
/* The layer table: the layers as added before compile; after it the
 * compiled nodes with shapes and parameter counts. verbosity 1 adds each
 * layer's properties, 2 its weights. */
void nnt_model_print_summary(FILE *out, nnt_model *m, int verbosity);
/* "12.3 KiB" style. */
const char *nnt_bytes_str(size_t b, char *buf, size_t n);
/* Write the model's configuration as an INI file, saved atomically
 * (nnt_file_save). bin_path, when not NULL, becomes [Model] save_path. Layers
 * carry the properties they were given; datasets are not written. */
int nnt_model_save_ini(nnt_model *m, const char *path, const char *bin_path, nnt_err *e);
nnt_dataset *nnt_model_dataset(nnt_model *m, nnt_ds_mode mode);

#endif
