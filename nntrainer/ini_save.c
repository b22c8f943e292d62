/* Writing a model's configuration back as an INI file in NNTrainer's format:
 * what ml_train_model_save() does for the INI formats. Every name and value
 * is written so that nntrainer's reader (and iniparser) reads it back
 * exactly: quoted where the syntax needs it, refused where it cannot be
 * written (nnt_ini_value_quote, nnt_ini_name_writable). */
#include "nntrainer/ini_read.h"
#include "nntrainer/model_impl.h"

#include <math.h>
#include <stdio.h>

#include "nntrainer/file_io.h"

/* "key = value", quoted when needed; the first value that cannot be
 * written is recorded in e and *rc (and the rest of the file is moot). */
static void put(FILE *f, const char *sec, const char *key, const char *value, int *rc,
                nnt_err *e) {
  int q = nnt_ini_value_quote(value);
  if (*rc)
    return;
  if (q < 0 || !nnt_ini_name_writable(key, 0)) {
    *rc = nnt_err_set(e, NNT_ERR_INVAL,
                      "save: [%s] %s: value '%.200s' cannot be written in an INI file (a "
                      "control character, invalid UTF-8, or both quotes where quotes are "
                      "needed)", sec, key, value);
    return;
  }
  if (q)
    fprintf(f, "%s = %c%s%c\n", key, q, value, q);
  else
    fprintf(f, "%s = %s\n", key, value);
}

static void write_model(FILE *f, const nnt_model *m, const char *bin_path, int *rc,
                        nnt_err *e) {
  fprintf(f, "[Model]\ntype = NeuralNetwork\nepochs = %u\nbatch_size = %u\n", m->epochs,
          m->batch);
  if (m->loss != NNT_LOSS_NONE)
    fprintf(f, "loss = %s\n", nnt_loss_name(m->loss));
  const char *save = bin_path ? bin_path : m->save_path;
  if (save)
    put(f, "model", "save_path", save, rc, e);
  if (bin_path)
    fprintf(f, "load_weights = true\n");
  if (m->continue_train)
    fprintf(f, "continue_train = true\n");
  if (!m->memory_optimization)
    fprintf(f, "memory_optimization = false\n");
  if (m->clip_grad_norm > 0)
    fprintf(f, "clip_grad_by_norm = %.9g\n", m->clip_grad_norm);
  if (!m->check_finite)
    fprintf(f, "check_finite = false\n");
  if (m->seed_set)
    fprintf(f, "seed = %llu\n", (unsigned long long)m->seed);
  fprintf(f, "memory_planner = %s\n", nnt_planner_name(m->planner));
  if (m->memory_budget)
    fprintf(f, "memory_budget = %llu\n", (unsigned long long)m->memory_budget);
  if (m->engine_set)
    fprintf(f, "engine = %s\n", nnt_engine_name(m->engine));
  if (m->gpu_device)
    fprintf(f, "gpu_device = %s\n", m->gpu_device);
}

static void write_floats(FILE *f, const char *key, const float *v, unsigned n) {
  fprintf(f, "%s = ", key);
  for (unsigned i = 0; i < n; i++)
    fprintf(f, "%s%.9g", i ? ", " : "", v[i]);
  fputc('\n', f);
}

static void write_optimizer(FILE *f, const nnt_optimizer *o) {
  fprintf(f, "\n[Optimizer]\ntype = %s\n", nnt_optimizer_type_name(o));
  if (o->lr_set)
    fprintf(f, "learning_rate = %.9g\n", o->learning_rate);
  if (o->type != NNT_OPT_SGD)
    fprintf(f, "beta1 = %.9g\nbeta2 = %.9g\nepsilon = %.9g\n", o->beta1, o->beta2, o->epsilon);
  if (o->type == NNT_OPT_ADAMW)
    fprintf(f, "weight_decay = %.9g\n", o->weight_decay);
  if (o->legacy_decay)
    fprintf(f, "decay_rate = %.9g\ndecay_steps = %u\n", o->decay_rate, o->decay_steps);
  const nnt_lr_scheduler *s = o->sched;
  if (!s)
    return;
  fprintf(f, "\n[LearningRateScheduler]\ntype = %s\n", nnt_lrs_type_name(s->type));
  if (!isnan(s->learning_rate) && s->type != NNT_LRS_STEP)
    fprintf(f, "learning_rate = %.9g\n", s->learning_rate);
  if (s->type == NNT_LRS_EXPONENTIAL)
    fprintf(f, "decay_rate = %.9g\n", s->decay_rate);
  if (s->type == NNT_LRS_EXPONENTIAL || s->type == NNT_LRS_COSINE || s->type == NNT_LRS_LINEAR)
    fprintf(f, "decay_steps = %u\n", s->decay_steps);
  if (s->type == NNT_LRS_COSINE || s->type == NNT_LRS_LINEAR)
    fprintf(f, "max_learning_rate = %.9g\nmin_learning_rate = %.9g\n", s->max_lr, s->min_lr);
  if (s->type == NNT_LRS_STEP) {
    write_floats(f, "learning_rate", s->step_lr, s->n_steps_lr);
    fprintf(f, "iteration = ");
    for (unsigned i = 0; i < s->n_steps_iter; i++)
      fprintf(f, "%s%u", i ? ", " : "", s->step_iter[i]);
    fputc('\n', f);
  }
}

static void write_layer(FILE *f, const nnt_layer *l, int *rc, nnt_err *e) {
  if (!*rc && !nnt_ini_name_writable(l->name, 1)) {
    *rc = nnt_err_set(e, NNT_ERR_INVAL, "save: layer name '%.200s' cannot be a [section] name "
                      "(it holds ']', ':', a control character or blanks at an end)", l->name);
    return;
  }
  fprintf(f, "\n[%s]\ntype = %s\n", l->name, l->ops->type);
  for (size_t i = 0; i < l->n_props; i++)
    put(f, l->name, l->prop_key[i], l->prop_val[i], rc, e);
}

typedef struct ini_job {
  const nnt_model *m;
  const char *bin_path;
} ini_job;

/* Write errors are the stream's, seen by nnt_file_save; a name or value
 * that cannot be written fails the save, which then leaves no file. */
static int write_ini(FILE *f, void *ud, nnt_err *e) {
  const ini_job *j = ud;
  int rc = NNT_OK;
  fprintf(f, "# written by nntrainer\n");
  write_model(f, j->m, j->bin_path, &rc, e);
  if (j->m->opt)
    write_optimizer(f, j->m->opt);
  for (size_t i = 0; i < j->m->n_layers; i++)
    write_layer(f, j->m->layers[i], &rc, e);
  return rc;
}

int nnt_model_save_ini(nnt_model *m, const char *path, const char *bin_path, nnt_err *e) {
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "save: empty file path");
  ini_job j = {m, bin_path};
  return nnt_file_save(path, "save", write_ini, &j, e);
}
