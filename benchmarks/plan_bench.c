/* Planning cost on a synthetic training graph: 4 tensors per layer (an
 * activation kept for backward, a derivative, a gradient, a scratch), like
 * the lifetimes a real graph produces. Usage: nnt_plan_bench [TENSORS...]
 * (default 10000); each size is planned 7 times per planner, the median
 * time reported. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "manager/planner.h"

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int bench(size_t n) {
  size_t layers = n / 4;
  nnt_plan_block *b = malloc((n + 1) * sizeof *b);
  size_t *off = malloc((n + 1) * sizeof *off);
  if (!b || !off)
    return 1;
  nnt_rng r;
  nnt_rng_seed(&r, 1);
  size_t k = 0;
  for (size_t i = 0; i < layers; i++) {
    unsigned fwd = (unsigned)i, rr = (unsigned)(layers - 1 - i);
    unsigned grad = (unsigned)layers + 3 * rr, deriv = grad + 1, apply = grad + 2;
    size_t sz = (size_t)(256 + nnt_rng_below(&r, 4096)) * 4;
    b[k++] = (nnt_plan_block){sz, fwd, deriv, 0};                         /* activation */
    b[k++] = (nnt_plan_block){sz, deriv > 3 ? deriv - 3 : 0, deriv, 0};    /* derivative */
    b[k++] = (nnt_plan_block){sz / 2, grad, apply, 0};                     /* gradient */
    b[k++] = (nnt_plan_block){sz / 4, fwd, fwd, 0};                        /* scratch */
  }
  n = k;
  const nnt_planner_kind kinds[] = {NNT_PLANNER_BASIC, NNT_PLANNER_POOL, NNT_PLANNER_BEST_FIT};
  size_t lb = 0;
  if (nnt_plan_lower_bound(b, n, &lb, NULL))
    return 1;
  printf("%zu tensors, lower bound %zu bytes\n", n, lb);
  printf("%-9s %12s %8s %12s\n", "planner", "pool bytes", "ratio", "median ms");
  for (size_t q = 0; q < 3; q++) {
    double t[7];
    size_t pool = 0;
    for (int rep = 0; rep < 7; rep++) {
      double t0 = now_ms();
      if (nnt_plan(kinds[q], b, n, 64, off, &pool, NULL))
        return 1;
      t[rep] = now_ms() - t0;
    }
    qsort(t, 7, sizeof t[0], cmp_double);
    if (nnt_plan_validate(b, n, off, pool, 64, NULL))
      return 1;
    printf("%-9s %12zu %8.3f %12.2f\n", nnt_planner_name(kinds[q]), pool, (double)pool / lb, t[3]);
  }
  free(b);
  free(off);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return bench(10000);
  for (int a = 1; a < argc; a++)
    if (bench(strtoul(argv[a], NULL, 10)))
      return 1;
  return 0;
}
