/* Allocation failure across the command-line tool (issue 10): `nntrainer
 * train` (raw-file training, validation and test sets, checkpoints),
 * `train --synthetic --dump`, `summary` and `plan --svg`, run in-process
 * through nnt_cli_main with stdout and stderr in files. The sweep
 * (alloc_sweep.h) fails each allocation in turn: every failing run exits
 * with 1 and "nntrainer: error: ..." naming the memory on stderr, prints
 * on stdout no more than the start of what a run without failures prints,
 * leaks nothing, leaves no thread, and leaves each file absent or as a run
 * without failures wrote it; a run that succeeds prints and writes exactly
 * what the reference run did. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "alloc_sweep.h"
#include "test_util.h"
#include "tools/cli.h"

static const char *const model_ini =
    "[Model]\n"
    "type = NeuralNetwork\n"
    "epochs = 2\n"
    "batch_size = 2\n"
    "loss = cross\n"
    "seed = 7\n"
    "save_path = ckpt.bin\n"
    "[Optimizer]\n"
    "type = adam\n"
    "[LearningRateScheduler]\n"
    "type = step\n"
    "learning_rate = 0.01, 0.005\n"
    "iteration = 3\n"
    "[train_set]\n"
    "type = file\n"
    "path = train.dat\n"
    "[valid_set]\n"
    "type = file\n"
    "path = valid.dat\n"
    "[test_set]\n"
    "type = file\n"
    "path = valid.dat\n"
    "[in]\n"
    "type = input\n"
    "input_shape = 1:4:4\n"
    "[conv]\n"
    "type = conv2d\n"
    "filters = 2\n"
    "kernel_size = 3,3\n"
    "padding = same\n"
    "[bn]\n"
    "type = batch_normalization\n"
    "activation = relu\n"
    "[res]\n"
    "type = addition\n"
    "input_layers = conv, bn\n"
    "[pool]\n"
    "type = pooling2d\n"
    "pooling = average\n"
    "pool_size = 2,2\n"
    "stride = 2,2\n"
    "flatten = true\n"
    "[drop]\n"
    "type = dropout\n"
    "dropout_rate = 0.25\n"
    "[out]\n"
    "type = fully_connected\n"
    "unit = 3\n"
    "activation = softmax\n";

typedef struct cli_ctx {
  char *dir;
  char ini[512], ckpt[512], svg[512], dump[512], out[512], err[512];
  const char *args[16]; /* after "nntrainer" */
  int argc;
  char *ref_stdout;     /* what a run without failures printed */
  size_t ref_len;
} cli_ctx;

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  size_t cap = 4096, n = 0;
  char *b = malloc(cap + 1);
  for (size_t r; (r = fread(b + n, 1, cap - n, f)) > 0;)
    if ((n += r) == cap)
      b = realloc(b, (cap *= 2) + 1);
  fclose(f);
  b[n] = '\0';
  *len = n;
  return b;
}

/* Run the CLI with c->args; stdout and stderr into the files c->out and
 * c->err. @return its exit code. */
static int run_cli(cli_ctx *c) {
  char *argv[18];
  argv[0] = "nntrainer";
  for (int i = 0; i < c->argc; i++)
    argv[i + 1] = (char *)c->args[i];
  argv[c->argc + 1] = NULL;
  fflush(stdout);
  fflush(stderr);
  int so = dup(1), se = dup(2);
  int fo = open(c->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int fe = open(c->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(so >= 0 && se >= 0 && fo >= 0 && fe >= 0);
  dup2(fo, 1);
  dup2(fe, 2);
  int rc = nnt_cli_main(c->argc + 1, argv);
  fflush(stdout);
  fflush(stderr);
  dup2(so, 1);
  dup2(se, 2);
  close(so), close(se), close(fo), close(fe);
  return rc;
}

/* stdout without what differs between runs: the number after each
 * "planning" (the planning time). A new string. */
static char *normalized(const char *text) {
  char *copy = strdup(text), *w = copy;
  for (const char *p = text; *p;) {
    if (!strncmp(p, "planning", 8)) {
      memcpy(w, p, 8), w += 8, p += 8;
      while (*p && *p != '\n' && !(*p >= '0' && *p <= '9'))
        *w++ = *p++;
      while ((*p >= '0' && *p <= '9') || *p == '.')
        p++;
    } else {
      *w++ = *p++;
    }
  }
  *w = '\0';
  return copy;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file under the dump folder, by name. */
static void put_dump(sw_out *out, const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  char *names[SW_MAX_OUT];
  int n = 0;
  for (struct dirent *ent; (ent = readdir(d));)
    if (ent->d_name[0] != '.') {
      if (n == SW_MAX_OUT)
        fail_msg("more than %d files in %s", SW_MAX_OUT, dir);
      names[n++] = strdup(ent->d_name);
    }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], cmp_name);
  for (int i = 0; i < n; i++) {
    char p[8192], key[4200];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    snprintf(key, sizeof key, "dump/%s", names[i]);
    sw_put_file(out, key, p);
    free(names[i]);
  }
}

static int cli_job(void *vc, sw_out *out, char *msg) {
  cli_ctx *c = vc;
  unlink(c->ckpt);
  unlink(c->svg);
  tu_rmdir(c->dump);
  int rc = run_cli(c);
  size_t olen, elen;
  char *so = slurp(c->out, &olen), *se = slurp(c->err, &elen);
  if (rc) {
    snprintf(msg, SW_MSG_MAX, "%s", se);
    if (!strstr(se, "nntrainer: error: "))
      fail_msg("nntrainer %s: exit %d without an error line: %s", c->args[0], rc, se);
    if (!strstr(se, "memory") && !strstr(se, "allocate"))
      fail_msg("nntrainer %s: exit %d, the message does not say memory ran out: %s",
               c->args[0], rc, se);
    /* what it printed is the start of what a whole run prints */
    char *got = normalized(so);
    size_t n = strlen(got);
    if (c->ref_stdout && (n > strlen(c->ref_stdout) || memcmp(got, c->ref_stdout, n)))
      fail_msg("nntrainer %s: exit %d after printing what a whole run does not: %s",
               c->args[0], rc, so);
    free(got);
  } else {
    char *got = normalized(so);
    sw_put(out, "stdout", got, strlen(got));
    free(got);
  }
  sw_put_file(out, "ckpt.bin", c->ckpt);
  sw_put_file(out, "plan.svg", c->svg);
  put_dump(out, c->dump);
  free(so);
  free(se);
  return rc;
}

static int setup(void **state) {
  cli_ctx *c = calloc(1, sizeof *c);
  c->dir = sw_mkdtemp();
  snprintf(c->ini, sizeof c->ini, "%s/model.ini", c->dir);
  snprintf(c->ckpt, sizeof c->ckpt, "%s/ckpt.bin", c->dir);
  snprintf(c->svg, sizeof c->svg, "%s/plan.svg", c->dir);
  snprintf(c->dump, sizeof c->dump, "%s/dump", c->dir);
  snprintf(c->out, sizeof c->out, "%s/stdout.txt", c->dir);
  snprintf(c->err, sizeof c->err, "%s/stderr.txt", c->dir);
  FILE *f = fopen(c->ini, "w");
  assert_non_null(f);
  fputs(model_ini, f);
  fclose(f);
  char p[600];
  snprintf(p, sizeof p, "%s/train.dat", c->dir);
  sw_write_raw(p, 6, 1);
  snprintf(p, sizeof p, "%s/valid.dat", c->dir);
  sw_write_raw(p, 4, 2);
  *state = c;
  return 0;
}

static int teardown(void **state) {
  cli_ctx *c = *state;
  tu_rmdir(c->dir);
  free(c->dir);
  free(c->ref_stdout);
  free(c);
  return 0;
}

static const int exit_1[] = {1, 0};

/* Sweep `nntrainer ARGS` both ways (failing from N on, failing once);
 * partial: the versions a failing run may leave of the files. */
static void sweep_cli(cli_ctx *c, const char *name, const sw_out *partial) {
  /* a run without failures first: what a failing run may print */
  sw_out ref = {0};
  char msg[SW_MSG_MAX] = "";
  free(c->ref_stdout);
  c->ref_stdout = NULL;
  assert_int_equal(cli_job(c, &ref, msg), 0);
  char *raw = slurp(c->out, &c->ref_len);
  c->ref_stdout = normalized(raw);
  free(raw);
  sw_out_free(&ref);
  for (int once = 0; once < 2; once++) {
    sw_config cfg = {.name = name, .job = cli_job, .ctx = c, .codes = exit_1,
                     .partial = partial, .once = once, .max_trials = 20000};
    sw_stats st = sw_run(&cfg, NULL);
    assert_true(st.trials > 50);
    assert_int_equal(st.absorbed, 0);
  }
}

static void test_cli_train(void **state) {
  cli_ctx *c = *state;
  /* the checkpoint of epoch 1, which a failure in epoch 2 leaves */
  sw_out partial = {0}, ref = {0};
  char msg[SW_MSG_MAX] = "";
  const char *one[] = {"train", c->ini, "epochs=1"};
  memcpy(c->args, one, sizeof one);
  c->argc = 3;
  assert_int_equal(cli_job(c, &ref, msg), 0);
  assert_true(sw_put_file(&partial, "ckpt.bin", c->ckpt));
  sw_out_free(&ref);
  const char *args[] = {"train", c->ini};
  memcpy(c->args, args, sizeof args);
  c->argc = 2;
  sweep_cli(c, "nntrainer train", &partial);
  sw_out_free(&partial);
}

static void test_cli_train_dump(void **state) {
  cli_ctx *c = *state;
  const char *args[] = {"train",  c->ini,  "--synthetic=8", "--seed", "3",
                        "--dump", c->dump, "epochs=1",      "save_path="};
  memcpy(c->args, args, sizeof args);
  c->argc = 9;
  sweep_cli(c, "nntrainer train --synthetic --dump", NULL);
}

static void test_cli_summary(void **state) {
  cli_ctx *c = *state;
  const char *args[] = {"summary", c->ini, "out.unit=4"};
  memcpy(c->args, args, sizeof args);
  c->argc = 3;
  sweep_cli(c, "nntrainer summary", NULL);
}

static void test_cli_plan(void **state) {
  cli_ctx *c = *state;
  const char *args[] = {"plan", c->ini, "--verbose", "--svg", c->svg};
  memcpy(c->args, args, sizeof args);
  c->argc = 5;
  sweep_cli(c, "nntrainer plan --svg", NULL);
  const char *json[] = {"plan", c->ini, "--mode", "infer", "--json", "--planner", "pool"};
  memcpy(c->args, json, sizeof json);
  c->argc = 7;
  sweep_cli(c, "nntrainer plan --json", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_cli_train, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cli_train_dump, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cli_summary, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cli_plan, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
