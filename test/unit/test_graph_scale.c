/* Models with very many layers: a hostile INI may hold hundreds of
 * thousands of sections, so building and compiling a model must be linear
 * in its layers and must not recurse once per layer (a long chain would
 * overflow the stack). The compile runs on a thread with a small stack,
 * where the old recursive sort crashed. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "nntrainer/model_impl.h"
#include "test_util.h"

#define CHAIN 100000

static nnt_model *chain_model(unsigned n) {
  nnt_err e = {0};
  nnt_model *m = NULL;
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_model_set_property(m, "batch_size", "1", &e), NNT_OK);
  nnt_layer *l;
  assert_int_equal(nnt_layer_create("input", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "name", "in", &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "input_shape", "1:1:1", &e), NNT_OK);
  assert_int_equal(nnt_model_add_layer(m, l, &e), NNT_OK);
  char name[32];
  for (unsigned i = 0; i < n; i++) {
    snprintf(name, sizeof name, "id%u", i);
    if (nnt_layer_create("identity", &l, &e) || nnt_layer_set_property(l, "name", name, &e) ||
        nnt_model_add_layer(m, l, &e))
      fail_msg("layer %u: %s", i, e.msg);
  }
  return m;
}

typedef struct job {
  nnt_model *m;
  int rc;
  nnt_err e;
} job;

static void *compile_job(void *p) {
  job *j = p;
  j->rc = nnt_model_compile(j->m, &j->e);
  return NULL;
}

/* Compile on a thread whose stack is 256 KiB. */
static int compile_small_stack(nnt_model *m, nnt_err *e) {
  pthread_attr_t a;
  pthread_t t;
  job j = {m, -1, {0}};
  assert_int_equal(pthread_attr_init(&a), 0);
  assert_int_equal(pthread_attr_setstacksize(&a, 256 * 1024), 0);
  assert_int_equal(pthread_create(&t, &a, compile_job, &j), 0);
  pthread_join(t, NULL);
  pthread_attr_destroy(&a);
  *e = j.e;
  return j.rc;
}

static void test_long_chain_compiles(void **state) {
  (void)state;
  nnt_model *m = chain_model(CHAIN);
  nnt_err e = {0};
  if (compile_small_stack(m, &e))
    fail_msg("%s", e.msg);
  assert_int_equal(m->n_nodes, CHAIN + 1);
  /* the sort kept section order along the chain */
  for (size_t i = 1; i < m->n_nodes; i++)
    assert_int_equal(m->nodes[i].in_node[0], i - 1);
  assert_int_equal(m->nodes[0].fc.n_consumers, 1);
  assert_int_equal(m->nodes[CHAIN].fc.n_consumers, 0);
  nnt_model_destroy(m);
}

/* A cycle deep in a long graph is still found, without recursion. */
static void test_long_cycle_refused(void **state) {
  (void)state;
  nnt_model *m = chain_model(CHAIN);
  nnt_err e = {0};
  /* id0 reads the last layer: a cycle through the whole chain */
  nnt_layer *first = nnt_model_find_layer(m, "id0");
  char last[32];
  snprintf(last, sizeof last, "id%u", CHAIN - 1);
  assert_int_equal(nnt_layer_set_property(first, "input_layers", last, &e), NNT_OK);
  assert_int_equal(compile_small_stack(m, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "form a cycle");
  nnt_model_destroy(m);
}

/* Names are indexed: duplicates are refused at once, also differing in
 * case, and a rename keeps the index right. */
static void test_names_indexed(void **state) {
  (void)state;
  nnt_model *m = chain_model(1000);
  nnt_err e = {0};
  nnt_layer *l;
  assert_int_equal(nnt_layer_create("identity", &l, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l, "name", "ID500", &e), NNT_OK);
  assert_int_equal(nnt_model_add_layer(m, l, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "already exists");
  /* rename id500 to x: ID500 is free, x is taken */
  nnt_layer *old = nnt_model_find_layer(m, "Id500");
  assert_non_null(old);
  assert_int_equal(nnt_model_rename_layer(m, old, "id7", &e), NNT_ERR_INVAL);
  assert_string_equal(old->name, "id500");
  assert_int_equal(nnt_model_rename_layer(m, old, "x", &e), NNT_OK);
  assert_ptr_equal(nnt_model_find_layer(m, "X"), old);
  assert_null(nnt_model_find_layer(m, "id500"));
  assert_int_equal(nnt_model_add_layer(m, l, &e), NNT_OK);
  assert_ptr_equal(nnt_model_find_layer(m, "id500"), l);
  nnt_layer *l2;
  assert_int_equal(nnt_layer_create("identity", &l2, &e), NNT_OK);
  assert_int_equal(nnt_layer_set_property(l2, "name", "x", &e), NNT_OK);
  assert_int_equal(nnt_model_add_layer(m, l2, &e), NNT_ERR_INVAL);
  nnt_layer_destroy(l2);
  nnt_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_chain_compiles),
      cmocka_unit_test(test_long_cycle_refused),
      cmocka_unit_test(test_names_indexed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
