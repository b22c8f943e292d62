/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nntrainer.h: the Tizen ML Training C API (ml_train_*), as nntrainer
 * implements it. An application written against the Tizen API compiles
 * against this header unchanged and links with -lnntrainer.
 *
 * Every function returns ML_ERROR_NONE (0) or a negative ml_error_e; after a
 * failure ml_error() gives a message naming the argument, property or file
 * at fault. Nothing here prints or exits.
 *
 * Ownership: a layer, optimizer or dataset given to a model belongs to it
 * and is destroyed with it; destroying it yourself is then refused with
 * ML_ERROR_INVALID_PARAMETER. A learning-rate scheduler given to an
 * optimizer belongs to the optimizer likewise.
 *
 * Properties are "key=value" strings, case-insensitive keys, in a list
 * ended by NULL; one string may carry several separated by '|'
 * ("unit=10 | activation=relu"). The keys are those of the INI format
 * (docs/ini.md); the INI loader and these calls build the same model.
 *
 * Threads: calls on one model (and on the layers, optimizer, scheduler and
 * dataset it owns) from several threads are serialized. While
 * ml_train_model_run() trains a model, every other call on that model, from
 * any thread (its generator callbacks included), is refused at once with
 * ML_ERROR_TRY_AGAIN rather than waiting for training to end.
 */
#ifndef __TIZEN_MACHINELEARNING_NNTRAINER_H__
#define __TIZEN_MACHINELEARNING_NNTRAINER_H__

#include <stdbool.h>
#include <stddef.h>

#include <ml-api-common.h>
#include <nntrainer-api-common.h>

#ifndef TIZEN_DEPRECATED_API
#define TIZEN_DEPRECATED_API __attribute__((__visibility__("default"), deprecated))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef void *ml_train_model_h;
typedef void *ml_train_layer_h;
typedef void *ml_train_optimizer_h;
typedef void *ml_train_dataset_h;
typedef void *ml_train_lr_scheduler_h;

/* ---- model ---- */

/* An empty model; release it with ml_train_model_destroy(). */
int ml_train_model_construct(ml_train_model_h *model);

/* A model described by an INI file (NNTrainer's format): its layers,
 * optimizer, scheduler and datasets. Relative paths in the file resolve
 * against the file's folder. On error nothing is left to release. */
int ml_train_model_construct_with_conf(const char *model_conf,
                                       ml_train_model_h *model);

/* Set [Model] properties (loss, batch_size, epochs, ...; NULL-ended), then
 * compile the graph and allocate and initialize the weights. After it, the
 * model's layers, optimizer and dataset can no longer change. */
int ml_train_model_compile(ml_train_model_h model, ...);
/* The same with the properties in one '|'-separated string. */
int ml_train_model_compile_with_single_param(ml_train_model_h model,
                                             const char *single_param);

/* Set [Model] properties (epochs, batch_size, save_path, ...; NULL-ended)
 * and train; blocks until training, validation and saving to save_path are
 * done. A generator callback's error ends it with that error. */
int ml_train_model_run(ml_train_model_h model, ...);
int ml_train_model_run_with_single_param(ml_train_model_h model,
                                         const char *single_param);

/* Destroy the model and the layers, optimizer and dataset it owns. A short
 * call on the model in another thread is waited for; during
 * ml_train_model_run() it is refused with ML_ERROR_TRY_AGAIN. */
int ml_train_model_destroy(ml_train_model_h model);

/* A text summary of the model; release *summary with free(). verbosity is
 * an ml_train_summary_type_e or one of the metric codes of nntrainer-ext.h
 * (ML_TRAIN_EXT_SUMMARY_TRAIN_LOSS ...). */
int ml_train_model_get_summary(ml_train_model_h model,
                               ml_train_summary_type_e verbosity,
                               char **summary);

/* Append a layer; the model owns it from then on. Layer names must be
 * unique; an unnamed layer gets "<type><index>". After compile:
 * ML_ERROR_NOT_SUPPORTED. */
int ml_train_model_add_layer(ml_train_model_h model, ml_train_layer_h layer);

/* Set the optimizer; the model owns it. A previously set optimizer is given
 * back to the caller, who must destroy it. After compile:
 * ML_ERROR_NOT_SUPPORTED. */
int ml_train_model_set_optimizer(ml_train_model_h model,
                                 ml_train_optimizer_h optimizer);

/* Set the dataset; the model owns it. A previously set dataset is given
 * back to the caller, who must destroy it. After compile:
 * ML_ERROR_NOT_SUPPORTED. */
int ml_train_model_set_dataset(ml_train_model_h model,
                               ml_train_dataset_h dataset);

/* Shapes of the model's inputs and outputs after compile, as new handles
 * the caller destroys with ml_tensors_info_destroy(). Dimensions are given
 * as NNTrainer gives them: batch, channel, height, width. */
int ml_train_model_get_input_tensors_info(ml_train_model_h model,
                                          ml_tensors_info_h *info);
int ml_train_model_get_output_tensors_info(ml_train_model_h model,
                                           ml_tensors_info_h *info);

/* Save or load (after compile): BIN is the weights in NNTrainer's format
 * (with the optimizer state when there is one), written through a
 * temporary file so a failure leaves no half-written file; INI is the
 * configuration; INI_WITH_BIN the configuration and the weights beside it
 * (file_path with ".bin" for ".ini"). Load of INI or INI_WITH_BIN is done by
 * ml_train_model_construct_with_conf() instead: ML_ERROR_NOT_SUPPORTED. */
int ml_train_model_save(ml_train_model_h model, const char *file_path,
                        ml_train_model_format_e format);
int ml_train_model_load(ml_train_model_h model, const char *file_path,
                        ml_train_model_format_e format);

/* The handle of the layer named layer_name (added through the API or read
 * from an INI), owned by the model. */
int ml_train_model_get_layer(ml_train_model_h model, const char *layer_name,
                             ml_train_layer_h *layer);

/* Copies of the weights of a layer (after compile) and their shapes, in
 * NNTrainer's weight order; destroy both handles after use. */
int ml_train_model_get_weight(ml_train_model_h model, const char *layer_name,
                              ml_tensors_data_h *weight,
                              ml_tensors_info_h *info);

/* ---- layer ---- */

/* A layer of the type; ML_ERROR_NOT_SUPPORTED for a type nntrainer lacks. */
int ml_train_layer_create(ml_train_layer_h *layer, ml_train_layer_type_e type);
/* Refused with ML_ERROR_INVALID_PARAMETER once the layer is in a model. */
int ml_train_layer_destroy(ml_train_layer_h layer);
/* NULL-ended "key=value" strings. An unknown key or a bad value is
 * ML_ERROR_INVALID_PARAMETER and leaves the earlier properties set. */
int ml_train_layer_set_property(ml_train_layer_h layer, ...);
int ml_train_layer_set_property_with_single_param(ml_train_layer_h layer,
                                                  const char *single_param);

/* ---- optimizer ---- */

int ml_train_optimizer_create(ml_train_optimizer_h *optimizer,
                              ml_train_optimizer_type_e type);
int ml_train_optimizer_destroy(ml_train_optimizer_h optimizer);
int ml_train_optimizer_set_property(ml_train_optimizer_h optimizer, ...);
int ml_train_optimizer_set_property_with_single_param(
    ml_train_optimizer_h optimizer, const char *single_param);
/* The optimizer owns the scheduler from then on (replacing and destroying
 * an earlier one). */
int ml_train_optimizer_set_lr_scheduler(ml_train_optimizer_h optimizer,
                                        ml_train_lr_scheduler_h lr_scheduler);

/* ---- learning-rate scheduler ---- */

int ml_train_lr_scheduler_create(ml_train_lr_scheduler_h *lr_scheduler,
                                 ml_train_lr_scheduler_type_e type);
int ml_train_lr_scheduler_destroy(ml_train_lr_scheduler_h lr_scheduler);
int ml_train_lr_scheduler_set_property(ml_train_lr_scheduler_h lr_scheduler, ...);
int ml_train_lr_scheduler_set_property_with_single_param(
    ml_train_lr_scheduler_h lr_scheduler, const char *single_param);

/* ---- dataset ---- */

/* An empty dataset; add a generator or a file per mode. */
int ml_train_dataset_create(ml_train_dataset_h *dataset);
/* A generator for one mode (replacing an earlier source of that mode). */
int ml_train_dataset_add_generator(ml_train_dataset_h dataset,
                                   ml_train_dataset_mode_e mode,
                                   ml_train_datagen_cb cb, void *user_data);
/* NNTrainer's raw file for one mode: per sample the input floats, then the
 * one-hot label floats, float32. */
int ml_train_dataset_add_file(ml_train_dataset_h dataset,
                              ml_train_dataset_mode_e mode, const char *file);
/* Properties (buffer_size, shuffle) of the mode's source, which must have
 * been added. */
int ml_train_dataset_set_property_for_mode(ml_train_dataset_h dataset,
                                           ml_train_dataset_mode_e mode, ...);
int ml_train_dataset_set_property_for_mode_with_single_param(
    ml_train_dataset_h dataset, ml_train_dataset_mode_e mode,
    const char *single_param);
/* Refused with ML_ERROR_INVALID_PARAMETER once the dataset is in a model. */
int ml_train_dataset_destroy(ml_train_dataset_h dataset);

/* Deprecated forms, kept for old applications. The generators get NULL
 * user data; valid and test may be NULL. set_property applies to every
 * source the dataset has. */
int ml_train_dataset_create_with_generator(ml_train_dataset_h *dataset,
                                           ml_train_datagen_cb train_cb,
                                           ml_train_datagen_cb valid_cb,
                                           ml_train_datagen_cb test_cb)
    TIZEN_DEPRECATED_API;
int ml_train_dataset_create_with_file(ml_train_dataset_h *dataset,
                                      const char *train_file,
                                      const char *valid_file,
                                      const char *test_file) TIZEN_DEPRECATED_API;
int ml_train_dataset_set_property(ml_train_dataset_h dataset, ...)
    TIZEN_DEPRECATED_API;

#ifdef __cplusplus
}
#endif
#endif /* __TIZEN_MACHINELEARNING_NNTRAINER_H__ */
