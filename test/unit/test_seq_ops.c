/* The kernel ops of the sequence layers on every backend present (the CPU,
 * the fake device, Vulkan where the machine has a device: oh_backends),
 * each against values the test computes itself and against the CPU:
 * gather_rows and scatter_add_rows (embedding) with and without a masked
 * row, indices with fractions (truncated), repeated indices (the
 * scatter-add's sums are the CPU's bit for bit on every backend), and
 * indices outside [0, n): nothing is read or written outside the tensors
 * (the buffer's guard floats stay), their rows are NaN, and the CPU says
 * NNT_ERR_INVAL; ln_fwd and ln_bwd (layer normalization) against a double
 * reference, with and without the saved statistics and each gradient;
 * pos_encoding against the sinusoid formula in double; div; copy2d. */
#include "op_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16 /* floats of a known value around each tensor */
#define GUARD_V 12345.0f

/* Tensors of a test in one buffer of a backend: tensor i at off[i], GUARD
 * floats of GUARD_V before and after each. */
typedef struct seq_buf {
  nnt_buffer *b;
  size_t off[8], len[8], total;
  unsigned n;
} seq_buf;

static float *seq_make(seq_buf *s, const nnt_backend *be, const size_t *len, unsigned n) {
  memset(s, 0, sizeof *s);
  size_t at = GUARD;
  for (unsigned i = 0; i < n; i++) {
    s->off[i] = at, s->len[i] = len[i];
    at += len[i] + GUARD;
  }
  s->n = n, s->total = at;
  nnt_err e = {0};
  assert_int_equal(nnt_buffer_alloc(be->buft, at * sizeof(float), "seq ops", &s->b, &e), NNT_OK);
  float *g = malloc(at * sizeof *g);
  for (size_t k = 0; k < at; k++)
    g[k] = GUARD_V;
  assert_int_equal(be->buft->set(s->b, 0, g, at * sizeof *g, &e), NNT_OK);
  free(g);
  return nnt_buffer_at(s->b, 0);
}
static float *seq_at(const seq_buf *s, unsigned i) { return nnt_buffer_at(s->b, s->off[i] * 4); }
static void seq_put(seq_buf *s, unsigned i, const float *v) {
  nnt_err e = {0};
  assert_int_equal(s->b->type->set(s->b, s->off[i] * 4, v, s->len[i] * 4, &e), NNT_OK);
}
/* Tensor i into out; fails when a guard float changed. */
static void seq_get(const seq_buf *s, unsigned i, float *out, const char *what) {
  nnt_err e = {0};
  float *all = malloc(s->total * sizeof *all);
  assert_int_equal(s->b->type->get(s->b, 0, all, s->total * 4, &e), NNT_OK);
  for (size_t k = 0; k < s->total; k++) {
    int inside = 0;
    for (unsigned t = 0; t < s->n; t++)
      inside |= k >= s->off[t] && k < s->off[t] + s->len[t];
    if (!inside && all[k] != GUARD_V)
      fail_msg("%s: guard float %zu changed to %g", what, k, all[k]);
  }
  memcpy(out, all + s->off[i], s->len[i] * 4);
  free(all);
}

enum { N = 5, C = 3, R = 9 };

static void test_gather_and_scatter(void **state) {
  (void)state;
  const nnt_backend *bes[OH_MAX_BACKENDS];
  unsigned nb = oh_backends(bes);
  for (unsigned k = 0; k < nb; k++)
    print_message("on %s\n", bes[k]->name);
  const float idx[R] = {0, 4.75f, 2, 2.25f, 1, 4, 0.5f, 2.99f, 3};
  float table[N * C], dy[R * C];
  for (int i = 0; i < N * C; i++)
    table[i] = (float)(i * 7 % 11) - 5.5f + 0.125f * i;
  for (int i = 0; i < R * C; i++)
    dy[i] = 0.1f * (float)((i * 5) % 13) - 0.6f;
  for (size_t mask = 1; mask <= N; mask += N - 1) { /* row 1 masked, then none (N) */
    float want_y[R * C], want_dt[N * C] = {0};
    for (int r = 0; r < R; r++) {
      size_t row = (size_t)idx[r];
      for (int c = 0; c < C; c++) {
        want_y[r * C + c] = row == mask ? 0 : table[row * C + c];
        if (row != mask)
          want_dt[row * C + c] += dy[r * C + c];
      }
    }
    float ref_dt[N * C];
    for (unsigned k = 0; k < nb; k++) {
      const nnt_backend *be = bes[k];
      seq_buf s;
      seq_make(&s, be, (const size_t[]){R, N * C, R * C, R * C, N * C}, 5);
      seq_put(&s, 0, idx), seq_put(&s, 1, table), seq_put(&s, 3, dy);
      const nnt_kernels *K = be->k;
      assert_int_equal(K->gather_rows(K, R, C, N, seq_at(&s, 0), seq_at(&s, 1), mask,
                                      seq_at(&s, 2)), NNT_OK);
      assert_int_equal(K->scatter_add_rows(K, R, C, N, seq_at(&s, 0), seq_at(&s, 3), mask,
                                           seq_at(&s, 4)), NNT_OK);
      nnt_err e = {0};
      assert_int_equal(be->synchronize((nnt_backend *)be, &e), NNT_OK);
      float y[R * C], dt[N * C];
      seq_get(&s, 2, y, be->name);
      seq_get(&s, 4, dt, be->name);
      assert_memory_equal(y, want_y, sizeof y); /* a copy: exact */
      for (int i = 0; i < N * C; i++)
        if (fabsf(dt[i] - want_dt[i]) > 1e-6f)
          fail_msg("%s: scatter_add_rows [%d] %g, expected %g", be->name, i, dt[i], want_dt[i]);
      if (k == 0)
        memcpy(ref_dt, dt, sizeof dt);
      else /* the CPU's order of additions: bit for bit */
        assert_memory_equal(dt, ref_dt, sizeof dt);
      nnt_buffer_free(s.b);
    }
  }
}

static void test_indices_out_of_range(void **state) {
  (void)state;
  const nnt_backend *bes[OH_MAX_BACKENDS];
  unsigned nb = oh_backends(bes);
  const float idx[R] = {3, 5, -1, NAN, 1e10f, -0.5f, INFINITY, 4.999f, 0};
  float table[N * C], dy[R * C];
  for (int i = 0; i < N * C; i++)
    table[i] = (float)i;
  for (int i = 0; i < R * C; i++)
    dy[i] = 1;
  for (unsigned k = 0; k < nb; k++) {
    const nnt_backend *be = bes[k];
    seq_buf s;
    seq_make(&s, be, (const size_t[]){R, N * C, R * C, R * C, N * C}, 5);
    seq_put(&s, 0, idx), seq_put(&s, 1, table), seq_put(&s, 3, dy);
    const nnt_kernels *K = be->k;
    int rc = K->gather_rows(K, R, C, N, seq_at(&s, 0), seq_at(&s, 1), N, seq_at(&s, 2));
    /* the CPU (and the fake device, which runs it) says so at once; a
     * backend that records steps leaves the NaN rows to the checks */
    if (strcmp(be->name, "vulkan") != 0)
      assert_int_equal(rc, NNT_ERR_INVAL);
    else
      assert_int_equal(rc, NNT_OK);
    assert_int_equal(K->scatter_add_rows(K, R, C, N, seq_at(&s, 0), seq_at(&s, 3), N,
                                         seq_at(&s, 4)), NNT_OK);
    nnt_err e = {0};
    assert_int_equal(be->synchronize((nnt_backend *)be, &e), NNT_OK);
    float y[R * C], dt[N * C];
    seq_get(&s, 2, y, be->name);
    seq_get(&s, 4, dt, be->name);
    for (int r = 0; r < R; r++)
      for (int c = 0; c < C; c++) {
        int ok = r == 0 || r == 7 || r == 8;
        float want = ok ? table[(size_t)idx[r] * C + c] : NAN;
        if (ok ? y[r * C + c] != want : !isnan(y[r * C + c]))
          fail_msg("%s: row %d (index %g) [%d] is %g", be->name, r, idx[r], c, y[r * C + c]);
      }
    /* only the rows in range got a gradient: rows 3, 4 and 0 once each */
    for (int i = 0; i < N * C; i++) {
      int row = i / C;
      float want = row == 0 || row == 3 || row == 4 ? 1.0f : 0.0f;
      if (dt[i] != want)
        fail_msg("%s: scatter_add_rows [%d] %g, expected %g", be->name, i, dt[i], want);
    }
    nnt_buffer_free(s.b);
  }
}

/* max |a - b| / max(1, max |b|) over n */
static double nerr(const float *a, const double *b, size_t n) {
  double d = 0, sc = 1;
  for (size_t i = 0; i < n; i++) {
    double e = fabs(a[i] - b[i]);
    d = e > d || isnan(e) ? e : d;
    sc = fmax(sc, fabs(b[i]));
  }
  return d / sc;
}

enum { LR = 5, LC = 13 };

static void test_layer_norm(void **state) {
  (void)state;
  const nnt_backend *bes[OH_MAX_BACKENDS];
  unsigned nb = oh_backends(bes);
  float x[LR * LC], g[LC], bt[LC], dy[LR * LC];
  nnt_rng r;
  nnt_rng_seed(&r, 31);
  tu_fill_uniform(&r, x, LR * LC, -3, 4);
  tu_fill_uniform(&r, g, LC, 0.5f, 1.5f);
  tu_fill_uniform(&r, bt, LC, -1, 1);
  tu_fill_uniform(&r, dy, LR * LC, -1, 1);
  const float eps = 1e-3f;
  /* the reference in double */
  double y[LR * LC], dx[LR * LC], dg[LC] = {0}, db[LC] = {0}, mu[LR], is[LR];
  for (int i = 0; i < LR; i++) {
    double m = 0, v = 0, s1 = 0, s2 = 0, xh[LC];
    for (int c = 0; c < LC; c++)
      m += x[i * LC + c];
    m /= LC;
    for (int c = 0; c < LC; c++)
      v += (x[i * LC + c] - m) * (x[i * LC + c] - m);
    mu[i] = m, is[i] = 1 / sqrt(v / LC + eps);
    for (int c = 0; c < LC; c++) {
      xh[c] = (x[i * LC + c] - m) * is[i];
      y[i * LC + c] = xh[c] * g[c] + bt[c];
      dg[c] += dy[i * LC + c] * xh[c], db[c] += dy[i * LC + c];
      s1 += dy[i * LC + c] * g[c], s2 += dy[i * LC + c] * g[c] * xh[c];
    }
    for (int c = 0; c < LC; c++)
      dx[i * LC + c] = is[i] * (dy[i * LC + c] * g[c] - s1 / LC - xh[c] * s2 / LC);
  }
  for (unsigned k = 0; k < nb; k++) {
    const nnt_backend *be = bes[k];
    seq_buf s;
    /* x, gamma, beta, mean, invstd, y, dy, dx | dgamma, dbeta in y2 */
    seq_make(&s, be, (const size_t[]){LR * LC, LC, LC, LR, LR, LR * LC, LR * LC, LR * LC}, 8);
    seq_put(&s, 0, x), seq_put(&s, 1, g), seq_put(&s, 2, bt), seq_put(&s, 6, dy);
    const nnt_kernels *K = be->k;
    float got[LR * LC], st[LR];
    /* without the statistics (inference), then with them */
    assert_int_equal(K->ln_fwd(K, LR, LC, seq_at(&s, 0), seq_at(&s, 1), seq_at(&s, 2), eps, NULL,
                               NULL, seq_at(&s, 5)), NNT_OK);
    seq_get(&s, 5, got, be->name);
    if (nerr(got, y, LR * LC) > 1e-5)
      fail_msg("%s: ln_fwd without statistics: error %g", be->name, nerr(got, y, LR * LC));
    assert_int_equal(K->ln_fwd(K, LR, LC, seq_at(&s, 0), seq_at(&s, 1), seq_at(&s, 2), eps,
                               seq_at(&s, 3), seq_at(&s, 4), seq_at(&s, 5)), NNT_OK);
    seq_get(&s, 5, got, be->name);
    assert_true(nerr(got, y, LR * LC) <= 1e-5);
    seq_get(&s, 3, st, be->name);
    assert_true(nerr(st, mu, LR) <= 1e-6);
    seq_get(&s, 4, st, be->name);
    for (int i = 0; i < LR; i++)
      assert_true(fabs(st[i] - is[i]) <= 1e-5 * is[i]);
    /* dx alone, then dgamma and dbeta alone (into tensor 5, 2 x LC) */
    assert_int_equal(K->ln_bwd(K, LR, LC, seq_at(&s, 0), seq_at(&s, 6), seq_at(&s, 3),
                               seq_at(&s, 4), seq_at(&s, 1), seq_at(&s, 7), NULL, NULL), NNT_OK);
    seq_get(&s, 7, got, be->name);
    if (nerr(got, dx, LR * LC) > 1e-5)
      fail_msg("%s: ln_bwd dx: error %g", be->name, nerr(got, dx, LR * LC));
    float *y5 = seq_at(&s, 5);
    assert_int_equal(K->ln_bwd(K, LR, LC, seq_at(&s, 0), seq_at(&s, 6), seq_at(&s, 3),
                               seq_at(&s, 4), seq_at(&s, 1), NULL, y5, y5 + LC), NNT_OK);
    seq_get(&s, 5, got, be->name);
    if (nerr(got, dg, LC) > 1e-5 || nerr(got + LC, db, LC) > 1e-5)
      fail_msg("%s: ln_bwd dgamma %g, dbeta %g", be->name, nerr(got, dg, LC),
               nerr(got + LC, db, LC));
    /* dbeta only: dgamma's place keeps what it held */
    assert_int_equal(K->ln_bwd(K, LR, LC, seq_at(&s, 0), seq_at(&s, 6), seq_at(&s, 3),
                               seq_at(&s, 4), seq_at(&s, 1), NULL, NULL, y5 + 2 * LC), NNT_OK);
    float again[LR * LC];
    seq_get(&s, 5, again, be->name);
    assert_memory_equal(again, got, 2 * LC * sizeof(float));
    assert_true(nerr(again + 2 * LC, db, LC) <= 1e-5);
    nnt_buffer_free(s.b);
  }
}

static void test_pos_encoding_and_div(void **state) {
  (void)state;
  const nnt_backend *bes[OH_MAX_BACKENDS];
  unsigned nb = oh_backends(bes);
  enum { T = 9, D = 6, M = T * D };
  double want[M], q[M];
  float a[M], b[M];
  for (int i = 0; i < T; i++)
    for (int j = 0; j < D; j++) {
      double ang = i / pow(10000.0, (double)(j / 2 * 2) / D);
      want[i * D + j] = j % 2 ? cos(ang) : sin(ang);
    }
  for (int i = 0; i < M; i++) {
    a[i] = (float)(i - 20) * 0.37f;
    b[i] = (float)((i % 7) + 1) * (i % 2 ? -0.5f : 0.75f);
    q[i] = (double)a[i] / b[i];
  }
  float ref[M];
  for (unsigned k = 0; k < nb; k++) {
    const nnt_backend *be = bes[k];
    seq_buf s;
    seq_make(&s, be, (const size_t[]){M, M, M, M}, 4);
    seq_put(&s, 1, a), seq_put(&s, 2, b);
    const nnt_kernels *K = be->k;
    assert_int_equal(K->pos_encoding(K, T, D, seq_at(&s, 0)), NNT_OK);
    assert_int_equal(K->div(K, M, seq_at(&s, 1), seq_at(&s, 2), seq_at(&s, 3)), NNT_OK);
    float got[M];
    seq_get(&s, 0, got, be->name);
    if (nerr(got, want, M) > 1e-5)
      fail_msg("%s: pos_encoding error %g", be->name, nerr(got, want, M));
    if (k == 0)
      memcpy(ref, got, sizeof got);
    else if (strcmp(be->name, "vulkan") != 0) /* the CPU's functions: bit for bit */
      assert_memory_equal(got, ref, sizeof got);
    seq_get(&s, 3, got, be->name);
    for (int i = 0; i < M; i++) /* one correctly rounded division */
      if (got[i] != (float)q[i])
        fail_msg("%s: div [%d] %.9g, expected %.9g", be->name, i, got[i], (float)q[i]);
    /* y aliasing a */
    assert_int_equal(K->div(K, M, seq_at(&s, 1), seq_at(&s, 2), seq_at(&s, 1)), NNT_OK);
    seq_get(&s, 1, got, be->name);
    assert_true(got[5] == (float)q[5]);
    nnt_buffer_free(s.b);
  }
}

/* copy2d (the lstm's per-step slice of its output's derivative): a
 * strided matrix into another stride, both ways, every element where it
 * belongs, nothing between the rows or around the tensors written; a row
 * shorter than cols with rows > 1 is refused. */
static void test_copy2d(void **state) {
  (void)state;
  const nnt_backend *bes[OH_MAX_BACKENDS];
  unsigned nb = oh_backends(bes);
  enum { ROWS = 5, COLS = 3, LDX = 7, LDY = 4, NX = ROWS * LDX, NY = ROWS * LDY };
  float x[NX], y0[NY];
  for (int i = 0; i < NX; i++)
    x[i] = 0.5f * (float)i - 3.25f;
  for (int i = 0; i < NY; i++)
    y0[i] = -100.0f - (float)i;
  for (unsigned k = 0; k < nb; k++) {
    const nnt_backend *be = bes[k];
    seq_buf s;
    seq_make(&s, be, (const size_t[]){NX, NY, NX}, 3);
    seq_put(&s, 0, x), seq_put(&s, 1, y0);
    const nnt_kernels *K = be->k;
    /* x's rows 1..4 (the extent ends at the tensor's last float) into y */
    assert_int_equal(K->copy2d(K, ROWS - 1, COLS, seq_at(&s, 0) + LDX + (LDX - COLS), LDX,
                               seq_at(&s, 1), LDY), NNT_OK);
    float got[NX];
    seq_get(&s, 1, got, be->name);
    for (int r = 0; r < ROWS; r++)
      for (int c = 0; c < LDY; c++) {
        int i = r * LDY + c;
        float want = r < ROWS - 1 && c < COLS ? x[(r + 1) * LDX + LDX - COLS + c] : y0[i];
        if (got[i] != want)
          fail_msg("%s: copy2d y[%d][%d] %g, expected %g", be->name, r, c, got[i], want);
      }
    /* and back, into a zeroed x-shaped tensor: only the rows' first COLS */
    float zero[NX] = {0};
    seq_put(&s, 2, zero);
    assert_int_equal(K->copy2d(K, ROWS - 1, COLS, seq_at(&s, 1), LDY, seq_at(&s, 2), LDX),
                     NNT_OK);
    seq_get(&s, 2, got, be->name);
    for (int i = 0; i < NX; i++) {
      int r = i / LDX, c = i % LDX;
      float want = r < ROWS - 1 && c < COLS ? x[(r + 1) * LDX + LDX - COLS + c] : 0.0f;
      if (got[i] != want)
        fail_msg("%s: copy2d back [%d] %g, expected %g", be->name, i, got[i], want);
    }
    /* one row needs no stride; rows that overlap are refused */
    assert_int_equal(K->copy2d(K, 1, COLS, seq_at(&s, 0), 1, seq_at(&s, 2), 1), NNT_OK);
    assert_int_equal(K->copy2d(K, 2, LDY + 1, seq_at(&s, 0), LDX, seq_at(&s, 1), LDY),
                     NNT_ERR_INVAL);
    nnt_buffer_free(s.b);
  }
}

static void test_release(void **state) {
  (void)state;
  oh_backends_release();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather_and_scatter),
      cmocka_unit_test(test_indices_out_of_range),
      cmocka_unit_test(test_layer_norm),
      cmocka_unit_test(test_pos_encoding_and_div),
      cmocka_unit_test(test_copy2d),
      cmocka_unit_test(test_release),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
