/* Writing a model's configuration back as an INI file in NNTrainer's format:
 * what ml_train_model_save() does for the INI formats. */
#include "nntrainer/model_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_model(FILE *f, const nnt_model *m, const char *bin_path) {
  fprintf(f, "[Model]\ntype = NeuralNetwork\nepochs = %u\nbatch_size = %u\n", m->epochs,
          m->batch);
  if (m->loss != NNT_LOSS_NONE)
    fprintf(f, "loss = %s\n", nnt_loss_name(m->loss));
  const char *save = bin_path ? bin_path : m->save_path;
  if (save)
    fprintf(f, "save_path = %s\n", save);
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

static void write_layer(FILE *f, const nnt_layer *l) {
  fprintf(f, "\n[%s]\ntype = %s\n", l->name, l->ops->type);
  for (size_t i = 0; i < l->n_props; i++)
    fprintf(f, "%s = %s\n", l->prop_key[i], l->prop_val[i]);
}

int nnt_model_save_ini(nnt_model *m, const char *path, const char *bin_path, nnt_err *e) {
  if (!path || !path[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "save: empty file path");
  size_t n = strlen(path) + 16;
  char *tmp = nnt_malloc(n);
  if (!tmp)
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory saving '%s'", path);
  snprintf(tmp, n, "%s.tmpXXXXXX", path);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    if (fd >= 0) {
      close(fd);
      unlink(tmp);
    }
    int rc = nnt_err_set(e, NNT_ERR_IO, "save: cannot write '%s': %s", path, strerror(errno));
    nnt_free(tmp);
    return rc;
  }
  fprintf(f, "# written by nntrainer\n");
  write_model(f, m, bin_path);
  if (m->opt)
    write_optimizer(f, m->opt);
  for (size_t i = 0; i < m->n_layers; i++)
    write_layer(f, m->layers[i]);
  int ok = !ferror(f);
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    int rc = nnt_err_set(e, NNT_ERR_IO, "save: cannot write '%s': %s", path, strerror(errno));
    unlink(tmp);
    nnt_free(tmp);
    return rc;
  }
  nnt_free(tmp);
  return NNT_OK;
}
