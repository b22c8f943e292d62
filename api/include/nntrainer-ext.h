/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nntrainer-ext.h: what nntrainer offers beyond the Tizen ML Training API.
 * These functions are nntrainer's own (the ml_train_ext_ prefix says so);
 * an application that must also build against Tizen's library keeps them
 * behind its own #ifdef.
 */
#ifndef NNTRAINER_EXT_H
#define NNTRAINER_EXT_H

#include <nntrainer.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Codes that ml_train_model_run() and ml_train_ext_model_run_with_progress()
 * return beyond Tizen's ml_error_e (values of -ERANGE and -ECANCELED). */
enum {
  /* a loss, layer output, gradient, moving statistic or weight was NaN or
   * infinite; the model property check_finite=false turns the check off */
  ML_TRAIN_EXT_ERROR_NOT_FINITE = -34,
  /* the run was stopped by ml_train_ext_model_stop() */
  ML_TRAIN_EXT_ERROR_CANCELED = -125,
};

/* Which plan a memory report describes. */
typedef enum {
  ML_TRAIN_EXT_MODE_TRAIN = 0, /* forward and backward */
  ML_TRAIN_EXT_MODE_INFER = 1, /* forward only: no labels, no loss values */
  ML_TRAIN_EXT_MODE_EVAL = 2,  /* forward with the labels and loss values
                                  (evaluation outside a training run) */
} ml_train_ext_mode_e;

/* Codes for ml_train_model_get_summary() beyond Tizen's verbosities, with
 * NNTrainer's values: the last epoch trained by the runs so far, printed as
 * a number and a newline ("0" before any): its training loss, and its
 * validation loss and accuracy (in percent) when a valid set was given. */
#define ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS ((ml_train_summary_type_e)101)
#define ML_TRAIN_EXT_SUMMARY_VALID_LOSS ((ml_train_summary_type_e)102)
#define ML_TRAIN_EXT_SUMMARY_VALID_ACCURACY ((ml_train_summary_type_e)103)

/* The planned memory of a compiled model, in bytes. */
typedef struct {
  size_t weight_bytes;       /* weights, allocated at compile */
  size_t optimizer_bytes;    /* optimizer state (train mode; 0 in infer) */
  size_t gradient_bytes;     /* the arena's tensors by kind, summed before */
  size_t activation_bytes;   /*   sharing: what sharing saves is the gap */
  size_t derivative_bytes;   /*   between their sum and arena_bytes */
  size_t scratch_bytes;
  size_t input_bytes;        /* inputs and labels */
  size_t arena_bytes;        /* the planned arena */
  size_t lower_bound_bytes;  /* the most bytes live at one execution order */
  size_t total_bytes;        /* weights + optimizer + arena */
  double planning_ms;
} ml_train_ext_memory_report_s;

/* Report the plan of a mode after compile. A mode not planned yet is
 * planned for the report, without allocating its arena, and the plan is
 * dropped again. */
int ml_train_ext_model_get_memory_report(ml_train_model_h model,
                                         ml_train_ext_mode_e mode,
                                         ml_train_ext_memory_report_s *report);

/* One tensor live at the peak of a plan. */
typedef struct {
  char name[160];   /* "layer:out0", "layer:grad0", "model:input0" ... */
  const char *kind; /* "activation", "derivative", "gradient", "scratch",
                       "input" or "label" (a string of the library's) */
  size_t bytes;
} ml_train_ext_memory_tensor_s;

/* Where the plan of a mode peaks: the step of its schedule at which the
 * most bytes are live, what runs there and what is live there, in bytes. */
typedef struct {
  unsigned int step;       /* the step's index in the mode's schedule; equal
                              to steps when the peak is after the last step
                              (the loss values are read there) */
  unsigned int steps;      /* the number of steps of the schedule */
  const char *step_kind;   /* "forward", "calc_gradient", "calc_derivative",
                              "apply_gradient", ...; "none" past the end (a
                              string of the library's) */
  char layer[128];         /* the layer the step runs; "" when none */
  size_t weight_bytes;     /* live at every step: the weights and, in train */
  size_t optimizer_bytes;  /*   mode, the optimizer state */
  size_t gradient_bytes;   /* the arena's tensors live at the step, by kind */
  size_t activation_bytes;
  size_t derivative_bytes;
  size_t scratch_bytes;    /* scratch and the loss values */
  size_t input_bytes;      /* the model's inputs */
  size_t label_bytes;      /* the labels */
  size_t live_bytes;       /* their sum: the report's lower_bound_bytes */
  size_t total_bytes;      /* live_bytes + weight_bytes + optimizer_bytes */
  unsigned int n_largest;  /* the largest tensors live there, largest first */
  ml_train_ext_memory_tensor_s largest[8];
} ml_train_ext_memory_peak_s;

/* Report where the plan of a mode peaks, after compile. A mode not planned
 * yet is planned for the report and its arena released again, as
 * ml_train_ext_model_get_memory_report() does. */
int ml_train_ext_model_get_memory_peak(ml_train_model_h model, ml_train_ext_mode_e mode,
                                       ml_train_ext_memory_peak_s *peak);

/* Choose the planner before compile: "best_fit" (default), "pool" or
 * "basic" (the same as the memory_planner model property). */
int ml_train_ext_model_set_planner(ml_train_model_h model, const char *planner);

/* The names of the model's layers in the order they were added, as one
 * allocation: a NULL-ended array of strings; release it with one free(). */
int ml_train_ext_model_get_layer_names(ml_train_model_h model, char ***names);

/* Progress of ml_train_ext_model_run_with_progress(), after every batch
 * and at the end of every epoch. */
typedef struct {
  unsigned int epoch, epochs;    /* 1-based */
  size_t batch, batches;         /* 1-based; batches 0 when unknown */
  float loss;                    /* mean training loss of the epoch so far */
  float batch_loss;              /* the loss of the batch just trained */
  int epoch_done;                /* 1 at the end of an epoch: then */
  float valid_loss, valid_accuracy; /* set when has_valid */
  int has_valid;
  double step_ms;                /* mean step time of the epoch */
} ml_train_ext_progress_s;

typedef void (*ml_train_ext_progress_cb)(const ml_train_ext_progress_s *progress,
                                         void *user_data);

/* ml_train_model_run() with a progress callback, called in the thread that
 * runs (it may not call into this model, except ml_train_ext_model_stop()).
 * Properties NULL-ended. */
int ml_train_ext_model_run_with_progress(ml_train_model_h model,
                                         ml_train_ext_progress_cb cb,
                                         void *user_data, ...);

/* Stop the run in progress on model (ml_train_model_run() or
 * ml_train_ext_model_run_with_progress()) from another thread, from its
 * progress callback or from its data generator callback: the run returns
 * ML_TRAIN_EXT_ERROR_CANCELED after the step in progress (or at once while
 * it waits for data). It keeps the weights of its last completed step and
 * writes no checkpoint for the epoch it stopped in. Never refused while
 * the model runs and never waits for it. With no run in progress it does
 * nothing and returns ML_ERROR_NONE; a later run is not affected. */
int ml_train_ext_model_stop(ml_train_model_h model);

/* Inference on given inputs, after compile: input holds one tensor per
 * model input of batch_size samples each (float32, as
 * ml_train_model_get_input_tensors_info() describes); *output gets new data
 * with one tensor per model output (destroy it after use). */
int ml_train_ext_model_infer(ml_train_model_h model, const ml_tensors_data_h input,
                             ml_tensors_data_h *output);

/* Which tensor of a layer to read. */
typedef enum {
  ML_TRAIN_EXT_TENSOR_OUTPUT = 0,     /* the layer's output index */
  ML_TRAIN_EXT_TENSOR_DERIVATIVE = 1, /* d loss / d output index */
  ML_TRAIN_EXT_TENSOR_GRADIENT = 2,   /* d loss / d weight index */
} ml_train_ext_tensor_e;

/* A copy of a layer's tensor from the last training step; the model must
 * have been compiled with memory_optimization=false (otherwise tensors share
 * memory and their values are gone): ML_ERROR_NOT_SUPPORTED. */
int ml_train_ext_model_get_layer_tensor(ml_train_model_h model,
                                        const char *layer_name,
                                        ml_train_ext_tensor_e what,
                                        unsigned int index,
                                        ml_tensors_data_h *data,
                                        ml_tensors_info_h *info);

/* Levels of the library's log messages, least important first. */
typedef enum {
  ML_TRAIN_EXT_LOG_DEBUG = 0,   /* for developers */
  ML_TRAIN_EXT_LOG_INFO = 1,    /* what the library did; nothing to act on */
  ML_TRAIN_EXT_LOG_NOTICE = 2,  /* a documented choice of nntrainer's, such as
                                   a default that differs from NNTrainer's,
                                   taken because a key was not given */
  ML_TRAIN_EXT_LOG_WARNING = 3, /* something given is ignored or looks wrong */
} ml_train_ext_log_level_e;

/* Receives one message: its level (an ml_train_ext_log_level_e value), the
 * text (one line without a newline, valid only during the call) and the
 * user_data given with the callback. */
typedef void (*ml_train_ext_log_cb)(int level, const char *message, void *user_data);

/* The library never prints; it hands its messages to this callback, one
 * for the whole process. cb NULL removes it (the default: nothing is
 * printed). Calls are serialized: the callback runs in the thread that
 * logs, one call at a time, and may itself log or call this function.
 * When this returns, the previous callback is not running in any other
 * thread and will not be called again, so its user_data may be freed.
 * @return ML_ERROR_NONE. */
int ml_train_ext_set_log_callback(ml_train_ext_log_cb cb, void *user_data);

/* Only messages at min_level and above reach the callback; the default is
 * ML_TRAIN_EXT_LOG_NOTICE (notices and warnings). Process-wide.
 * @return ML_ERROR_NONE, or ML_ERROR_INVALID_PARAMETER for a level that is
 * not an ml_train_ext_log_level_e value. */
int ml_train_ext_set_log_level(ml_train_ext_log_level_e min_level);

/* Transfer learning: copy the weights of the layers named in layer_names
 * (a NULL-ended array) from the compiled model src into the compiled model
 * dst. Each layer must exist in both models with the same weights, the
 * same shapes, except that a fully_connected layer with LoRA factors
 * (lora_rank) in dst takes the weight and bias of the same layer without
 * them in src, its factors keeping their values: a LoRA model starts from
 * its base model so. All are checked before any is copied, so on error dst
 * is unchanged. The copied weights' optimizer state in dst restarts from zero;
 * a layer without weights copies nothing. This is how a model takes the
 * layers of another one of a different shape (a new head on the features of
 * a base model): ml_train_model_load() accepts only a weight file of the
 * model's own shape. The base model can come from its INI file
 * (ml_train_model_construct_with_conf, compile, ml_train_model_load) or be
 * built with the API. @return ML_ERROR_NONE, ML_ERROR_INVALID_PARAMETER (a
 * NULL or empty list, a model not compiled, a layer missing in either, a
 * shape that differs, a weight of src that is not finite),
 * ML_ERROR_TRY_AGAIN (either model is training). */
int ml_train_ext_model_copy_layer_weights(ml_train_model_h dst, ml_train_model_h src,
                                          const char *const *layer_names);

#ifdef __cplusplus
}
#endif
#endif /* NNTRAINER_EXT_H */
