/* SPDX-License-Identifier: Apache-2.0 */
/* Text for the character-level language model examples: see charlm_text.h. */
#include "charlm_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nntrainer-ext.h> /* inference: nntrainer's own */

#include "fashion_mnist.h" /* check() */

const char *const cl_fortune_files[] = {
    "art",       "computers",    "cookie",   "debian",        "definitions", "disclaimer",
    "drugs",     "education",    "ethnic",   "food",          "fortunes",    "goedel",
    "humorists", "kids",         "knghtbrd", "law",           "linux",       "linuxcookie",
    "literature", "love",        "magic",    "medicine",      "men-women",   "miscellaneous",
    "news",      "paradoxum",    "people",   "perl",          "pets",        "platitudes",
    "politics",  "pratchett",    "riddles",  "science",       "songs-poems", "sports",
    "startrek",  "tao",          "wisdom",   "work",          "zippy",       NULL};

int cl_char_id(int c) {
  if (c == '\n')
    return 0;
  if (c == '\t')
    c = ' ';
  if (c >= ' ' && c <= '~')
    return c - ' ' + 1;
  return -1;
}

char cl_id_char(unsigned id) { return id == 0 ? '\n' : (char)(' ' + id - 1); }

double cl_uniform(uint64_t *rng) {
  uint64_t x = *rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *rng = x;
  return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

/* Append n ids to t (capacity *cap). @return 0 or 1 when out of memory. */
static int append(cl_text *t, size_t *cap, const unsigned char *ids, size_t n) {
  if (t->len + n > *cap) {
    size_t want = (*cap ? *cap * 2 : 1 << 16) + n;
    unsigned char *p = realloc(t->ids, want);
    if (!p)
      return 1;
    t->ids = p;
    *cap = want;
  }
  memcpy(t->ids + t->len, ids, n);
  t->len += n;
  return 0;
}

static int listed(const char *name, const char *const *list) {
  for (size_t i = 0; list && list[i]; i++)
    if (!strcmp(list[i], name))
      return 1;
  return 0;
}

int cl_load(const char *dir, const char *const *files, const char *const *skip, unsigned every,
            cl_text *train, cl_text *held) {
  size_t cap_train = 0, cap_held = 0, quotes = 0;
  memset(train, 0, sizeof *train);
  memset(held, 0, sizeof *held);
  unsigned char *quote = NULL;
  size_t qlen = 0, qcap = 0;
  int rc = 0;
  for (size_t f = 0; files[f] && !rc; f++) {
    if (listed(files[f], skip))
      continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, files[f]);
    FILE *in = fopen(path, "rb");
    if (!in) {
      fprintf(stderr, "error: cannot open %s (install Debian's fortunes package, or give "
                      "--fortunes DIR)\n", path);
      rc = 1;
      break;
    }
    char line[8192];
    qlen = 0;
    for (;;) {
      int eof = !fgets(line, sizeof line, in);
      if (eof || !strcmp(line, "%\n") || !strcmp(line, "%")) {
        /* a quote ends: drop trailing blank lines, end it with one */
        while (qlen && quote[qlen - 1] == 0)
          qlen--;
        if (qlen) {
          unsigned char sep[2] = {0, 0};
          cl_text *to = every && quotes % every == every - 1 ? held : train;
          size_t *cap = to == held ? &cap_held : &cap_train;
          if (append(to, cap, quote, qlen) || append(to, cap, sep, 2)) {
            rc = 1;
            fprintf(stderr, "error: out of memory reading %s\n", path);
            break;
          }
          quotes++;
        }
        qlen = 0;
        if (eof)
          break;
        continue;
      }
      for (const char *c = line; *c; c++) {
        int id = cl_char_id((unsigned char)*c);
        if (id < 0)
          continue;
        if (qlen == qcap) {
          unsigned char *p = realloc(quote, qcap ? qcap * 2 : 4096);
          if (!p) {
            fprintf(stderr, "error: out of memory reading %s\n", path);
            rc = 1;
            break;
          }
          quote = p;
          qcap = qcap ? qcap * 2 : 4096;
        }
        quote[qlen++] = (unsigned char)id;
      }
      if (rc)
        break;
    }
    fclose(in);
  }
  free(quote);
  if (!rc && (train->len < 1024 || held->len < 1024)) {
    fprintf(stderr, "error: too little text in %s (%zu training, %zu held-out characters)\n", dir,
            train->len, held->len);
    rc = 1;
  }
  if (rc) {
    cl_text_free(train);
    cl_text_free(held);
  }
  return rc;
}

void cl_text_free(cl_text *t) {
  free(t->ids);
  t->ids = NULL;
  t->len = 0;
}

int cl_generator(float **input, float **label, bool *last, void *user_data) {
  cl_feed *s = user_data;
  size_t span = s->t->len - s->steps; /* starts that leave a next character */
  size_t start = (size_t)(cl_uniform(&s->rng) * (double)span);
  const unsigned char *c = s->t->ids + start;
  memset(label[0], 0, (size_t)s->steps * CL_VOCAB * sizeof(float));
  for (unsigned i = 0; i < s->steps; i++) {
    input[0][i] = (float)c[i];
    label[0][(size_t)i * CL_VOCAB + c[i + 1]] = 1.0f;
  }
  *last = ++s->next == s->samples;
  if (*last)
    s->next = 0;
  return ML_ERROR_NONE;
}

int cl_model_shape(ml_train_model_h model, unsigned *steps, unsigned *batch) {
  ml_tensors_info_h in_info = NULL, out_info = NULL;
  ml_tensor_dimension in, out;
  int rc;
  if (!(rc = check(ml_train_model_get_input_tensors_info(model, &in_info), "input tensors info")) &&
      !(rc = check(ml_train_model_get_output_tensors_info(model, &out_info),
                   "output tensors info")) &&
      !(rc = check(ml_tensors_info_get_tensor_dimension(in_info, 0, in), "input dimension")) &&
      !(rc = check(ml_tensors_info_get_tensor_dimension(out_info, 0, out), "output dimension"))) {
    /* input batch:1:1:steps, output batch:1:steps:vocab */
    if (in[1] != 1 || in[2] != 1 || out[2] != in[3] || out[3] != CL_VOCAB || !in[3]) {
      fprintf(stderr, "error: the model takes %u:%u:%u:%u and gives %u:%u:%u:%u; a character "
                      "model takes batch:1:1:T ids and gives batch:1:T:%d probabilities\n",
              in[0], in[1], in[2], in[3], out[0], out[1], out[2], out[3], CL_VOCAB);
      rc = ML_ERROR_INVALID_PARAMETER;
    } else {
      *steps = in[3];
      *batch = in[0];
    }
  }
  if (out_info)
    ml_tensors_info_destroy(out_info);
  if (in_info)
    ml_tensors_info_destroy(in_info);
  return rc;
}

/* One inference: x (batch x steps ids) in, probabilities out (*y points
 * into *out, which the caller destroys). */
static int infer(ml_train_model_h model, ml_tensors_data_h in, ml_tensors_data_h *out,
                 const float **y) {
  void *raw;
  size_t bytes;
  int rc = check(ml_train_ext_model_infer(model, in, out), "ml_train_ext_model_infer");
  if (!rc && !(rc = check(ml_tensors_data_get_tensor_data(*out, 0, &raw, &bytes), "output data")))
    *y = raw;
  return rc;
}

/* An input buffer of the model's shape: *x points into *in. */
static int make_input(ml_train_model_h model, ml_tensors_data_h *in, float **x, size_t *bytes) {
  ml_tensors_info_h info = NULL;
  void *raw;
  int rc = check(ml_train_model_get_input_tensors_info(model, &info), "input tensors info");
  if (!rc && !(rc = check(ml_tensors_data_create(info, in), "ml_tensors_data_create")) &&
      !(rc = check(ml_tensors_data_get_tensor_data(*in, 0, &raw, bytes), "input data")))
    *x = raw;
  if (info)
    ml_tensors_info_destroy(info);
  return rc;
}

int cl_cross_entropy(ml_train_model_h model, const cl_text *t, size_t max_windows, double *nats,
                     size_t *chars) {
  unsigned steps, batch;
  ml_tensors_data_h in = NULL, out = NULL;
  float *x;
  size_t bytes, windows;
  int rc = cl_model_shape(model, &steps, &batch);
  if (rc || (rc = make_input(model, &in, &x, &bytes)))
    goto done;
  /* window w reads ids[w*steps ..] and predicts each next one */
  windows = (t->len - 1) / steps;
  if (max_windows && windows > max_windows)
    windows = max_windows;
  double sum = 0;
  size_t scored = 0;
  for (size_t w0 = 0; w0 < windows && !rc; w0 += batch) {
    size_t n = windows - w0 < batch ? windows - w0 : batch;
    memset(x, 0, bytes); /* the last batch is padded */
    for (size_t s = 0; s < n; s++)
      for (unsigned i = 0; i < steps; i++)
        x[s * steps + i] = (float)t->ids[(w0 + s) * steps + i];
    const float *y;
    if ((rc = infer(model, in, &out, &y)))
      break;
    for (size_t s = 0; s < n; s++)
      for (unsigned i = 0; i < steps; i++) {
        unsigned next = t->ids[(w0 + s) * steps + i + 1];
        double p = y[(s * steps + i) * CL_VOCAB + next];
        sum -= log(p > 1e-30 ? p : 1e-30);
        scored++;
      }
    ml_tensors_data_destroy(out);
    out = NULL;
  }
  *nats = scored ? sum / (double)scored : 0;
  *chars = scored;
done:
  if (in)
    ml_tensors_data_destroy(in);
  return rc;
}

int cl_sample(ml_train_model_h model, const char *prompt, size_t n, double temperature,
              uint64_t *rng) {
  unsigned steps, batch;
  ml_tensors_data_h in = NULL, out = NULL;
  float *x;
  size_t bytes, len = 0, plen = strlen(prompt);
  unsigned char *ctx = NULL;
  int rc = cl_model_shape(model, &steps, &batch);
  if (rc || (rc = make_input(model, &in, &x, &bytes)))
    goto done;
  if (!(ctx = malloc(plen + n + 1))) {
    fprintf(stderr, "error: out of memory\n");
    rc = ML_ERROR_OUT_OF_MEMORY;
    goto done;
  }
  for (size_t i = 0; i < plen; i++) {
    int id = cl_char_id((unsigned char)prompt[i]);
    if (id >= 0)
      ctx[len++] = (unsigned char)id;
  }
  fputs(prompt, stdout);
  for (size_t k = 0; k < n && !rc; k++) {
    /* the last `steps` characters, newlines before a short context; every
     * sample of the batch gets the same window, the first is read */
    for (size_t s = 0; s < batch; s++)
      for (unsigned i = 0; i < steps; i++) {
        size_t back = steps - i; /* 1 for the last position */
        x[s * steps + i] = back <= len ? (float)ctx[len - back] : 0.0f;
      }
    const float *y;
    if ((rc = infer(model, in, &out, &y)))
      break;
    const float *p = y + (size_t)(steps - 1) * CL_VOCAB;
    double w[CL_VOCAB], total = 0;
    for (unsigned v = 0; v < CL_VOCAB; v++) {
      w[v] = p[v] > 0 ? exp(log(p[v]) / temperature) : 0;
      total += w[v];
    }
    double u = cl_uniform(rng) * total;
    unsigned pick = 0;
    while (pick + 1 < CL_VOCAB && u >= w[pick]) {
      u -= w[pick];
      pick++;
    }
    ctx[len++] = (unsigned char)pick;
    putchar(cl_id_char(pick));
    ml_tensors_data_destroy(out);
    out = NULL;
  }
  putchar('\n');
  fflush(stdout);
done:
  free(ctx);
  if (in)
    ml_tensors_data_destroy(in);
  return rc;
}
