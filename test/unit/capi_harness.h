/* Helpers shared by the C API tests (test_capi*.c, test_ml_tensors*.c):
 * error checks, tensors infos, a learnable data generator and small models
 * built through the API. */
#ifndef NNT_CAPI_HARNESS_H
#define NNT_CAPI_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "nntrainer-ext.h"
#include "nntrainer.h"
#include "nntrainer/common.h"

#define OK(call) assert_int_equal((call), ML_ERROR_NONE)

/* Every kind of handle is gone. */
void assert_no_handles(void);
/* The last error's message contains needle. */
void assert_error(const char *needle);

/* The message left by the last failing call: non-NULL, mentioning needle,
 * and cleared by reading it. */
void expect_msg(const char *needle);
/* rc must be code, with a message naming needle. */
#define EXPECT_FAIL(call, code, needle)                                                   \
  do {                                                                                     \
    (void)ml_error();                                                                      \
    int rc_ = (call);                                                                      \
    if (rc_ != (code))                                                                     \
      fail_msg("%s: got %d, want %d (%s)", #call, rc_, (int)(code), #code);                \
    expect_msg(needle);                                                                    \
  } while (0)

/* A new info with count tensors (count 0: as created). */
ml_tensors_info_h new_info(unsigned count);
/* Two float32 tensors 2:3:4 ("a") and 5 ("b") plus a uint8 tensor 7:1:3. */
ml_tensors_info_h sample_info(void);
/* Tensor i is named want (NULL: unnamed). */
void assert_name(ml_tensors_info_h info, unsigned i, const char *want);

/* A generator of 8 inputs and 3 classes (the largest of three input sums):
 * samples per epoch; fail_at/fail_code make it return an error;
 * never_last_after_first makes every epoch after the first endless. */
typedef struct gen {
  unsigned samples;  /* per epoch */
  unsigned given;
  nnt_rng rng;
  int fail_at;       /* return fail_code at this sample (-1: never) */
  int fail_code;
  int never_last_after_first; /* epochs after the first never set last */
  unsigned epochs_done;
} gen;

int gen_cb(float **input, float **label, bool *last, void *ud);
void gen_init(gen *g, unsigned samples, uint64_t seed);

/* input 1:1:8, fc 16 relu, fc 3 softmax, adam with an exponential
 * scheduler, generators for train and valid; compiled with loss cross,
 * batch 8, seed 3, and memory_optimization as memopt. */
typedef struct built {
  ml_train_model_h model;
  ml_train_layer_h in, fc1, out;
  ml_train_optimizer_h opt;
  ml_train_lr_scheduler_h lrs;
  ml_train_dataset_h ds;
  gen train, valid;
} built;

void build(built *b, int memopt);
/* input 1:1:8 and fc 3 softmax with sgd; *opt_out (if not NULL) gets the
 * optimizer handle. Not compiled, no dataset. */
void small_model_opt(ml_train_model_h *model, ml_train_optimizer_h *opt_out);
void small_model(ml_train_model_h *model);

#endif
