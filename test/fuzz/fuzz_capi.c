/* Fuzz target: the C API's property strings, inside a script of calls. The
 * input is lines, each an operation letter and its argument (the rest of
 * the line). A PROPS argument holding tabs is cut at them into up to 8
 * strings for the variadic call (ml_train_layer_set_property(h, a, b, ...,
 * NULL)); without a tab it goes whole to the _with_single_param call, where
 * '|' separates properties.
 *
 *   N<c>       new layer, of type layer_types[c - '0'] (modulo their count;
 *              it becomes the current one)
 *   L<PROPS>   set properties of the current layer
 *   M          add the current layer to the model
 *   G<name>    the model's layer of that name becomes the current one
 *   O<c>       new optimizer of type opt_types[c - '0'];  o<PROPS>
 *   P          set the current optimizer on the model
 *   S<c>       new lr scheduler of type lrs_types[c - '0']; s<PROPS>
 *   A          attach the current scheduler to the current optimizer
 *   D<c>       add the generator for mode c - '0' to the current dataset
 *              (a new one when there is none)
 *   d<c><PROPS> dataset properties for mode c - '0'; c = '*': all modes
 *   T          set the current dataset on the model
 *   K<name>    ml_train_ext_model_set_planner
 *   C<PROPS>   compile, with memory_budget=256K after the given properties
 *   R<PROPS>   run, with epochs=1 and save_path= (cleared) after them
 *   Q          summaries, tensors infos, memory reports, layer names
 *   Y<c>       save (BIN, INI, INI_WITH_BIN for c = '0', '1', '2') into the
 *              private folder
 *   Z          load the BIN saved there
 *   V<chars>   the values the generator gives, from a palette (NaN, inf,
 *              huge, tiny, ...) indexed by each char; E<c>: c - '0' samples
 *              per epoch (modulo 32; default 8)
 *   X<c>       destroy the current layer (L), optimizer (O), scheduler (S),
 *              dataset (D) or the model (M, which a fresh one replaces);
 *              the handle stays current, so later calls use a dead handle
 *
 * Promises checked beyond the sanitizers: every failing call leaves a
 * message for ml_error(); nothing is written but in the private folder.
 * The outcome is NNT_FUZZ_ACCEPTED when some run trained. */
#include "fuzz.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/src/capi.h"
#include "nntrainer-ext.h"
#include "nntrainer/model_impl.h"

static const int layer_types[] = {
    ML_TRAIN_LAYER_TYPE_INPUT,      ML_TRAIN_LAYER_TYPE_FC,
    ML_TRAIN_LAYER_TYPE_BN,         ML_TRAIN_LAYER_TYPE_CONV2D,
    ML_TRAIN_LAYER_TYPE_POOLING2D,  ML_TRAIN_LAYER_TYPE_FLATTEN,
    ML_TRAIN_LAYER_TYPE_ACTIVATION, ML_TRAIN_LAYER_TYPE_ADDITION,
    ML_TRAIN_LAYER_TYPE_CONCAT,     ML_TRAIN_LAYER_TYPE_MULTIOUT,
    ML_TRAIN_LAYER_TYPE_SPLIT,      ML_TRAIN_LAYER_TYPE_PERMUTE,
    ML_TRAIN_LAYER_TYPE_DROPOUT,    ML_TRAIN_LAYER_TYPE_CONV1D,
    ML_TRAIN_LAYER_TYPE_IDENTITY,   ML_TRAIN_LAYER_TYPE_LOSS_MSE,
    ML_TRAIN_LAYER_TYPE_LOSS_CROSS_ENTROPY_SIGMOID,
    ML_TRAIN_LAYER_TYPE_LOSS_CROSS_ENTROPY_SOFTMAX,
    ML_TRAIN_LAYER_TYPE_LSTM,       ML_TRAIN_LAYER_TYPE_UNKNOWN,
    -1,                             40,
};
static const int opt_types[] = {ML_TRAIN_OPTIMIZER_TYPE_ADAM, ML_TRAIN_OPTIMIZER_TYPE_SGD,
                                ML_TRAIN_OPTIMIZER_TYPE_ADAMW, ML_TRAIN_OPTIMIZER_TYPE_UNKNOWN,
                                -1};
static const int lrs_types[] = {
    ML_TRAIN_LR_SCHEDULER_TYPE_CONSTANT, ML_TRAIN_LR_SCHEDULER_TYPE_EXPONENTIAL,
    ML_TRAIN_LR_SCHEDULER_TYPE_STEP,     ML_TRAIN_LR_SCHEDULER_TYPE_COSINE,
    ML_TRAIN_LR_SCHEDULER_TYPE_UNKNOWN,  -1};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The entry of a table of count that the argument's first char names:
 * '0' the first, '1' the second, ... (wrapping around). */
static size_t pick(const char *arg, size_t count) {
  return (unsigned char)(arg[0] - '0') % count;
}

#define MAX_HANDLES 32
#define MAX_PARTS 8
#define MAX_PALETTE 16

/* The generator's data. The generator reads this, not its user_data: the
 * script may replace that with the "user_data" property. Read-only while
 * a run is in progress. */
static struct {
  nnt_model *m;
  float palette[MAX_PALETTE];
  size_t n_palette;
  unsigned samples, calls;
} gen;

static int generator(float **input, float **label, bool *last, void *ud) {
  (void)ud;
  nnt_model *m = gen.m;
  unsigned k = gen.calls++ % (gen.samples + 1);
  if (k == gen.samples) {
    *last = true;
    return 0;
  }
  *last = false;
  for (unsigned i = 0; m && i < m->n_inputs; i++) {
    size_t n = nnt_dim_feature_len(m->input_dim[i]);
    for (size_t j = 0; j < n; j++)
      input[i][j] = gen.n_palette ? gen.palette[(j + k) % gen.n_palette] : (float)(j % 7) - 3;
  }
  for (unsigned i = 0; m && i < m->n_labels; i++) {
    size_t n = nnt_dim_feature_len(m->label_dim[i]);
    for (size_t j = 0; j < n; j++)
      label[i][j] = j == k % n ? 1.0f : 0.0f;
  }
  return 0;
}

typedef struct script {
  ml_train_model_h model;
  int trained;                /* a run returned success */
  void *made[5][MAX_HANDLES]; /* layers, optimizers, schedulers, datasets, models */
  size_t n_made[5];
  void *cur[5];
} script;
enum { H_LAYER, H_OPT, H_LRS, H_DS, H_MODEL };

static void made(script *s, int kind, void *h) {
  s->cur[kind] = h;
  if (s->n_made[kind] < MAX_HANDLES)
    s->made[kind][s->n_made[kind]++] = h;
}

/* A failing call must say why. */
static void check(const char *call, int rc) {
  if (!rc)
    return;
  const char *msg = ml_error();
  if (!msg || !msg[0])
    nnt_fuzz_fail("%s returned %d without a message for ml_error()", call, rc);
  if (getenv("NNT_FUZZ_VERBOSE"))
    fprintf(stderr, "nnt_fuzz: %s: %d: %s\n", call, rc, msg);
}

typedef int (*single_fn)(void *h, const char *single);
typedef int (*va_fn)(void *h, ...);

/* Give props to a setter: cut at tabs for the variadic form, else whole
 * to the single-param one; extra (NULL-ended) strings follow. */
static int set_props(void *h, char *props, va_fn var, single_fn single,
                     const char *const *extra) {
  const char *p[MAX_PARTS + 3] = {0};
  size_t n = 0;
  int tabs = strchr(props, '\t') != NULL;
  if (!tabs && !extra)
    return single(h, props);
  for (char *s = props; s && n < MAX_PARTS;) {
    char *tab = strchr(s, '\t');
    if (tab)
      *tab = '\0';
    if (tabs || *s)
      p[n++] = s;
    s = tab ? tab + 1 : NULL;
  }
  for (size_t i = 0; extra && extra[i]; i++)
    p[n++] = extra[i];
  /* p[n] and on are NULL: the list ends there */
  return var(h, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10]);
}

/* The _with_single_param setters and the variadic ones, as (void *, ...). */
static int layer_single(void *h, const char *s) {
  return ml_train_layer_set_property_with_single_param(h, s);
}
static int opt_single(void *h, const char *s) {
  return ml_train_optimizer_set_property_with_single_param(h, s);
}
static int lrs_single(void *h, const char *s) {
  return ml_train_lr_scheduler_set_property_with_single_param(h, s);
}
static int compile_single(void *h, const char *s) {
  return ml_train_model_compile_with_single_param(h, s);
}
static int run_single(void *h, const char *s) {
  return ml_train_model_run_with_single_param(h, s);
}
static int ds_all_single(void *h, const char *s) {
  /* Tizen has no single-param form for all modes: the variadic one */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return ml_train_dataset_set_property(h, s, NULL);
#pragma GCC diagnostic pop
}
static int ds_all_var(void *h, ...) {
  const char *p[MAX_PARTS + 3];
  va_list ap;
  va_start(ap, h);
  size_t n = 0;
  while (n < COUNT(p) - 1 && (p[n] = va_arg(ap, const char *)))
    n++;
  va_end(ap);
  p[n] = NULL;
  /* deprecated in Tizen, still part of the API */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return ml_train_dataset_set_property(h, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8],
                                       p[9], p[10]);
#pragma GCC diagnostic pop
}

static int ds_mode;
static int ds_mode_single(void *h, const char *s) {
  return ml_train_dataset_set_property_for_mode_with_single_param(h, ds_mode, s);
}
static int ds_mode_var(void *h, ...) {
  const char *p[MAX_PARTS + 3];
  va_list ap;
  va_start(ap, h);
  size_t n = 0;
  while (n < COUNT(p) - 1 && (p[n] = va_arg(ap, const char *)))
    n++;
  va_end(ap);
  p[n] = NULL;
  return ml_train_dataset_set_property_for_mode(h, ds_mode, p[0], p[1], p[2], p[3], p[4], p[5],
                                                p[6], p[7], p[8], p[9], p[10]);
}

static const float palette_values[] = {0.0f, 1.0f, -1.0f, 0.5f, 1e30f, -1e30f, NAN, INFINITY,
                                       -INFINITY, 1e-40f, 255.0f, 3.0e38f, -0.0f, 1e-7f, 100.0f,
                                       -2.5f};

static void queries(script *s) {
  char *sum = NULL, **names = NULL;
  int rc;
  for (int v = 0; v < 3; v++) {
    check("ml_train_model_get_summary", rc = ml_train_model_get_summary(s->model, v, &sum));
    if (!rc)
      free(sum);
  }
  check("ml_train_model_get_summary",
        rc = ml_train_model_get_summary(s->model, ML_TRAIN_EXT_SUMMARY_VALID_ACCURACY, &sum));
  if (!rc)
    free(sum);
  ml_tensors_info_h info;
  check("ml_train_model_get_input_tensors_info",
        rc = ml_train_model_get_input_tensors_info(s->model, &info));
  if (!rc)
    ml_tensors_info_destroy(info);
  check("ml_train_model_get_output_tensors_info",
        rc = ml_train_model_get_output_tensors_info(s->model, &info));
  if (!rc)
    ml_tensors_info_destroy(info);
  ml_train_ext_memory_report_s r;
  check("ml_train_ext_model_get_memory_report",
        ml_train_ext_model_get_memory_report(s->model, ML_TRAIN_EXT_MODE_TRAIN, &r));
  check("ml_train_ext_model_get_memory_report",
        ml_train_ext_model_get_memory_report(s->model, ML_TRAIN_EXT_MODE_INFER, &r));
  check("ml_train_ext_model_get_memory_report",
        ml_train_ext_model_get_memory_report(s->model, ML_TRAIN_EXT_MODE_EVAL, &r));
  check("ml_train_ext_model_get_layer_names",
        rc = ml_train_ext_model_get_layer_names(s->model, &names));
  if (!rc)
    free(names);
}

static void destroy(script *s, char what) {
  switch (what) {
  case 'L':
    check("ml_train_layer_destroy", ml_train_layer_destroy(s->cur[H_LAYER]));
    break;
  case 'O':
    check("ml_train_optimizer_destroy", ml_train_optimizer_destroy(s->cur[H_OPT]));
    break;
  case 'S':
    check("ml_train_lr_scheduler_destroy", ml_train_lr_scheduler_destroy(s->cur[H_LRS]));
    break;
  case 'D':
    check("ml_train_dataset_destroy", ml_train_dataset_destroy(s->cur[H_DS]));
    break;
  case 'M':
    if (s->n_made[H_MODEL] < MAX_HANDLES) {
      check("ml_train_model_destroy", ml_train_model_destroy(s->model));
      ml_train_model_h m;
      if (ml_train_model_construct(&m))
        nnt_fuzz_fail("ml_train_model_construct: %s", ml_error());
      made(s, H_MODEL, m);
      s->model = m;
    }
    break;
  }
}

static void op(script *s, char c, char *arg) {
  int rc;
  char path[4200];
  static const char *const compile_extra[] = {"memory_budget=256K", NULL};
  static const char *const run_extra[] = {"epochs=1", "save_path=", NULL};
  switch (c) {
  case 'N': {
    ml_train_layer_h l;
    if (s->n_made[H_LAYER] == MAX_HANDLES)
      break;
    check("ml_train_layer_create",
          rc = ml_train_layer_create(&l, layer_types[pick(arg, COUNT(layer_types))]));
    if (!rc)
      made(s, H_LAYER, l);
    break;
  }
  case 'L':
    check("layer set_property",
          set_props(s->cur[H_LAYER], arg, ml_train_layer_set_property, layer_single, NULL));
    break;
  case 'M':
    check("ml_train_model_add_layer", ml_train_model_add_layer(s->model, s->cur[H_LAYER]));
    break;
  case 'G': {
    ml_train_layer_h l;
    check("ml_train_model_get_layer", rc = ml_train_model_get_layer(s->model, arg, &l));
    if (!rc)
      s->cur[H_LAYER] = l;
    break;
  }
  case 'O': {
    ml_train_optimizer_h o;
    if (s->n_made[H_OPT] == MAX_HANDLES)
      break;
    check("ml_train_optimizer_create",
          rc = ml_train_optimizer_create(&o, opt_types[pick(arg, COUNT(opt_types))]));
    if (!rc)
      made(s, H_OPT, o);
    break;
  }
  case 'o':
    check("optimizer set_property",
          set_props(s->cur[H_OPT], arg, ml_train_optimizer_set_property, opt_single, NULL));
    break;
  case 'P':
    check("ml_train_model_set_optimizer", ml_train_model_set_optimizer(s->model, s->cur[H_OPT]));
    break;
  case 'S': {
    ml_train_lr_scheduler_h l;
    if (s->n_made[H_LRS] == MAX_HANDLES)
      break;
    check("ml_train_lr_scheduler_create",
          rc = ml_train_lr_scheduler_create(&l,
                                            lrs_types[pick(arg, COUNT(lrs_types))]));
    if (!rc)
      made(s, H_LRS, l);
    break;
  }
  case 's':
    check("lr_scheduler set_property",
          set_props(s->cur[H_LRS], arg, ml_train_lr_scheduler_set_property, lrs_single, NULL));
    break;
  case 'A':
    check("ml_train_optimizer_set_lr_scheduler",
          ml_train_optimizer_set_lr_scheduler(s->cur[H_OPT], s->cur[H_LRS]));
    break;
  case 'D':
    if (!s->cur[H_DS]) {
      ml_train_dataset_h d;
      check("ml_train_dataset_create", rc = ml_train_dataset_create(&d));
      if (rc)
        break;
      made(s, H_DS, d);
    }
    check("ml_train_dataset_add_generator",
          ml_train_dataset_add_generator(s->cur[H_DS], (ml_train_dataset_mode_e)(arg[0] - '0'),
                                         generator, NULL));
    break;
  case 'd':
    if (!arg[0])
      break;
    if (arg[0] == '*') {
      check("ml_train_dataset_set_property",
            set_props(s->cur[H_DS], arg + 1, ds_all_var, ds_all_single, NULL));
    } else {
      ds_mode = arg[0] - '0';
      check("ml_train_dataset_set_property_for_mode",
            set_props(s->cur[H_DS], arg + 1, ds_mode_var, ds_mode_single, NULL));
    }
    break;
  case 'T':
    check("ml_train_model_set_dataset", ml_train_model_set_dataset(s->model, s->cur[H_DS]));
    break;
  case 'K':
    check("ml_train_ext_model_set_planner", ml_train_ext_model_set_planner(s->model, arg));
    break;
  case 'C':
    check("ml_train_model_compile",
          set_props(s->model, arg, ml_train_model_compile, compile_single, compile_extra));
    break;
  case 'R':
    gen.m = ((capi_model *)s->model)->m;
    gen.calls = 0;
    check("ml_train_model_run",
          rc = set_props(s->model, arg, ml_train_model_run, run_single, run_extra));
    s->trained |= !rc;
    break;
  case 'Q':
    queries(s);
    break;
  case 'Y': {
    static const char *const ext[] = {"capi.bin", "capi.ini", "capi2.ini"};
    int f = (int)pick(arg, 3);
    nnt_fuzz_path(path, sizeof path, ext[f]);
    check("ml_train_model_save",
          ml_train_model_save(s->model, path, (ml_train_model_format_e)f));
    break;
  }
  case 'Z':
    nnt_fuzz_path(path, sizeof path, "capi.bin");
    check("ml_train_model_load", ml_train_model_load(s->model, path, ML_TRAIN_MODEL_FORMAT_BIN));
    break;
  case 'V':
    gen.n_palette = 0;
    for (char *p = arg; *p && gen.n_palette < MAX_PALETTE; p++)
      gen.palette[gen.n_palette++] =
          palette_values[(unsigned char)*p % COUNT(palette_values)];
    break;
  case 'E':
    gen.samples = (unsigned)pick(arg, 32);
    break;
  case 'X':
    destroy(s, arg[0]);
    break;
  }
}

int nnt_fuzz_capi(const uint8_t *data, size_t size) {
  nnt_fuzz_init();
  char *text = malloc(size + 1);
  if (!text)
    nnt_fuzz_fail("out of memory");
  memcpy(text, data, size);
  text[size] = '\0';
  gen.m = NULL;
  gen.n_palette = 0;
  gen.samples = 8;
  script s;
  memset(&s, 0, sizeof s);
  if (ml_train_model_construct(&s.model))
    nnt_fuzz_fail("ml_train_model_construct: %s", ml_error());
  made(&s, H_MODEL, s.model);
  /* a NUL in the input ends the script there */
  for (char *line = text; line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = '\0';
    if (line[0])
      op(&s, line[0], line + 1);
    line = nl ? nl + 1 : NULL;
  }
  /* models first (they destroy what they own), then what is left; a
   * handle already gone is refused by the registry, never dereferenced */
  for (size_t i = 0; i < s.n_made[H_MODEL]; i++)
    ml_train_model_destroy(s.made[H_MODEL][i]);
  for (size_t i = 0; i < s.n_made[H_OPT]; i++)
    ml_train_optimizer_destroy(s.made[H_OPT][i]);
  for (size_t i = 0; i < s.n_made[H_LRS]; i++)
    ml_train_lr_scheduler_destroy(s.made[H_LRS][i]);
  for (size_t i = 0; i < s.n_made[H_LAYER]; i++)
    ml_train_layer_destroy(s.made[H_LAYER][i]);
  for (size_t i = 0; i < s.n_made[H_DS]; i++)
    ml_train_dataset_destroy(s.made[H_DS][i]);
  ml_error(); /* the last message is this thread's; leave none behind */
  free(text);
  return s.trained ? NNT_FUZZ_ACCEPTED : NNT_FUZZ_REFUSED;
}
