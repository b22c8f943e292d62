/* Makes the resource files NNTrainer's Tizen C API tests read, in the
 * format NNTrainer ships them in (the trainset, valset and testset tarballs
 * and label.dat of its packaging/ folder):
 *   trainingSet.dat, valSet.dat, testSet.dat: 50 records each, 5 per class
 *     in class order; a record is 62720 little-endian float32 inputs and a
 *     10-float one-hot label. The inputs look like those files' (features
 *     after a ReLU6: values in [0, 6], about 85% zeros) and depend on the
 *     class (each class has more non-zeros in its own tenth of the
 *     features), so a model can learn them. Seeded: the same bytes on
 *     every run and machine.
 *   label.dat: the ten class names, one per line.
 * Usage: gen_res DIR.  Used to run NNTrainer's C API tests (docs/capi.md). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { FEATURES = 62720, CLASSES = 10, PER_CLASS = 5 };

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Uniform in [0, 1). */
static float uniform(uint64_t *s) { return (float)(next(s) >> 40) / (float)(1u << 24); }

static void put_float(unsigned char *p, float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(u >> (8 * i));
}

static int write_set(const char *dir, const char *name, uint64_t seed) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  static unsigned char rec[(FEATURES + CLASSES) * 4];
  uint64_t s = seed;
  int rc = 0;
  for (int k = 0; k < CLASSES && !rc; k++) {
    for (int r = 0; r < PER_CLASS && !rc; r++) {
      for (int i = 0; i < FEATURES; i++) {
        int own = i / (FEATURES / CLASSES) == k;
        float v = 0.0f;
        if (uniform(&s) < (own ? 0.45f : 0.10f)) {
          v = 6.0f * uniform(&s) * uniform(&s) + (own ? 0.5f : 0.0f);
          if (v > 6.0f)
            v = 6.0f;
        }
        put_float(rec + 4 * i, v);
      }
      for (int c = 0; c < CLASSES; c++)
        put_float(rec + 4 * (FEATURES + c), c == k ? 1.0f : 0.0f);
      if (fwrite(rec, sizeof rec, 1, f) != 1)
        rc = 1;
    }
  }
  if (fclose(f) != 0)
    rc = 1;
  if (rc)
    fprintf(stderr, "gen_res: cannot write %s\n", path);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_res DIR\n");
    return 2;
  }
  static const char *const names[CLASSES] = {"airplane", "automobile", "bird", "cat",  "deer",
                                             "dog",      "frog",       "horse", "ship", "truck"};
  if (write_set(argv[1], "trainingSet.dat", 0x1234567ULL) ||
      write_set(argv[1], "valSet.dat", 0x89abcdefULL) ||
      write_set(argv[1], "testSet.dat", 0x13579bdfULL))
    return 1;
  char path[4096];
  snprintf(path, sizeof path, "%s/label.dat", argv[1]);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  for (int c = 0; c < CLASSES; c++)
    fprintf(f, "%s\n", names[c]);
  return fclose(f) != 0;
}
