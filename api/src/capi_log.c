/* nntrainer-ext.h: the log callback, over the core's nnt_log_set
 * (nntrainer/common.c). The public callback type and the internal one have
 * the same signature, so the application's function is stored as it is. */
#include "api/src/api_internal.h"

#include "nntrainer-ext.h"

_Static_assert((int)ML_TRAIN_EXT_LOG_DEBUG == NNT_LOG_DEBUG &&
                   (int)ML_TRAIN_EXT_LOG_INFO == NNT_LOG_INFO &&
                   (int)ML_TRAIN_EXT_LOG_NOTICE == NNT_LOG_NOTICE &&
                   (int)ML_TRAIN_EXT_LOG_WARNING == NNT_LOG_WARNING,
               "the public log levels equal the internal ones");

int ml_train_ext_set_log_callback(ml_train_ext_log_cb cb, void *user_data) {
  nnt_log_cb core = cb;
  nnt_log_set(core, user_data);
  return ML_ERROR_NONE;
}

int ml_train_ext_set_log_level(ml_train_ext_log_level_e min_level) {
  if (nnt_log_set_level((int)min_level))
    return nnt_api_fail(ML_ERROR_INVALID_PARAMETER,
                        "ml_train_ext_set_log_level: %d is not a log level (%d to %d)",
                        (int)min_level, ML_TRAIN_EXT_LOG_DEBUG, ML_TRAIN_EXT_LOG_WARNING);
  return ML_ERROR_NONE;
}
