/* Which kernels OpenBLAS runs: chosen by this CPU's features, not by
 * OpenBLAS's own table of CPU models.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels when it is loaded,
 * from a table of CPU families and models. A CPU newer than that table
 * gets an older path: 0.3.21 runs its AVX2 "Haswell" kernels on an AVX-512
 * AMD Zen 5, and its SSE3 "Prescott" kernels on some AVX-512 Xeon VMs,
 * 1.5x to 2.5x slower than its AVX-512 "SkylakeX" path on the same
 * machine. The process's CPU features (what the CPU and the OS's saved
 * register state allow) decide here instead: when they allow a wider path
 * than the one OpenBLAS took, OpenBLAS is asked to choose again with that
 * path named (its own OPENBLAS_CORETYPE mechanism, set only for the call
 * and restored), once per process, before this library's first product.
 *
 * Never changed: a core the user named (OPENBLAS_CORETYPE set in the
 * environment: the app's choice), a path at least as wide as the features
 * allow, an OpenBLAS without DYNAMIC_ARCH, any other CPU architecture. */
#include "nntrainer/compute/kernels.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The vector width of OpenBLAS's x86-64 kernel paths, by core name. */
static const struct {
  const char *name;
  int rank;
} core_ranks[] = {
    {"SkylakeX", NNT_BLAS_AVX512},    {"Cooperlake", NNT_BLAS_AVX512},
    {"SapphireRapids", NNT_BLAS_AVX512}, {"Haswell", NNT_BLAS_AVX2},
    {"Zen", NNT_BLAS_AVX2},           {"Excavator", NNT_BLAS_AVX2},
    {"Sandybridge", NNT_BLAS_AVX},    {"Bulldozer", NNT_BLAS_AVX},
    {"Piledriver", NNT_BLAS_AVX},     {"Steamroller", NNT_BLAS_AVX},
};

int nnt_blas_core_rank(const char *core) {
  for (size_t i = 0; core && i < sizeof core_ranks / sizeof core_ranks[0]; i++)
    if (!strcasecmp(core, core_ranks[i].name))
      return core_ranks[i].rank;
  return NNT_BLAS_SSE;
}

const char *nnt_blas_core_choice(const char *current, int cpu_rank, const char *user_core) {
  static const char *const widest[] = {NULL, "Sandybridge", "Haswell", "SkylakeX"};
  if (user_core || cpu_rank <= NNT_BLAS_SSE || cpu_rank > NNT_BLAS_AVX512)
    return NULL;
  if (nnt_blas_core_rank(current) >= cpu_rank)
    return NULL;
  return widest[cpu_rank];
}

int nnt_blas_cpu_rank(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  /* the AVX-512 subsets OpenBLAS's SkylakeX kernels and their checks use */
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd"))
    return NNT_BLAS_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return NNT_BLAS_AVX2;
  if (__builtin_cpu_supports("avx"))
    return NNT_BLAS_AVX;
  return NNT_BLAS_SSE;
#else
  return NNT_BLAS_SSE; /* not x86: nothing to choose here */
#endif
}

int nnt_blas_switch_core(const char *core) {
  /* present in a DYNAMIC_ARCH build only; looked up so that any other
   * OpenBLAS still links */
  void (*quit)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit");
  void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init");
  if (!quit || !init || !core)
    return -1;
  /* OpenBLAS reads the name from its environment variable when it
   * initialises; the user's value (if any) is put back */
  const char *user = getenv("OPENBLAS_CORETYPE");
  char *saved = user ? nnt_strdup(user) : NULL;
  if (user && !saved)
    return -1;
  setenv("OPENBLAS_CORETYPE", core, 1);
  quit();
  init();
  if (saved)
    setenv("OPENBLAS_CORETYPE", saved, 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
  nnt_free(saved);
  const char *now = openblas_get_corename();
  return now && !strcasecmp(now, core) ? 0 : -1;
}

static pthread_once_t core_once = PTHREAD_ONCE_INIT;
static char core_first[32]; /* OpenBLAS's own pick, when it was changed */

static void choose_core(void) {
  const char *now = openblas_get_corename();
  const char *want = nnt_blas_core_choice(now, nnt_blas_cpu_rank(), getenv("OPENBLAS_CORETYPE"));
  char first[32];
  snprintf(first, sizeof first, "%s", now ? now : "unknown");
  if (want && !nnt_blas_switch_core(want))
    memcpy(core_first, first, sizeof first);
}

void nnt_cpu_blas_choose_core(void) { pthread_once(&core_once, choose_core); }

size_t nnt_cpu_blas_row_quantum(void) {
  static const struct {
    const char *name;
    size_t rows;
  } measured[] = {{"Haswell", 24}, {"Zen", 24}, {"Sandybridge", 8}, {"Prescott", 8},
                  {"Nehalem", 8}};
  nnt_cpu_blas_choose_core(); /* the kernels the products will run */
  const char *core = openblas_get_corename();
  if (nnt_blas_core_rank(core) == NNT_BLAS_AVX512)
    return 8;
  for (size_t i = 0; core && i < sizeof measured / sizeof measured[0]; i++)
    if (!strcasecmp(core, measured[i].name))
      return measured[i].rows;
  return 0;
}

const char *nnt_cpu_blas_first_core(void) {
  nnt_cpu_blas_choose_core();
  return core_first[0] ? core_first : NULL;
}

int nnt_cpu_blas_split_exact(void) {
  /* measured on OpenBLAS 0.3.21 (docs/performance.md): its AVX-512 sgemm
   * kernels give every element of C the same bits whichever columns or
   * rows a product is given (parts at multiples of 32 columns or at any
   * row, above the direct and small-matrix sizes); its Haswell (AVX2)
   * kernels do not, not even between its own one and two threads */
  const char *core = openblas_get_corename();
  return nnt_blas_core_rank(core) == NNT_BLAS_AVX512;
}
