/* A layer type's kops (and the core's, nnt_graph_core_kops) must cover every
 * kernel op it calls, or the supports gate would let a model through to a
 * backend that cannot run it. Models that use every layer type train and
 * validate on a backend whose kernel table records each call, with every
 * layer's forward, calc_gradient and calc_derivative wrapped to say whose
 * call it is; every recorded op must be in the caller's kops. */
#include "test_util.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "nntrainer/ini.h"
#include "type_models.h"
#include "nntrainer/model_impl.h"

/* ---- the recording kernel table ------------------------------------------ */

static uint64_t *rec_into; /* the set the running code's calls go to */
static uint64_t rec_core;  /* calls made outside any layer's functions */
static const nnt_kernels *base;

#define MARK(E) (*(rec_into ? rec_into : &rec_core) |= NNT_KOP_BIT(E))
/* One wrapper per entry (every entry returns its status). When an
 * entry's signature changes, change its line here. */
#define V(E, n, params, args)                                                             \
  static int rec_##n SELF_PARAMS params {                                                 \
    (void)self;                                                                            \
    MARK(E);                                                                               \
    return base->n BASE_ARGS args;                                                         \
  }
/* (a, b) -> (const nnt_kernels *self, a, b) and (a, b) -> (base, a, b) */
#define SELF_PARAMS(...) (const nnt_kernels *self, __VA_ARGS__)
#define BASE_ARGS(...) (base, __VA_ARGS__)
typedef const float *cf;
typedef const struct nnt_conv_geom *cg;
V(GEMM, gemm, (int ta, int tb, size_t m, size_t n, size_t k, float al, cf a, size_t lda, cf b,
               size_t ldb, float be, float *c, size_t ldc),
  (ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc))
V(GEMM_ROWS, gemm_rows, (int ta, int tb, size_t m, size_t n, size_t k, float al, cf a,
                         size_t lda, cf b, size_t ldb, float be, float *c, size_t ldc),
  (ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc))
V(FILL, fill, (size_t n, float v, float *y), (n, v, y))
V(COPY, copy, (size_t n, cf x, float *y), (n, x, y))
V(COPY2D, copy2d, (size_t r, size_t c, cf x, size_t ldx, float *y, size_t ldy),
  (r, c, x, ldx, y, ldy))
V(SCALE, scale, (size_t n, float a, float *y), (n, a, y))
V(AXPY, axpy, (size_t n, float a, cf x, float *y), (n, a, x, y))
V(ADD, add, (size_t n, cf a, cf b, float *y), (n, a, b, y))
V(SUB, sub, (size_t n, cf a, cf b, float *y), (n, a, b, y))
V(MUL, mul, (size_t n, cf a, cf b, float *y), (n, a, b, y))
V(DOT, dot, (size_t n, cf x, cf y, float *o), (n, x, y, o))
V(SUM, sum, (size_t n, cf x, float *o), (n, x, o))
V(ADD_ROW_VEC, add_row_vec, (size_t r, size_t c, cf v, float *y), (r, c, v, y))
V(ADD_COL_VEC, add_col_vec, (size_t r, size_t c, cf v, float *y), (r, c, v, y))
V(SUM_COLS, sum_cols, (size_t r, size_t c, cf x, float b, float *o), (r, c, x, b, o))
V(SUM_ROWS, sum_rows, (size_t r, size_t c, cf x, float b, float *o), (r, c, x, b, o))
V(ACT_FWD, act_fwd, (nnt_act a, float al, size_t n, cf x, float *y), (a, al, n, x, y))
V(ACT_BWD, act_bwd, (nnt_act a, float al, size_t n, cf x, cf y, cf dy, float *dx),
  (a, al, n, x, y, dy, dx))
V(ACT_MASK, act_mask, (size_t n, cf y, float *m), (n, y, m))
V(ACT_BWD_MASK, act_bwd_mask, (nnt_act a, float al, size_t n, cf m, cf dy, float *dx),
  (a, al, n, m, dy, dx))
V(SOFTMAX_FWD, softmax_fwd, (size_t r, size_t c, cf x, float *y), (r, c, x, y))
V(SOFTMAX_BWD, softmax_bwd, (size_t r, size_t c, cf y, cf dy, float *dx), (r, c, y, dy, dx))
V(NORMALIZE_ROWS, normalize_rows, (size_t r, size_t c, unsigned mode, cf x, float *y),
  (r, c, mode, x, y))
V(XENT_SOFTMAX_FWD, xent_softmax_fwd, (size_t r, size_t c, cf p, cf l, float *o),
  (r, c, p, l, o))
V(XENT_SOFTMAX_BWD, xent_softmax_bwd, (size_t r, size_t c, cf p, cf l, float *dx),
  (r, c, p, l, dx))
V(XENT_SIGMOID_FWD, xent_sigmoid_fwd, (size_t r, size_t c, cf x, cf l, float *o),
  (r, c, x, l, o))
V(XENT_SIGMOID_BWD, xent_sigmoid_bwd, (size_t r, size_t c, cf x, cf l, float *dx),
  (r, c, x, l, dx))
V(MSE_FWD, mse_fwd, (size_t n, cf y, cf l, float *o), (n, y, l, o))
V(MSE_BWD, mse_bwd, (size_t n, cf y, cf l, float *dx), (n, y, l, dx))
V(ARGMAX_MATCH, argmax_match, (size_t r, size_t c, cf y, cf l, float *o), (r, c, y, l, o))
V(DROPOUT_MASK, dropout_mask, (size_t n, float rate, uint64_t key, uint64_t st, float *mask),
  (n, rate, key, st, mask))
V(BN_FWD_TRAIN, bn_fwd_train, (size_t o, size_t ch, size_t in, cf x, cf g, cf b, float eps,
                               float *mean, float *var, float *invstd, float *xhat, float *y),
  (o, ch, in, x, g, b, eps, mean, var, invstd, xhat, y))
V(BN_FWD_INFER, bn_fwd_infer, (size_t o, size_t ch, size_t in, cf x, cf mean, cf var, cf g,
                               cf b, float eps, float *y),
  (o, ch, in, x, mean, var, g, b, eps, y))
V(BN_BWD, bn_bwd, (size_t o, size_t ch, size_t in, cf dy, cf xhat, cf invstd, cf g, float *dx,
                   float *dg, float *db),
  (o, ch, in, dy, xhat, invstd, g, dx, dg, db))
V(PERMUTE3, permute3, (size_t b, const unsigned d[3], const unsigned p[3], cf x, float *y),
  (b, d, p, x, y))
V(UPSAMPLE_NEAREST_FWD, upsample_nearest_fwd,
  (size_t r, size_t h, size_t w, size_t kh, size_t kw, cf x, float *y), (r, h, w, kh, kw, x, y))
V(UPSAMPLE_NEAREST_BWD, upsample_nearest_bwd,
  (size_t r, size_t h, size_t w, size_t kh, size_t kw, cf dy, float *dx),
  (r, h, w, kh, kw, dy, dx))
V(IM2COL, im2col, (cg g, size_t n, cf x, float *col), (g, n, x, col))
V(COL2IM, col2im, (cg g, size_t n, cf col, float *dx), (g, n, col, dx))
V(POOL_FWD, pool_fwd, (cg g, size_t n, int mode, cf x, float *y, float *idx),
  (g, n, mode, x, y, idx))
V(POOL_BWD, pool_bwd, (cg g, size_t n, int mode, cf dy, cf idx, float *dx),
  (g, n, mode, dy, idx, dx))
V(SGD_STEP, sgd_step, (size_t n, float lr, cf g, float *w, cf skip), (n, lr, g, w, skip))
V(ADAM_STEP, adam_step, (size_t n, float lr, float b1, float b2, float eps, float ws, cf g,
                         float *m, float *v, float *w, cf skip),
  (n, lr, b1, b2, eps, ws, g, m, v, w, skip))
V(CLIP_SCALE, clip_scale, (size_t n, float mx, cf sq, float *y), (n, mx, sq, y))
V(FLAG_NONFINITE, flag_nonfinite, (size_t n, cf x, float *flag, float *any), (n, x, flag, any))
V(MASK_UPPER, mask_upper, (size_t mats, size_t rows, size_t cols, float v, float *y),
  (mats, rows, cols, v, y))
V(GATHER_ROWS, gather_rows, (size_t r, size_t c, size_t n, cf idx, cf t, size_t mask, float *y),
  (r, c, n, idx, t, mask, y))
V(SCATTER_ADD_ROWS, scatter_add_rows,
  (size_t r, size_t c, size_t n, cf idx, cf dy, size_t mask, float *dt),
  (r, c, n, idx, dy, mask, dt))
V(LN_FWD, ln_fwd, (size_t r, size_t c, cf x, cf g, cf b, float eps, float *mean, float *is,
                   float *y),
  (r, c, x, g, b, eps, mean, is, y))
V(LN_BWD, ln_bwd, (size_t r, size_t c, cf x, cf dy, cf mean, cf is, cf g, float *dx, float *dg,
                   float *db),
  (r, c, x, dy, mean, is, g, dx, dg, db))
V(POS_ENCODING, pos_encoding, (size_t t, size_t d, float *tab), (t, d, tab))
V(DIV, div, (size_t n, cf a, cf b, float *y), (n, a, b, y))
V(BN_AFFINE, bn_affine, (size_t o, size_t ch, size_t in, cf xhat, cf g, cf b, float *y),
  (o, ch, in, xhat, g, b, y))
V(CONV_FWD, conv_fwd, (const struct nnt_conv_geom *g, size_t n, size_t f, cf w, cf b, cf x,
                       float *y),
  (g, n, f, w, b, x, y))
V(CONV_BWD_X, conv_bwd_x, (const struct nnt_conv_geom *g, size_t n, size_t f, cf w, cf dy,
                           float *dx),
  (g, n, f, w, dy, dx))
V(CONV_BWD_W, conv_bwd_w, (const struct nnt_conv_geom *g, size_t n, size_t f, cf x, cf dy,
                           float *dw),
  (g, n, f, x, dy, dw))
V(CONV_WINO, conv_wino, (const struct nnt_conv_geom *g, size_t n, size_t f, int flip, cf w, cf b,
                         cf x, float *y, float *s, size_t sl),
  (g, n, f, flip, w, b, x, y, s, sl))
V(COL2IM_SET, col2im_set, (const struct nnt_conv_geom *g, size_t n, cf col, float *dx),
  (g, n, col, dx))
V(CONV_WINO_DW, conv_wino_dw, (const struct nnt_conv_geom *g, size_t n, size_t f, cf dy, cf x,
                               float *dw, float *s, size_t sl),
  (g, n, f, dy, x, dw, s, sl))
V(BN_BWD_MEANS, bn_bwd_means, (size_t o, size_t ch, size_t in, cf dy, cf xhat, cf invstd, cf g,
                               float *dx, float *dg, float *db, float *means),
  (o, ch, in, dy, xhat, invstd, g, dx, dg, db, means))
V(CONV_BWD_X_ADD, conv_bwd_x_add, (const struct nnt_conv_geom *g, size_t n, size_t f, cf w,
                                   cf dy, float *dx),
  (g, n, f, w, dy, dx))
V(BN_FWD_STATS, bn_fwd_stats, (size_t o, size_t ch, size_t in, cf x, cf mean, cf is, cf g, cf b,
                               float *y),
  (o, ch, in, x, mean, is, g, b, y))

/* The CPU's table with every op of NNT_KOP_LIST replaced by its wrapper. */
static nnt_kernels rec_table(void) {
  base = nnt_kernels_cpu();
  nnt_kernels k = *base;
  k.name = "recording";
  k.parallel = NULL; /* the recording sets are not shared between threads */
#define SET(E, n) k.n = rec_##n;
  NNT_KOP_LIST(SET)
#undef SET
  return k;
}

/* Every op of the list has its entry in the table, and a wrapper: a new
 * op in NNT_KOP_LIST without a line above does not compile, and an entry of
 * the table without an op in the list is found here. */
static void test_every_entry_is_an_op(void **state) {
  (void)state;
  static const size_t off[] = {
#define OFF(E, n) offsetof(nnt_kernels, n),
      NNT_KOP_LIST(OFF)
#undef OFF
  };
  assert_int_equal(NNT_ARRAY_LEN(off), NNT_KOP__COUNT);
  assert_true(NNT_KOP__COUNT <= 64); /* kops is a 64-bit set */
  /* the entries after name and prepare are the ops, in the list's order */
  size_t at = offsetof(nnt_kernels, prepare) + sizeof(void (*)(void));
  for (size_t i = 0; i < NNT_KOP__COUNT; i++, at += sizeof(void (*)(void)))
    if (off[i] != at)
      fail_msg("nnt_kernels: the entry at byte %zu is not the op '%s' of NNT_KOP_LIST (every "
               "entry after prepare is an op, in the list's order)", at,
               nnt_kop_name((nnt_kop)i));
  if (sizeof(nnt_kernels) != at)
    fail_msg("nnt_kernels has entries after the last op of NNT_KOP_LIST");
  nnt_kernels k = rec_table();
  for (size_t i = 0; i < NNT_KOP__COUNT; i++) {
    void (*a)(void), (*b)(void);
    memcpy(&a, (const char *)&k + off[i], sizeof a);
    memcpy(&b, (const char *)base + off[i], sizeof b);
    if (!a || a == b)
      fail_msg("op '%s' has no recording wrapper", nnt_kop_name((nnt_kop)i));
  }
}

/* ---- layers' calls, attributed ------------------------------------------- */

#define MAX_NODES 64

typedef struct watch {
  nnt_layer *l;
  const nnt_layer_ops *orig;
  nnt_layer_ops wrapped;
  uint64_t seen;
} watch;

static watch watched[MAX_NODES];
static size_t n_watched;

static watch *watch_of(const nnt_layer *l) {
  for (size_t i = 0; i < n_watched; i++)
    if (watched[i].l == l)
      return &watched[i];
  fail_msg("layer '%s' is not watched", l->name);
  return NULL;
}

#define WRAP(fn)                                                                          \
  static int w_##fn(nnt_layer *l, nnt_run_ctx *ctx) {                                     \
    watch *w = watch_of(l);                                                               \
    rec_into = &w->seen;                                                                  \
    int rc = w->orig->fn(l, ctx);                                                         \
    rec_into = NULL;                                                                      \
    return rc;                                                                            \
  }
WRAP(forward)
WRAP(calc_gradient)
WRAP(calc_derivative)
WRAP(forward_saved)

/* The layer types some model has run. */
static const nnt_layer_ops *ran[64];
static uint64_t ran_seen[64]; /* what each called, over every model */
static uint64_t core_seen;
static size_t n_ran;

static void note_ran(const nnt_layer_ops *ops, uint64_t seen) {
  size_t i = 0;
  while (i < n_ran && ran[i] != ops)
    i++;
  if (i == n_ran) {
    assert_true(n_ran < NNT_ARRAY_LEN(ran));
    ran[n_ran] = ops;
    ran_seen[n_ran++] = 0;
  }
  ran_seen[i] |= seen;
}

static uint64_t seen_of(const nnt_layer_ops *ops) {
  for (size_t i = 0; i < n_ran; i++)
    if (ran[i] == ops)
      return ran_seen[i];
  return 0;
}

static void assert_covered(const char *who, uint64_t seen, uint64_t kops) {
  uint64_t extra = seen & ~kops;
  for (unsigned op = 0; op < NNT_KOP__COUNT; op++)
    if (extra >> op & 1)
      fail_msg("%s calls the op '%s', which its kops lack", who, nnt_kop_name((nnt_kop)op));
}

/* Train one epoch and validate on the recording table; then check every
 * layer's calls against its type's kops and the core's against
 * nnt_graph_core_kops. */
static void run_recorded(const char *text) {
  nnt_kernels table = rec_table();
  nnt_backend be = *nnt_backend_cpu();
  be.k = &table;
  nnt_model *m;
  nnt_err e = {0};
  const char *path = tu_write_text("model.ini", text);
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_model_set_base_dir(m, tu_dir, &e), NNT_OK);
  if (nnt_ini_load(m, path, NULL, 0, &e) || nnt_model_set_backend(m, &be, &e) ||
      nnt_model_compile(m, &e) || nnt_model_initialize(m, &e))
    fail_msg("%s", e.msg);
  assert_ptr_equal(m->k, &table);
  assert_true(m->n_nodes <= MAX_NODES);
  n_watched = m->n_nodes;
  for (size_t i = 0; i < m->n_nodes; i++) {
    watch *w = &watched[i];
    w->l = m->nodes[i].layer;
    w->orig = w->l->ops;
    w->wrapped = *w->orig;
    w->wrapped.forward = w->orig->forward ? w_forward : NULL;
    w->wrapped.calc_gradient = w->orig->calc_gradient ? w_calc_gradient : NULL;
    w->wrapped.calc_derivative = w->orig->calc_derivative ? w_calc_derivative : NULL;
    w->wrapped.forward_saved = w->orig->forward_saved ? w_forward_saved : NULL;
    w->seen = 0;
    w->l->ops = &w->wrapped;
  }
  rec_into = NULL;
  rec_core = 0;
  int rc = nnt_model_train(m, NULL, NULL, &e);
  for (size_t i = 0; i < n_watched; i++)
    watched[i].l->ops = watched[i].orig;
  if (rc)
    fail_msg("%s", e.msg);
  for (size_t i = 0; i < n_watched; i++) {
    const watch *w = &watched[i];
    char who[256];
    snprintf(who, sizeof who, "layer type '%s' (layer '%s')", w->orig->type, w->l->name);
    /* forward_saved's ops only where the backend supports them */
    assert_covered(who, w->seen, w->orig->kops | w->orig->saved_kops | w->orig->opt_kops);
    if (w->seen)
      note_ran(w->orig, w->seen);
  }
  core_seen |= rec_core;
  assert_covered("the core (train.c, optimizer.c)", rec_core, nnt_graph_core_kops(m));
  m->be = nnt_backend_cpu(); /* be is on this stack */
  nnt_model_destroy(m);
}

static void test_kops_cover_calls(void **state) {
  (void)state;
  n_ran = 0;
  core_seen = 0;
  for (size_t i = 0; i < tu_n_type_models; i++)
    run_recorded(tu_type_models[i]);
  /* every registered type ran in some model */
  for (const nnt_layer_ops *const *t = nnt_layer_ops_all(); *t; t++) {
    int found = 0;
    for (size_t i = 0; i < n_ran; i++)
      found |= ran[i] == *t;
    if (!found)
      fail_msg("layer type '%s' ran in none of the models: add it to one", (*t)->type);
  }
  /* the recording saw what these types are known to call, the inference
   * paths (validation) included */
  const struct {
    const nnt_layer_ops *ops;
    uint64_t want;
  } known[] = {
      {&nnt_layer_fully_connected,
       NNT_KOP_BIT(GEMM) | NNT_KOP_BIT(ADD_ROW_VEC) | NNT_KOP_BIT(SUM_ROWS)},
      {&nnt_layer_conv2d, NNT_KOP_BIT(IM2COL) | NNT_KOP_BIT(COL2IM_SET) | NNT_KOP_BIT(GEMM)},
      {&nnt_layer_batch_normalization,
       NNT_KOP_BIT(BN_FWD_TRAIN) | NNT_KOP_BIT(BN_FWD_INFER) | NNT_KOP_BIT(BN_BWD_MEANS)},
      {&nnt_layer_dropout, NNT_KOP_BIT(DROPOUT_MASK) | NNT_KOP_BIT(COPY)},
      {&nnt_layer_pooling2d, NNT_KOP_BIT(POOL_FWD) | NNT_KOP_BIT(POOL_BWD)},
  };
  for (size_t i = 0; i < NNT_ARRAY_LEN(known); i++)
    if ((seen_of(known[i].ops) & known[i].want) != known[i].want)
      fail_msg("the recording missed calls of '%s'", known[i].ops->type);
  uint64_t core = NNT_KOP_BIT(SGD_STEP) | NNT_KOP_BIT(ADAM_STEP) | NNT_KOP_BIT(DOT) |
                  NNT_KOP_BIT(AXPY) | NNT_KOP_BIT(ADD);
  assert_true((core_seen & core) == core);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_entry_is_an_op),
      cmocka_unit_test_setup_teardown(test_kops_cover_calls, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
