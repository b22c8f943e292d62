/* SPDX-License-Identifier: Apache-2.0 */
/*
 * charlm_text.h: what the character-level language model examples share:
 * reading English text from Debian's `fortunes` package (files of quotes
 * separated by lines holding a single '%'), a split into training and
 * held-out text, a data generator callback that feeds windows of it to a
 * model, the per-character cross-entropy of a compiled model on held-out
 * text (through inference), and sampling text from a model. Only the
 * public headers are used; this file is part of the examples.
 */
#ifndef CHARLM_TEXT_H
#define CHARLM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nntrainer.h>

/* Where Debian's fortunes package puts its files. */
#ifndef CL_FORTUNES_DIR
#define CL_FORTUNES_DIR "/usr/share/games/fortunes"
#endif

/* The vocabulary: '\n' is 0, the printable ASCII characters ' '..'~' are
 * 1..95. A tab reads as a space; any other byte (UTF-8 letters, control
 * characters) is dropped. */
#define CL_VOCAB 96

/* Text as character ids. */
typedef struct {
  unsigned char *ids;
  size_t len;
} cl_text;

/* The id of byte c, or -1 when it is dropped. */
int cl_char_id(int c);
/* The character of id (0..CL_VOCAB-1). */
char cl_id_char(unsigned id);

/* The English files of the fortunes package this example reads (all but
 * the ASCII-art and foreign-language ones), NULL-ended. */
extern const char *const cl_fortune_files[];

/* Read the quotes of the files (names in dir, NULL-ended list) in order:
 * every `every`-th quote (the 10th, 20th, ... for every = 10) goes to held,
 * the others to train; every quote ends with a blank line. Names listed in
 * skip (NULL-ended, may be NULL) are not read. @return 0, or 1 after
 * printing why (a missing file, no memory). */
int cl_load(const char *dir, const char *const *files, const char *const *skip, unsigned every,
            cl_text *train, cl_text *held);
void cl_text_free(cl_text *t);

/* The generator's state: `samples` windows of t per epoch, each at a
 * position drawn from `rng` (a xorshift64 state, not 0). */
typedef struct {
  const cl_text *t;
  unsigned steps;   /* characters per window (the model's time steps) */
  size_t samples;   /* windows per epoch */
  size_t next;      /* the generator's position in the epoch */
  uint64_t rng;
} cl_feed;

/* ml_train_datagen_cb: the input is `steps` character ids (as floats),
 * the label the next character of each as a one-hot row of CL_VOCAB
 * floats (steps x CL_VOCAB). */
int cl_generator(float **input, float **label, bool *last, void *user_data);

/* The model's input window length (steps) and batch, from its input
 * tensor info (batch x 1 x 1 x steps), checking that the output is
 * batch x 1 x steps x CL_VOCAB. @return an ml_error_e value. */
int cl_model_shape(ml_train_model_h model, unsigned *steps, unsigned *batch);

/* The mean cross-entropy per character, in nats, of the model's
 * predictions over t: windows of steps + 1 characters side by side from the
 * start, at most max_windows of them (0: all), every position of each
 * window predicted. *chars gets how many characters were scored. */
int cl_cross_entropy(ml_train_model_h model, const cl_text *t, size_t max_windows, double *nats,
                     size_t *chars);

/* Continue prompt by n characters drawn from the model's distribution at
 * the last position, sharpened by temperature (1: as is), with the xorshift
 * state *rng; the result (prompt included) is printed to stdout. */
int cl_sample(ml_train_model_h model, const char *prompt, size_t n, double temperature,
              uint64_t *rng);

/* A uniform double in [0, 1) from a xorshift64 state. */
double cl_uniform(uint64_t *rng);

#endif
