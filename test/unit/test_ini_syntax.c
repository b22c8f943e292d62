/* The INI reader (nntrainer/ini_read.c): the syntax as iniparser 4.1 reads
 * it (each accepted case below reads the same with iniparser; the
 * developer check scripts/ini-diff.sh compares them), every refusal with
 * its file, line, section and key, files that are not regular files or
 * too large, allocation failures at every point, overrides, and values
 * written by ini_save.c reading back unchanged. */
#include "test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nntrainer/ini.h"
#include "nntrainer/ini_read.h"
#include "nntrainer/model_impl.h"


/* What the reader made of a file: "sec|sec:key=value|..." in order. */
static void flatten(const nnt_ini *ini, char *out, size_t n) {
  size_t at = 0;
  out[0] = '\0';
  for (size_t i = 0; i < nnt_ini_section_count(ini); i++) {
    const nnt_ini_section *s = nnt_ini_section_at(ini, i);
    at += (size_t)snprintf(out + at, n - at, "%s%s", at ? "|" : "", s->name);
    for (size_t j = 0; j < s->n_keys && at < n; j++) {
      const nnt_ini_key *k = nnt_ini_key_at(ini, s, j);
      at += (size_t)snprintf(out + at, n - at, "|%s:%s=%s", s->name, k->name, k->value);
    }
    assert_true(at < n);
  }
}

typedef struct read_case {
  const char *text, *reading;
} read_case;

/* Each reads the same with iniparser 4.1 (checked with tools/ini_diff.c). */
static const read_case read_cases[] = {
    {"# comment\n; comment\n  # indented\n\n[s]\nk = v\n", "s|s:k=v"},
    {"[ FC1 ]\n[Mixed Case]\n", "fc1|mixed case"},
    {"[s]\n  Unit   =  Ten Four  \n", "s|s:unit=Ten Four"},
    {"[s]\nk = \" a b \"\n", "s|s:k= a b "},
    {"[s]\nk = 'x;y#z'\n", "s|s:k=x;y#z"},
    {"[s]\nk = \"v;w\" # comment\nj = 'u' ; comment\n", "s|s:k=v;w|s:j=u"},
    {"[s]\nk = a b ; c\nj = a#b\n", "s|s:k=a b|s:j=a"},
    {"[s]\na =\nb = ;c\nc = \"\"\nd = ''\ne=#\nf = \"\" # c\n",
     "s|s:a=|s:b=|s:c=|s:d=|s:e=|s:f="},
    {"[s]\nk = a\\\n  b\n", "s|s:k=a  b"},
    {"[s]\nk = a \\\n\n", "s|s:k=a"},
    {"[s]\n# comment \\\nk = v\nj = w\n", "s|s:j=w"},
    {"[s]\r\nk = v\r\n\r\n[t]\r\n", "s|s:k=v|t"},
    {"[s]\nk = a=b\nmy key = 1\n", "s|s:k=a=b|s:my key=1"},
    {"[s]\nk = v", "s|s:k=v"},
    {"\t[s]\t\n\tk\t=\tv\tw\t\n", "s|s:k=v\tw"},
    {"[s]\nk = \"it's\"\nj = 'say \"hi\"'\nq = a \"b\" c\n",
     "s|s:k=it's|s:j=say \"hi\"|s:q=a \"b\" c"},
    {"[s]\nk = caf\xc3\xa9 \xe2\x82\xac # \xf0\x9f\x98\x80\n", "s|s:k=caf\xc3\xa9 \xe2\x82\xac"},
    {"[a = b]\n[c]\n[x = 1\n", "a = b|c|c:[x=1"},
    /* a last backslash always continues, even after another one */
    {"[s]\nk = C:\\tu_dir\\\\\nj = 1\n", "s|s:k=C:\\tu_dir\\j = 1"},
    {"[s]\nk = \"a\\\"\n", "s|s:k=a\\"},
    {"", ""},
};

static void test_reads_like_iniparser(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(read_cases); i++) {
    nnt_ini *ini;
    nnt_err e = {0};
    char got[1024];
    const char *t = read_cases[i].text;
    if (nnt_ini_parse("case.ini", t, strlen(t), &ini, &e))
      fail_msg("case %zu: %s", i, e.msg);
    flatten(ini, got, sizeof got);
    if (strcmp(got, read_cases[i].reading))
      fail_msg("case %zu: read '%s', expected '%s'", i, got, read_cases[i].reading);
    nnt_ini_free(ini);
  }
}

/* No line length limit (iniparser stops at 1022 characters). */
static void test_long_lines(void **state) {
  (void)state;
  size_t n = 200000;
  char *t = malloc(n + 32);
  assert_non_null(t);
  strcpy(t, "[s]\nk = ");
  size_t at = strlen(t);
  memset(t + at, 'x', n);
  strcpy(t + at + n, "\n");
  nnt_ini *ini;
  nnt_err e = {0};
  assert_int_equal(nnt_ini_parse("long.ini", t, strlen(t), &ini, &e), NNT_OK);
  const char *v = nnt_ini_get(ini, nnt_ini_find_section(ini, "S"), "K");
  assert_non_null(v);
  assert_int_equal(strlen(v), n);
  nnt_ini_free(ini);
  free(t);
}

typedef struct bad_case {
  const char *text;
  size_t len; /* 0: strlen(text) */
  const char *expect[3];
} bad_case;

static const bad_case bad_cases[] = {
    {"[FC1]\nunit = 1\n[Model]\n[fc1]\n",
     0,
     {"bad.ini: line 4: duplicate section [fc1], already given on line 1"}},
    {"[Model]\n[model]\n", 0, {"line 2: duplicate section [model], already given on line 1"}},
    {"[s]\nUnit = 1\nx = 2\nunit = 3\n",
     0,
     {"line 4: [s] unit: duplicate key, already given on line 2", "keys ignore case"}},
    {"[a]\nk = 1\n[b]\nk = 1\n[a]\nj = 1\n", 0, {"line 5: duplicate section [a]"}},
    {"[s]\nk = 1\nbad line\nk = 2\n", 0, {"line 3: [s] 'bad line' is not a [section]"}},
    {"[s]\nk = 1\nk = 2\nbad line\n", 0, {"line 3: [s] k: duplicate key"}},
    {"[s]\nk = v\0w\n", 12, {"line 2: binary content (byte 0x00 at column 6)"}},
    {"[s]\n\nk = \x01\n", 0, {"line 3: binary content (byte 0x01 at column 5)"}},
    {"[s]\nk = \x7f\n", 0, {"line 2: binary content (byte 0x7f"}},
    {"[s]\nk = \x1b[0m\n", 0, {"line 2: binary content (byte 0x1b"}},
    {"[s]\nk = \xff\n", 0, {"line 2: binary content (byte 0xff at column 5 is not UTF-8 text)"}},
    {"[s]\nk = \xc0\x80\n", 0, {"line 2: binary content (byte 0xc0"}},
    {"[s]\nk = \xed\xa0\x80\n", 0, {"line 2: binary content (byte 0xed"}},
    {"[s]\nk = \xe2\x82\n", 0, {"line 2: binary content (byte 0xe2"}},
    {"[s]\nk = \f\n", 0, {"line 2: binary content (byte 0x0c"}},
    {"\xef\xbb\xbf[s]\n", 0, {"line 1: the file starts with a UTF-8 byte order mark"}},
    {"[s]\nk = a\rj = b\n", 0, {"line 2: a carriage return (CR) inside the line, at column 6"}},
    {"epochs = 1\n[Model]\n", 0, {"line 1: key 'epochs' comes before any [section]"}},
    {"# c\n\nfoo\n", 0, {"line 3: 'foo' is not a [section]"}},
    {"[s]\n= 3\n", 0, {"line 2: [s] '= 3' has no key before '='"}},
    {"[s]\n[]\n", 0, {"line 2: '[]' is a section without a name"}},
    {"[ ]\n", 0, {"line 1: '[ ]' is a section without a name"}},
    {"[a]b]\n", 0, {"line 1: '[a]b]' is not a [section]: text after its first ']'"}},
    {"[a] ; comment\n", 0, {"line 1: '[a] ; comment' is not a [section], a key = value"}},
    {"[a:b]\n", 0, {"line 1: section name 'a:b' holds ':'"}},
    {"[s]\nPath = \"a.bin\nk = 1\n",
     0,
     {"line 2: [s] path: the value's opening \" has no closing"}},
    {"[s]\nk = 'a\n", 0, {"line 2: [s] k: the value's opening ' has no closing '"}},
    {"[s]\nk = \"a\" b\n", 0, {"line 2: [s] k: 'b' after the closing quote"}},
    {"[s]\nk = \"\"x\n", 0, {"line 2: [s] k: 'x' after the closing quote"}},
    {"[s]\nk = 1\nj = a \\\n",
     0,
     {"line 3: [s] 'j = a ' continues ('\\' at its end) past the end"}},
    {"[s]\nk = a\\\n\\\n", 0, {"line 2: [s] 'k = a' continues"}},
};

static void test_refusals(void **state) {
  (void)state;
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad_cases); i++) {
    const bad_case *b = &bad_cases[i];
    size_t len = b->len ? b->len : strlen(b->text);
    nnt_ini *ini = (nnt_ini *)&ini;
    nnt_err e = {0};
    int rc = nnt_ini_parse("bad.ini", b->text, len, &ini, &e);
    if (rc != NNT_ERR_INVAL)
      fail_msg("case %zu: code %d, expected NNT_ERR_INVAL (%s)", i, rc, e.msg);
    assert_null(ini);
    if (strncmp(e.msg, "bad.ini: line ", 14))
      fail_msg("case %zu: message does not start with the file and line: %s", i, e.msg);
    for (size_t j = 0; j < 3 && b->expect[j]; j++)
      tu_assert_contains(e.msg, b->expect[j]);
    /* the same through a file */
    const char *path = tu_write("bad.ini", b->text, len);
    rc = nnt_ini_read_file(path, &ini, &e);
    assert_int_equal(rc, NNT_ERR_INVAL);
    assert_null(ini);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, b->expect[0]);
  }
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_ini_syntax: opening a FIFO blocked\n";
  ssize_t w = write(2, msg, sizeof msg - 1);
  (void)w;
  _exit(1);
}

/* A FIFO, a directory or a device is refused, and opening never blocks
 * (the alarm ends the test if it does). */
static void test_not_regular_files(void **state) {
  (void)state;
  char fifo[1100], link[1100];
  snprintf(fifo, sizeof fifo, "%s/fifo.ini", tu_dir);
  snprintf(link, sizeof link, "%s/link.ini", tu_dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(symlink(fifo, link), 0);
  static const struct {
    const char *path, *what;
  } cases[] = {{NULL, "a FIFO"}, {NULL, "a FIFO"}, {NULL, "a directory"},
               {"/dev/null", "a character device"}, {"/dev/zero", "a character device"}};
  signal(SIGALRM, on_alarm);
  alarm(10);
  for (size_t i = 0; i < NNT_ARRAY_LEN(cases); i++) {
    const char *path = i == 0 ? fifo : i == 1 ? link : i == 2 ? tu_dir : cases[i].path;
    nnt_ini *ini;
    nnt_err e = {0};
    assert_int_equal(nnt_ini_read_file(path, &ini, &e), NNT_ERR_IO);
    assert_null(ini);
    tu_assert_contains(e.msg, path);
    tu_assert_contains(e.msg, "not a regular file");
    tu_assert_contains(e.msg, cases[i].what);
    /* and through the loader */
    nnt_model *m;
    assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
    assert_int_equal(nnt_ini_load(m, path, NULL, 0, &e), NNT_ERR_IO);
    tu_assert_contains(e.msg, "not a regular file");
    nnt_model_destroy(m);
  }
  alarm(0);
  signal(SIGALRM, SIG_DFL);
  char missing[1100];
  snprintf(missing, sizeof missing, "%s/missing.ini", tu_dir);
  nnt_ini *ini;
  nnt_err e = {0};
  assert_int_equal(nnt_ini_read_file(missing, &ini, &e), NNT_ERR_IO);
  tu_assert_contains(e.msg, "missing.ini: cannot read: No such file");
}

/* A file over 16 MiB is refused before it is read. */
static void test_too_large(void **state) {
  (void)state;
  char path[1100];
  snprintf(path, sizeof path, "%s/huge.ini", tu_dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)NNT_INI_MAX_BYTES + 1), 0);
  close(fd);
  nnt_ini *ini;
  nnt_err e = {0};
  assert_int_equal(nnt_ini_read_file(path, &ini, &e), NNT_ERR_INVAL);
  assert_null(ini);
  tu_assert_contains(e.msg, "huge.ini: 16777217 bytes, more than the 16 MiB an INI file may hold");
  assert_int_equal(nnt_ini_parse("big.ini", "", NNT_INI_MAX_BYTES + 1, &ini, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "16 MiB");
}

/* nnt_ini_set: an override replaces a key (any case) in its place or adds
 * one at the end of its section; it is never a duplicate. */
static void test_set(void **state) {
  (void)state;
  const char *t = "[a]\nk = 1\nj = 2\n[b]\n[c]\nx = 3\n";
  nnt_ini *ini;
  nnt_err e = {0};
  char got[256];
  assert_int_equal(nnt_ini_parse("set.ini", t, strlen(t), &ini, &e), NNT_OK);
  assert_int_equal(nnt_ini_set(ini, "A", "K", "one", 3, &e), NNT_OK);
  assert_int_equal(nnt_ini_set(ini, "a", "New", "n;#'\" ", 6, &e), NNT_OK);
  assert_int_equal(nnt_ini_set(ini, "b", "y", "", 0, &e), NNT_OK);
  assert_int_equal(nnt_ini_set(ini, "c", "z", "zz", 1, &e), NNT_OK);
  flatten(ini, got, sizeof got);
  assert_string_equal(got, "a|a:k=one|a:j=2|a:new=n;#'\" |b|b:y=|c|c:x=3|c:z=z");
  assert_int_equal(nnt_ini_find_key(ini, nnt_ini_find_section(ini, "a"), "k")->line, 0);
  assert_int_equal(nnt_ini_find_key(ini, nnt_ini_find_section(ini, "a"), "j")->line, 3);
  assert_int_equal(nnt_ini_set(ini, "d", "k", "1", 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "no section [d]");
  assert_int_equal(nnt_ini_set(ini, "a", "", "1", 1, &e), NNT_ERR_INVAL);
  nnt_ini_free(ini);
}

/* Fail every allocation in turn, reading and then setting: each failure is
 * NNT_ERR_NOMEM with nothing returned and nothing leaked (LeakSanitizer),
 * and a failed set leaves the file's reading unchanged. */
static void test_reader_allocation_failures(void **state) {
  (void)state;
  const char *t = "[Model]\nepochs = 1\n[a]\nk = 1\nj = 2\n[b]\nx = \"q\"\n";
  int done = 0;
  for (long n = 0; n < 200 && !done; n++) {
    nnt_ini *ini = NULL;
    nnt_err e = {0};
    char before[256], after[256];
    nnt_alloc_fail_after(n);
    int rc = nnt_ini_parse("alloc.ini", t, strlen(t), &ini, &e);
    if (rc == NNT_OK) {
      flatten(ini, before, sizeof before);
      rc = nnt_ini_set(ini, "a", "added", "v", 1, &e);
      if (rc == NNT_OK) {
        rc = nnt_ini_set(ini, "a", "k", "w", 1, &e);
        done = rc == NNT_OK;
      }
    }
    nnt_alloc_fail_after(-1);
    if (!done) {
      assert_int_equal(rc, NNT_ERR_NOMEM);
      tu_assert_contains(e.msg, "out of memory");
    }
    if (ini && !done) {
      flatten(ini, after, sizeof after);
      if (strstr(after, "a:added=v"))
        assert_string_equal(after, "model|model:epochs=1|a|a:k=1|a:j=2|a:added=v|b|b:x=q");
      else
        assert_string_equal(after, before);
    }
    nnt_ini_free(ini);
  }
  assert_true(done);
}

/* Every allocation of loading a real INI fails in turn: NNT_ERR_NOMEM each
 * time with the file named, until n passes the last allocation and the
 * load succeeds; the ASan build checks that nothing leaks. */
static void test_load_allocation_failures(void **state) {
  (void)state;
  const char *path = NNT_SOURCE_DIR "/Applications/FashionMNIST/cnn_bn.ini";
  const char *ov[] = {"Model.epochs=2", "conv1.trainable=true"};
  long failures = 0;
  int done = 0;
  for (long n = 0; n < 5000 && !done; n++) {
    nnt_model *m;
    nnt_err e = {0};
    assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
    assert_int_equal(
        nnt_model_set_base_dir(m, NNT_SOURCE_DIR "/Applications/FashionMNIST", &e), NNT_OK);
    nnt_alloc_fail_after(n);
    int rc = nnt_ini_load(m, path, ov, 2, &e);
    nnt_alloc_fail_after(-1);
    if (rc == NNT_OK) {
      done = 1;
      assert_int_equal(nnt_model_epochs(m), 2);
      assert_true(nnt_model_layer_count(m) > 5);
    } else {
      if (rc != NNT_ERR_NOMEM)
        fail_msg("allocation %ld failed: code %d, expected NNT_ERR_NOMEM: %s", n, rc, e.msg);
      tu_assert_contains(e.msg, "cnn_bn.ini");
      failures++;
    }
    nnt_model_destroy(m);
  }
  assert_true(done);
  assert_true(failures > 20);
}

/* The loader's messages carry the line of the key, or of the section when
 * the key is missing; a value from an override has none. */
static void test_loader_lines(void **state) {
  (void)state;
  const char *text = "[Model]\nepochs = 1\n\n[in]\ntype = input\ninput_shape = 1:1:4\n"
                     "[fc]\ntype = fully_connected\n# unit below\nunit = abc\n[out]\nunit = 2\n";
  const char *path = tu_write("lines.ini", text, strlen(text));
  nnt_model *m;
  nnt_err e = {0};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_ini_load(m, path, NULL, 0, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "lines.ini: line 10: [fc] unit: value 'abc'");
  nnt_model_destroy(m);
  const char *fix[] = {"fc.unit=3"};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_ini_load(m, path, fix, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "lines.ini: line 11: [out] type: required key is missing");
  nnt_model_destroy(m);
  const char *bad[] = {"FC.UNIT = x"};
  assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
  assert_int_equal(nnt_ini_load(m, path, bad, 1, &e), NNT_ERR_INVAL);
  tu_assert_contains(e.msg, "lines.ini: [fc] unit: value 'x'");
  tu_assert_contains(e.msg, "(from override 'FC.UNIT = x')");
  nnt_model_destroy(m);
}

/* Every value nnt_ini_value_quote says can be written reads back exactly
 * (random strings of the characters the syntax cares about); the ones it
 * refuses hold a control character or need quotes and hold both kinds. */
static void test_written_values_read_back(void **state) {
  (void)state;
  static const char *const alphabet[] = {"a", "Z", " ", "\t", ";", "#", "\"", "'", "\\",
                                         "=", "[", "]", "\xc3\xa9", "\n", "\r", "\x01"};
  nnt_rng r;
  nnt_rng_seed(&r, 11);
  unsigned written = 0, quoted = 0;
  for (int i = 0; i < 20000; i++) {
    char v[64] = "", text[160];
    unsigned len = nnt_rng_below(&r, 9);
    for (unsigned j = 0; j < len; j++)
      strcat(v, alphabet[nnt_rng_below(&r, NNT_ARRAY_LEN(alphabet))]);
    int q = nnt_ini_value_quote(v);
    if (q < 0) {
      int control = strpbrk(v, "\n\r\x01") != NULL;
      assert_true(control || (strchr(v, '"') && strchr(v, '\'')));
      continue;
    }
    written++;
    quoted += q != 0;
    if (q)
      snprintf(text, sizeof text, "[s]\nk = %c%s%c\nnext = 1\n", q, v, q);
    else
      snprintf(text, sizeof text, "[s]\nk = %s\nnext = 1\n", v);
    nnt_ini *ini;
    nnt_err e = {0};
    if (nnt_ini_parse("v.ini", text, strlen(text), &ini, &e))
      fail_msg("value '%s' written as '%s': %s", v, text, e.msg);
    const nnt_ini_section *sec = nnt_ini_find_section(ini, "s");
    if (strcmp(nnt_ini_get(ini, sec, "k"), v) || !nnt_ini_get(ini, sec, "next"))
      fail_msg("value '%s' written as '%s' reads back as '%s'", v, text,
               nnt_ini_get(ini, sec, "k"));
    nnt_ini_free(ini);
  }
  assert_true(written > 5000 && quoted > 2000);
  assert_int_equal(nnt_ini_value_quote("\xff"), -1);
  assert_true(nnt_ini_name_writable("fc1", 1) && nnt_ini_name_writable("a b#;[", 1));
  assert_false(nnt_ini_name_writable("a]b", 1) || nnt_ini_name_writable("a:b", 1) ||
               nnt_ini_name_writable(" a", 1) || nnt_ini_name_writable("", 1));
  assert_true(nnt_ini_name_writable("unit", 0));
  assert_false(nnt_ini_name_writable("a=b", 0) || nnt_ini_name_writable("[a", 0) ||
               nnt_ini_name_writable("#a", 0) || nnt_ini_name_writable("a\n", 0));
}

/* A model saved as an INI loads back with the same values, paths holding
 * ; # quotes and blanks included; what cannot be written is refused and no
 * file is left. */
static void test_save_round_trip(void **state) {
  (void)state;
  static const char *const names[] = {"w;1.bin", "w#2.bin", " lead and trail ", "'q'.bin",
                                      "\"dq\".bin", "it's \"x\".bin", "end\\", "caf\xc3\xa9"};
  char ini_path[1100];
  snprintf(ini_path, sizeof ini_path, "%s/saved.ini", tu_dir);
  for (size_t i = 0; i < NNT_ARRAY_LEN(names); i++) {
    char save[1200];
    snprintf(save, sizeof save, "%s/%s", tu_dir, names[i]);
    nnt_model *m, *back;
    nnt_layer *in, *fc;
    nnt_err e = {0};
    assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
    assert_int_equal(nnt_model_set_base_dir(m, tu_dir, &e), NNT_OK);
    assert_int_equal(nnt_model_set_property(m, "save_path", save, &e), NNT_OK);
    assert_int_equal(nnt_layer_create("input", &in, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(in, "input_shape", "1:1:3", &e), NNT_OK);
    assert_int_equal(nnt_model_add_layer(m, in, &e), NNT_OK);
    assert_int_equal(nnt_layer_create("fully_connected", &fc, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(fc, "name", "Out #1", &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(fc, "unit", " 4 ", &e), NNT_OK);
    assert_int_equal(nnt_model_add_layer(m, fc, &e), NNT_OK);
    if (nnt_model_save_ini(m, ini_path, NULL, &e))
      fail_msg("save_path '%s': %s", save, e.msg);
    assert_int_equal(nnt_model_create(&back, &e), NNT_OK);
    assert_int_equal(nnt_model_set_base_dir(back, tu_dir, &e), NNT_OK);
    if (nnt_ini_load(back, ini_path, NULL, 0, &e))
      fail_msg("save_path '%s': %s", save, e.msg);
    assert_string_equal(back->save_path, save);
    assert_int_equal(nnt_model_layer_count(back), 2);
    const nnt_layer *l = nnt_model_layer_at(back, 1);
    assert_string_equal(l->name, "out #1");
    assert_int_equal(l->n_props, 1);
    assert_string_equal(l->prop_val[0], " 4 ");
    nnt_model_destroy(back);
    nnt_model_destroy(m);
  }
  /* a value with both quotes that needs quoting, a name with ']' */
  static const struct {
    const char *key, *value, *expect;
  } bad[] = {{"save_path", "/tmp/'a' \"b\" ", "[model] save_path: value '/tmp/'a' \"b\" ' cannot"},
             {"name", "a]b", "layer name 'a]b' cannot be a [section] name"}};
  for (size_t i = 0; i < NNT_ARRAY_LEN(bad); i++) {
    nnt_model *m;
    nnt_layer *in;
    nnt_err e = {0};
    unlink(ini_path);
    assert_int_equal(nnt_model_create(&m, &e), NNT_OK);
    assert_int_equal(nnt_layer_create("input", &in, &e), NNT_OK);
    assert_int_equal(nnt_layer_set_property(in, "input_shape", "1:1:3", &e), NNT_OK);
    if (!strcmp(bad[i].key, "name"))
      assert_int_equal(nnt_layer_set_property(in, "name", bad[i].value, &e), NNT_OK);
    else
      assert_int_equal(nnt_model_set_property(m, bad[i].key, bad[i].value, &e), NNT_OK);
    assert_int_equal(nnt_model_add_layer(m, in, &e), NNT_OK);
    assert_int_equal(nnt_model_save_ini(m, ini_path, NULL, &e), NNT_ERR_INVAL);
    tu_assert_contains(e.msg, bad[i].expect);
    assert_int_equal(access(ini_path, F_OK), -1);
    nnt_model_destroy(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reads_like_iniparser),
      cmocka_unit_test(test_long_lines),
      cmocka_unit_test_setup_teardown(test_refusals, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_not_regular_files, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test_setup_teardown(test_too_large, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_set),
      cmocka_unit_test(test_reader_allocation_failures),
      cmocka_unit_test(test_load_allocation_failures),
      cmocka_unit_test_setup_teardown(test_loader_lines, tu_dir_setup, tu_dir_teardown),
      cmocka_unit_test(test_written_values_read_back),
      cmocka_unit_test_setup_teardown(test_save_round_trip, tu_dir_setup, tu_dir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
