/* The model's inputs read where the caller's batch lies (plan.c
 * borrows_inputs): on the CPU with memory_optimization the plans hold no
 * input, nothing writes over the batch (checked by handing every pass its
 * inputs in read-only pages: a write would fault), and training and
 * inference give bitwise what memory_optimization=false gives, where the
 * input is a copy in the arena. Models where a layer could otherwise run
 * in place over the input: an activation and a frozen same-size
 * convolution right after it, an input layer that normalizes, a flatten. */
#include "test_util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nntrainer/ini.h"
#include "nntrainer/model_impl.h"

#define BATCH 4

static const char *const models[] = {
    /* an MLP */
    "[Model]\nbatch_size = 4\nepochs = 1\nloss = cross\n[Optimizer]\ntype = adam\n"
    "[in]\ntype = input\ninput_shape = 1:1:256\n"
    "[fc1]\ntype = fully_connected\nunit = 32\nactivation = relu\n"
    "[fc2]\ntype = fully_connected\nunit = 10\nactivation = softmax\n",
    /* an activation (in place where it may) right after the input, a flatten */
    "[Model]\nbatch_size = 4\nepochs = 1\nloss = mse\n[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[in]\ntype = input\ninput_shape = 4:8:8\n"
    "[act]\ntype = activation\nactivation = tanh\n"
    "[flat]\ntype = flatten\n"
    "[fc]\ntype = fully_connected\nunit = 10\n",
    /* a frozen convolution that keeps its image (runs in place where no
     * backward reads its input), then one that trains */
    "[Model]\nbatch_size = 4\nepochs = 1\nloss = mse\n[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[in]\ntype = input\ninput_shape = 4:8:8\n"
    "[c0]\ntype = conv2d\nfilters = 4\nkernel_size = 3,3\npadding = same\ntrainable = false\n"
    "[c1]\ntype = conv2d\nfilters = 2\nkernel_size = 3,3\npadding = same\n"
    "[flat]\ntype = flatten\n"
    "[fc]\ntype = fully_connected\nunit = 10\n",
    /* an input layer that normalizes (writes its own output) */
    "[Model]\nbatch_size = 4\nepochs = 1\nloss = mse\n[Optimizer]\ntype = sgd\nlearning_rate = 0.1\n"
    "[in]\ntype = input\ninput_shape = 1:1:64\nnormalization = true\n"
    "[fc]\ntype = fully_connected\nunit = 10\n",
};

/* A generator of the batch (x, y): one epoch is one step. */
typedef struct feed {
  const float *x, *y;
  size_t in_len, lab_len;
  unsigned k;
} feed;

static int feed_cb(float **in, float **label, bool *last, void *ud) {
  feed *f = ud;
  unsigned s = f->k++ % BATCH;
  memcpy(in[0], f->x + s * f->in_len, f->in_len * sizeof(float));
  memcpy(label[0], f->y + s * f->lab_len, f->lab_len * sizeof(float));
  *last = s == BATCH - 1;
  return 0;
}

static nnt_model *make(const char *text, int memopt) {
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  const char *ov[] = {memopt ? "memory_optimization=true" : "memory_optimization=false",
                      "seed=5"};
  if (nnt_ini_load_text(m, "borrowed.ini", text, strlen(text), ov, 2, &e) ||
      nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  return m;
}

/* n floats in pages that only allow reads: what the model writes there
 * faults. */
static float *read_only(const float *src, size_t n, size_t *bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  *bytes = (n * sizeof(float) + page - 1) / page * page;
  float *p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  memcpy(p, src, n * sizeof(float));
  assert_int_equal(mprotect(p, *bytes, PROT_READ), 0);
  return p;
}

static void test_batch_read_in_place(void **state) {
  (void)state;
  nnt_rng r;
  nnt_rng_seed(&r, 3);
  for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
    nnt_model *a = make(models[i], 1), *b = make(models[i], 0);
    nnt_err e = {0};
    size_t in_len = nnt_dim_feature_len(a->input_dim[0]) * BATCH;
    size_t lab_len = nnt_dim_feature_len(a->label_dim[0]) * BATCH;
    float *x = tu_rand(&r, in_len, -1.0f, 1.0f), *y = tu_rand(&r, lab_len, 0.0f, 1.0f);
    size_t bytes;
    float *ro = read_only(x, in_len, &bytes);
    const float *ins[] = {ro}, *labels[] = {y};
    /* a first step through the dataset's queue (it makes the optimizer's
     * state), then the plans, then three steps on the read-only batch */
    feed fa = {x, y, in_len / BATCH, lab_len / BATCH, 0}, fb = fa;
    nnt_dataset *da, *db;
    assert_int_equal(nnt_dataset_create_generator(feed_cb, &fa, &da, &e), NNT_OK);
    assert_int_equal(nnt_dataset_create_generator(feed_cb, &fb, &db, &e), NNT_OK);
    assert_int_equal(nnt_model_set_dataset(a, NNT_DS_TRAIN, da, &e), NNT_OK);
    assert_int_equal(nnt_model_set_dataset(b, NNT_DS_TRAIN, db, &e), NNT_OK);
    if (nnt_model_train(a, NULL, NULL, &e) || nnt_model_train(b, NULL, NULL, &e))
      fail_msg("model %zu: %s", i, e.msg);
    assert_int_equal(nnt_model_plan(a, NNT_MODE_TRAIN, &e), NNT_OK);
    assert_true(nnt_mgr_borrowed(&a->mgr[NNT_MODE_TRAIN], a->input_t[0]));
    assert_int_equal(nnt_mgr_kind_bytes(&a->mgr[NNT_MODE_TRAIN], NNT_TK_INPUT), 0);
    assert_int_equal(nnt_model_plan(b, NNT_MODE_TRAIN, &e), NNT_OK);
    assert_false(nnt_mgr_borrowed(&b->mgr[NNT_MODE_TRAIN], b->input_t[0]));
    assert_int_equal(nnt_mgr_kind_bytes(&b->mgr[NNT_MODE_TRAIN], NNT_TK_INPUT),
                     in_len * sizeof(float));
    for (int s = 0; s < 3; s++) {
      float la, lb;
      if (nnt_model_train_batch(a, NULL, ins, labels, &la, &e) ||
          nnt_model_train_batch(b, NULL, ins, labels, &lb, &e))
        fail_msg("model %zu: %s", i, e.msg);
      assert_memory_equal(&la, &lb, sizeof la);
    }
    assert_memory_equal(a->wpool, b->wpool, a->wpool_floats * sizeof(float));
    /* inference on the same pages */
    size_t out_len = nnt_dim_feature_len(a->nodes[a->n_nodes - 1].fc.out_dim[0]) * BATCH;
    float *oa = malloc(out_len * sizeof(float)), *ob = malloc(out_len * sizeof(float));
    float *outa[] = {oa}, *outb[] = {ob};
    if (nnt_model_infer(a, ins, outa, &e) || nnt_model_infer(b, ins, outb, &e))
      fail_msg("model %zu: %s", i, e.msg);
    assert_memory_equal(oa, ob, out_len * sizeof(float));
    assert_memory_equal(ro, x, in_len * sizeof(float));
    munmap(ro, bytes);
    free(oa), free(ob), free(x), free(y);
    nnt_model_destroy(a);
    nnt_model_destroy(b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_read_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
