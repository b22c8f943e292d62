/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ml-api-common.h: the part of the Tizen Machine Learning common API that the
 * training API (nntrainer.h) uses: the error codes, and the tensors
 * information and tensors data handles with their functions.
 *
 * Names, signatures and values follow the Tizen ML API (ranks up to 16, as
 * since Tizen 7.5), so code written against it compiles here unchanged.
 * Error values are Tizen's (negative errno values and Tizen's platform
 * range), written out because tizen_error.h does not exist off Tizen.
 */
#ifndef __ML_API_COMMON_H__
#define __ML_API_COMMON_H__

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. */
typedef enum {
  ML_ERROR_NONE = 0,                        /* success */
  ML_ERROR_INVALID_PARAMETER = -22,         /* -EINVAL */
  ML_ERROR_STREAMS_PIPE = -86,              /* -ESTRPIPE */
  ML_ERROR_TRY_AGAIN = -11,                 /* -EAGAIN */
  ML_ERROR_UNKNOWN = -1073741824,           /* Tizen's first platform error */
  ML_ERROR_TIMED_OUT = -1073741823,         /* platform error + 1 */
  ML_ERROR_NOT_SUPPORTED = -1073741822,     /* platform error + 2 */
  ML_ERROR_PERMISSION_DENIED = -13,         /* -EACCES */
  ML_ERROR_OUT_OF_MEMORY = -12,             /* -ENOMEM */
  ML_ERROR_IO_ERROR = -5,                   /* -EIO */
} ml_error_e;

/* The largest rank of a tensor, and the most tensors one handle holds. */
#define ML_TENSOR_RANK_LIMIT (16)
#define ML_TENSOR_SIZE_LIMIT (16)

/* Dimensions of one tensor. Unused trailing ranks are 0. */
typedef unsigned int ml_tensor_dimension[ML_TENSOR_RANK_LIMIT];

/* Tensors metadata: count, and per tensor its name, type and dimension. */
typedef void *ml_tensors_info_h;

/* Tensors data: one buffer per tensor of an info. */
typedef void *ml_tensors_data_h;

/* Element types. */
typedef enum _ml_tensor_type_e {
  ML_TENSOR_TYPE_INT32 = 0,
  ML_TENSOR_TYPE_UINT32,
  ML_TENSOR_TYPE_INT16,
  ML_TENSOR_TYPE_UINT16,
  ML_TENSOR_TYPE_INT8,
  ML_TENSOR_TYPE_UINT8,
  ML_TENSOR_TYPE_FLOAT64,
  ML_TENSOR_TYPE_FLOAT32,
  ML_TENSOR_TYPE_INT64,
  ML_TENSOR_TYPE_UINT64,
  ML_TENSOR_TYPE_FLOAT16,
  ML_TENSOR_TYPE_UNKNOWN
} ml_tensor_type_e;

/* Called to free data handed to the API. */
typedef void (*ml_data_destroy_cb)(void *data);

/* Create an info with count 0; free it with ml_tensors_info_destroy(). */
int ml_tensors_info_create(ml_tensors_info_h *info);
/* The same; every info here supports ML_TENSOR_RANK_LIMIT ranks. */
int ml_tensors_info_create_extended(ml_tensors_info_h *info);
int ml_tensors_info_destroy(ml_tensors_info_h info);
/* *valid is true when count > 0 and every tensor has a known type and a
 * non-zero first dimension. */
int ml_tensors_info_validate(const ml_tensors_info_h info, bool *valid);
/* Copy src into dest (both created). */
int ml_tensors_info_clone(ml_tensors_info_h dest, const ml_tensors_info_h src);
/* count: 1 to ML_TENSOR_SIZE_LIMIT. */
int ml_tensors_info_set_count(ml_tensors_info_h info, unsigned int count);
int ml_tensors_info_get_count(ml_tensors_info_h info, unsigned int *count);
int ml_tensors_info_set_tensor_name(ml_tensors_info_h info, unsigned int index,
                                    const char *name);
/* *name is a copy (NULL when unnamed); release it with free(). */
int ml_tensors_info_get_tensor_name(ml_tensors_info_h info, unsigned int index,
                                    char **name);
int ml_tensors_info_set_tensor_type(ml_tensors_info_h info, unsigned int index,
                                    const ml_tensor_type_e type);
int ml_tensors_info_get_tensor_type(ml_tensors_info_h info, unsigned int index,
                                    ml_tensor_type_e *type);
int ml_tensors_info_set_tensor_dimension(ml_tensors_info_h info, unsigned int index,
                                         const ml_tensor_dimension dimension);
int ml_tensors_info_get_tensor_dimension(ml_tensors_info_h info, unsigned int index,
                                         ml_tensor_dimension dimension);
/* Bytes of tensor index, or of all tensors when index is -1. */
int ml_tensors_info_get_tensor_size(ml_tensors_info_h info, int index,
                                    size_t *data_size);

/* Allocate zeroed buffers for every tensor of info. */
int ml_tensors_data_create(const ml_tensors_info_h info, ml_tensors_data_h *data);
int ml_tensors_data_destroy(ml_tensors_data_h data);
/* *raw_data points into data (do not free it); *data_size is its bytes. */
int ml_tensors_data_get_tensor_data(ml_tensors_data_h data, unsigned int index,
                                    void **raw_data, size_t *data_size);
/* Copy data_size bytes (at most the tensor's size) into tensor index. */
int ml_tensors_data_set_tensor_data(ml_tensors_data_h data, unsigned int index,
                                    const void *raw_data, const size_t data_size);

/* The message of the most recent error that a call of this API made in the
 * calling thread since the last call of ml_error(), or NULL when there was
 * none; the call clears it. The text stays valid until the thread's next
 * ml_error() call. Do not free it. */
const char *ml_error(void);
/* A description of an error code, or NULL for a code that is not one. */
const char *ml_strerror(int error_code);

#ifdef __cplusplus
}
#endif
#endif /* __ML_API_COMMON_H__ */
