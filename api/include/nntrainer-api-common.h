/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nntrainer-api-common.h: the enumerations and the data generator callback of
 * the Tizen ML Training API, with the names and values the Tizen API gives
 * them. Included by nntrainer.h.
 */
#ifndef __TIZEN_MACHINELEARNING_NNTRAINER_API_COMMON_H__
#define __TIZEN_MACHINELEARNING_NNTRAINER_API_COMMON_H__

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Layer types. nntrainer implements input, fc, bn, conv2d, pooling2d,
 * flatten, activation, addition, concat, multiout, split, permute, dropout,
 * conv1d, identity and the three loss layers; creating another type gives
 * ML_ERROR_NOT_SUPPORTED. */
typedef enum {
  ML_TRAIN_LAYER_TYPE_INPUT = 0,
  ML_TRAIN_LAYER_TYPE_FC = 1,
  ML_TRAIN_LAYER_TYPE_BN = 2,
  ML_TRAIN_LAYER_TYPE_CONV2D = 3,
  ML_TRAIN_LAYER_TYPE_POOLING2D = 4,
  ML_TRAIN_LAYER_TYPE_FLATTEN = 5,
  ML_TRAIN_LAYER_TYPE_ACTIVATION = 6,
  ML_TRAIN_LAYER_TYPE_ADDITION = 7,
  ML_TRAIN_LAYER_TYPE_CONCAT = 8,
  ML_TRAIN_LAYER_TYPE_MULTIOUT = 9,
  ML_TRAIN_LAYER_TYPE_EMBEDDING = 10,
  ML_TRAIN_LAYER_TYPE_RNN = 11,
  ML_TRAIN_LAYER_TYPE_LSTM = 12,
  ML_TRAIN_LAYER_TYPE_SPLIT = 13,
  ML_TRAIN_LAYER_TYPE_GRU = 14,
  ML_TRAIN_LAYER_TYPE_PERMUTE = 15,
  ML_TRAIN_LAYER_TYPE_DROPOUT = 16,
  ML_TRAIN_LAYER_TYPE_BACKBONE_NNSTREAMER = 17,
  ML_TRAIN_LAYER_TYPE_CENTROID_KNN = 18,
  ML_TRAIN_LAYER_TYPE_CONV1D = 19,
  ML_TRAIN_LAYER_TYPE_LSTMCELL = 20,
  ML_TRAIN_LAYER_TYPE_GRUCELL = 21,
  ML_TRAIN_LAYER_TYPE_RNNCELL = 22,
  ML_TRAIN_LAYER_TYPE_ZONEOUTLSTMCELL = 23,
  ML_TRAIN_LAYER_TYPE_ATTENTION = 24,
  ML_TRAIN_LAYER_TYPE_MOL_ATTENTION = 25,
  ML_TRAIN_LAYER_TYPE_MULTI_HEAD_ATTENTION = 26,
  ML_TRAIN_LAYER_TYPE_LAYER_NORMALIZATION = 27,
  ML_TRAIN_LAYER_TYPE_POSITIONAL_ENCODING = 28,
  ML_TRAIN_LAYER_TYPE_IDENTITY = 29,
  ML_TRAIN_LAYER_TYPE_SWIGLU = 30,
  ML_TRAIN_LAYER_TYPE_WEIGHT = 31,
  ML_TRAIN_LAYER_TYPE_ADD = 32,
  ML_TRAIN_LAYER_TYPE_SUBTRACT = 33,
  ML_TRAIN_LAYER_TYPE_MULTIPLY = 34,
  ML_TRAIN_LAYER_TYPE_DIVIDE = 35,
  ML_TRAIN_LAYER_TYPE_TRANSPOSE = 36,
  ML_TRAIN_LAYER_TYPE_CONV2D_TRANSPOSE = 37,
  ML_TRAIN_LAYER_TYPE_POW = 38,
  ML_TRAIN_LAYER_TYPE_TENSOR = 39,
  ML_TRAIN_LAYER_TYPE_REDUCE_MEAN = 51, /* NNTrainer's value (Since 10.0) */
  ML_TRAIN_LAYER_TYPE_PREPROCESS_FLIP = 300,
  ML_TRAIN_LAYER_TYPE_PREPROCESS_TRANSLATE = 301,
  ML_TRAIN_LAYER_TYPE_PREPROCESS_L2NORM = 302,
  ML_TRAIN_LAYER_TYPE_LOSS_MSE = 500,
  ML_TRAIN_LAYER_TYPE_LOSS_CROSS_ENTROPY_SIGMOID = 501,
  ML_TRAIN_LAYER_TYPE_LOSS_CROSS_ENTROPY_SOFTMAX = 502,
  ML_TRAIN_LAYER_TYPE_RMSNORM = 503,
  ML_TRAIN_LAYER_TYPE_UNKNOWN = 999
} ml_train_layer_type_e;

/* Optimizer types. */
typedef enum {
  ML_TRAIN_OPTIMIZER_TYPE_ADAM = 0,
  ML_TRAIN_OPTIMIZER_TYPE_ADAMW = 2,
  ML_TRAIN_OPTIMIZER_TYPE_SGD = 1,
  ML_TRAIN_OPTIMIZER_TYPE_UNKNOWN = 999
} ml_train_optimizer_type_e;

/* Learning-rate scheduler types. (nntrainer's linear scheduler has no value
 * here; the INI format reaches it.) */
typedef enum {
  ML_TRAIN_LR_SCHEDULER_TYPE_CONSTANT = 0,
  ML_TRAIN_LR_SCHEDULER_TYPE_EXPONENTIAL = 1,
  ML_TRAIN_LR_SCHEDULER_TYPE_STEP = 2,
  ML_TRAIN_LR_SCHEDULER_TYPE_COSINE = 3,
  ML_TRAIN_LR_SCHEDULER_TYPE_UNKNOWN = 999
} ml_train_lr_scheduler_type_e;

/* Fills one sample: input[i] holds input i of the model (c*h*w floats, in
 * the order the input layers were added), label[j] label j. Set *last to
 * true instead of giving a sample when the epoch is over (that call's data
 * are not used). Return 0, or a negative error that stops training with
 * that error. Called from a thread of the library, one call at a time. */
typedef int (*ml_train_datagen_cb)(float **input, float **label, bool *last,
                                   void *user_data);

/* Which part of training a dataset feeds. */
typedef enum {
  ML_TRAIN_DATASET_MODE_TRAIN = 0,
  ML_TRAIN_DATASET_MODE_VALID = 1,
  ML_TRAIN_DATASET_MODE_TEST = 2,
} ml_train_dataset_mode_e;

/* Summary verbosity. */
typedef enum {
  ML_TRAIN_SUMMARY_MODEL = 0,  /* one line per layer */
  ML_TRAIN_SUMMARY_LAYER = 1,  /* and the layers' properties */
  ML_TRAIN_SUMMARY_TENSOR = 2  /* and every weight */
} ml_train_summary_type_e;

/* What ml_train_model_save() writes and ml_train_model_load() reads. */
typedef enum {
  ML_TRAIN_MODEL_FORMAT_BIN = 0,          /* weights (NNTrainer's .bin) */
  ML_TRAIN_MODEL_FORMAT_INI = 1,          /* the configuration */
  ML_TRAIN_MODEL_FORMAT_INI_WITH_BIN = 2, /* configuration naming a .bin */
  ML_TRAIN_MODEL_FORMAT_FLATBUFFER = 3    /* not supported */
} ml_train_model_format_e;

#ifdef __cplusplus
}
#endif
#endif /* __TIZEN_MACHINELEARNING_NNTRAINER_API_COMMON_H__ */
