/* ini_diff: a developer tool (not built by CMake, not in CI) that reads INI
 * files with iniparser 4.1 and with nntrainer's own reader
 * (nntrainer/ini_read.c) and compares what each makes of them: the ordered
 * list of sections and of (section, key, value). scripts/ini-diff.sh builds
 * it and runs it over every .ini file of an NNTrainer checkout.
 *
 *   ini_diff FILE...         compare these files
 *   ini_diff --random N [S]  compare N generated files (seed S), made of the
 *                            constructs the syntax has (sections, quotes,
 *                            comments, continuations, CR LF, odd lines)
 *
 * Prints each disagreement with its reason and a summary; exits 1 when a
 * file both readers accept reads differently (a bug in ours), else 0.
 * Files iniparser reads but ours refuses are expected where the refusal is
 * deliberate (duplicates, unclosed quotes, ...: docs/ini.md, "Syntax"). */
#include <iniparser/iniparser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nntrainer/ini_read.h"

/* One reading: entries in order, each "section" or "section:key=value". */
typedef struct reading {
  char **e;
  size_t n, cap;
} reading;

static void add(reading *r, const char *sec, const char *key, const char *val) {
  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 64;
    r->e = realloc(r->e, r->cap * sizeof *r->e);
    if (!r->e)
      abort();
  }
  size_t n = strlen(sec) + (key ? strlen(key) + strlen(val) + 3 : 1);
  char *s = malloc(n);
  if (!s)
    abort();
  if (key)
    snprintf(s, n, "%s:%s=%s", sec, key, val);
  else
    snprintf(s, n, "%s", sec);
  r->e[r->n++] = s;
}

static void clear(reading *r) {
  for (size_t i = 0; i < r->n; i++)
    free(r->e[i]);
  free(r->e);
  *r = (reading){0};
}

static int silent(const char *fmt, ...) {
  (void)fmt;
  return 0;
}

/* iniparser's dictionary in insertion order (it never deletes, so entry i
 * is the i-th set); a key before any section is ":key". */
static int read_iniparser(const char *path, reading *r) {
  dictionary *d = iniparser_load(path);
  if (!d)
    return -1;
  for (ssize_t i = 0; i < d->size; i++) {
    if (!d->key[i])
      continue;
    const char *colon = strchr(d->key[i], ':');
    if (!colon) {
      add(r, d->key[i], NULL, NULL);
      continue;
    }
    char sec[4096];
    snprintf(sec, sizeof sec, "%.*s", (int)(colon - d->key[i]), d->key[i]);
    add(r, sec, colon + 1, d->val[i] ? d->val[i] : "");
  }
  iniparser_freedict(d);
  return 0;
}

static int read_ours(const char *path, reading *r, nnt_err *e) {
  nnt_ini *ini;
  if (nnt_ini_read_file(path, &ini, e))
    return -1;
  for (size_t i = 0; i < nnt_ini_section_count(ini); i++) {
    const nnt_ini_section *s = nnt_ini_section_at(ini, i);
    add(r, s->name, NULL, NULL);
    for (size_t j = 0; j < s->n_keys; j++) {
      const nnt_ini_key *k = nnt_ini_key_at(ini, s, j);
      add(r, s->name, k->name, k->value);
    }
  }
  nnt_ini_free(ini);
  return 0;
}

/* Why ours refused, as a class: the message without file and line. */
static const char *refusal_class(const char *msg) {
  static const char *const classes[] = {
      "duplicate key", "duplicate section", "has no closing", "after the closing quote",
      "past the end of the file", "without a name", "after its first ']'", "holds ':'",
      "binary content", "carriage return", "byte order mark", "comes before any",
      "is not a [section]", "has no key before", "more than the"};
  for (size_t i = 0; i < sizeof classes / sizeof *classes; i++)
    if (strstr(msg, classes[i]))
      return classes[i];
  return "other";
}

typedef struct tally {
  size_t files, both_read, both_refuse, only_iniparser, only_ours, differ;
  const char *cls[32];
  size_t cls_n[32];
  char cls_example[32][512];
  size_t n_cls;
} tally;

static void count_class(tally *t, const char *cls, const char *example) {
  size_t i = 0;
  while (i < t->n_cls && strcmp(t->cls[i], cls))
    i++;
  if (i == t->n_cls) {
    if (t->n_cls == 32)
      return;
    t->cls[t->n_cls++] = cls;
    snprintf(t->cls_example[i], sizeof t->cls_example[i], "%s", example);
  }
  t->cls_n[i]++;
}

/* Compare one file; verbose: print every disagreement. */
static void compare(const char *path, const char *shown, tally *t, int verbose) {
  reading a = {0}, b = {0};
  nnt_err e = {0};
  int ra = read_iniparser(path, &a), rb = read_ours(path, &b, &e);
  t->files++;
  if (ra && rb) {
    t->both_refuse++;
  } else if (rb) {
    t->only_iniparser++;
    count_class(t, refusal_class(e.msg), e.msg);
    if (verbose)
      printf("%s: iniparser reads it, nntrainer refuses: %s\n", shown, e.msg);
  } else if (ra) {
    t->only_ours++;
    count_class(t, "iniparser refuses", shown);
    if (verbose)
      printf("%s: nntrainer reads it, iniparser refuses it\n", shown);
  } else {
    size_t i = 0;
    while (i < a.n && i < b.n && !strcmp(a.e[i], b.e[i]))
      i++;
    if (i == a.n && i == b.n) {
      t->both_read++;
    } else {
      t->differ++;
      printf("%s: DIFFERENT READINGS at entry %zu: iniparser '%s', nntrainer '%s'\n", shown, i,
             i < a.n ? a.e[i] : "(end)", i < b.n ? b.e[i] : "(end)");
    }
  }
  clear(&a);
  clear(&b);
}

/* ---- generated files ---------------------------------------------------- */

static const char *pick(nnt_rng *r, const char *const *v, size_t n) {
  return v[nnt_rng_below(r, (uint32_t)n)];
}
#define PICK(r, v) pick(r, v, sizeof v / sizeof *v)

static void gen_name(nnt_rng *r, char *buf, size_t n, unsigned *counter) {
  static const char *const parts[] = {"a", "B", "fc", "Model", "x y", "k:1", "é", "1"};
  if (nnt_rng_below(r, 10) < 7)
    snprintf(buf, n, "n%u", (*counter)++);
  else
    snprintf(buf, n, "%s", PICK(r, parts));
}

static void gen_file(nnt_rng *r, FILE *f) {
  static const char *const ws[] = {"", "", "", " ", "  ", "\t"};
  static const char *const eol[] = {"\n", "\n", "\n", "\r\n", " \n", "\t\r\n", "\\\n",
                                    " \\\n"};
  static const char *const values[] = {
      "1", "abc", "a b", "\"q\"", "'s'", "\"a;b\"", "'a#b'", "x ; c", "x # c", "\"\"", "''",
      "\"\" ; c", "\"a\" b", "\"abc", "'", "\"", "a\"b\"", "a=b", "", ";", "#", " 0.5 ",
      "C:\\dir", "é", "\"it's\"", "'say \"hi\"'", "\" pad \"", "a\\", "[x]"};
  static const char *const odd[] = {"[]", "[ ]", "[a]b]", "[a", "a]", "= v", "novalue",
                                    "[a = b", "=", "x", ";", "#", "\\", "[k:1]"};
  unsigned counter = 0, lines = 1 + nnt_rng_below(r, 12);
  char name[64];
  for (unsigned i = 0; i < lines; i++) {
    /* mostly a section first, so that keys have one */
    unsigned kind = i == 0 && nnt_rng_below(r, 8) ? 0 : nnt_rng_below(r, 20);
    fputs(PICK(r, ws), f);
    if (kind < 4) {
      gen_name(r, name, sizeof name, &counter);
      fprintf(f, "[%s%s%s]", PICK(r, ws), name, PICK(r, ws));
    } else if (kind < 15) {
      gen_name(r, name, sizeof name, &counter);
      fprintf(f, "%s%s=%s%s", name, PICK(r, ws), PICK(r, ws), PICK(r, values));
    } else if (kind < 17) {
      fprintf(f, "%s comment %s", nnt_rng_below(r, 2) ? "#" : ";", PICK(r, values));
    } else if (kind < 19) {
      fputs(PICK(r, odd), f);
    }
    fputs(PICK(r, ws), f);
    if (i + 1 < lines || nnt_rng_below(r, 4))
      fputs(PICK(r, eol), f);
  }
}

int main(int argc, char **argv) {
  iniparser_set_error_callback(silent);
  tally t = {0};
  if (argc >= 3 && !strcmp(argv[1], "--random")) {
    long n = atol(argv[2]);
    nnt_rng r;
    nnt_rng_seed(&r, argc > 3 ? strtoull(argv[3], NULL, 10) : 1);
    char path[] = "/tmp/ini_diff_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
      return 2;
    close(fd);
    for (long i = 0; i < n; i++) {
      FILE *f = fopen(path, "wb");
      if (!f)
        return 2;
      gen_file(&r, f);
      fclose(f);
      char shown[64];
      snprintf(shown, sizeof shown, "generated file %ld", i);
      size_t before = t.differ;
      compare(path, shown, &t, 0);
      if (t.differ > before) {
        printf("  its text:\n");
        FILE *g = fopen(path, "rb");
        int ch;
        while (g && (ch = fgetc(g)) != EOF)
          putchar(ch);
        if (g)
          fclose(g);
        printf("\n  (end)\n");
      }
    }
    unlink(path);
  } else if (argc >= 2) {
    for (int i = 1; i < argc; i++)
      compare(argv[i], argv[i], &t, 1);
  } else {
    fprintf(stderr, "usage: ini_diff FILE... | ini_diff --random N [SEED]\n");
    return 2;
  }
  printf("%zu files: %zu agree (%zu read alike, %zu refused by both); %zu read by iniparser "
         "only, %zu by nntrainer only, %zu read differently\n",
         t.files, t.both_read + t.both_refuse, t.both_read, t.both_refuse, t.only_iniparser,
         t.only_ours, t.differ);
  for (size_t i = 0; i < t.n_cls; i++)
    printf("  %6zu  %s, e.g. %s\n", t.cls_n[i], t.cls[i], t.cls_example[i]);
  return t.differ ? 1 : 0;
}
