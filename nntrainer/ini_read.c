/* The INI reader (see ini_read.h). The file is read whole, checked to be
 * UTF-8 text, then cut into lines in place: keys and values point into that
 * one buffer, so a file costs one buffer and two growing arrays whatever its
 * size. Syntax, as iniparser 4.1 reads a well-formed file:
 *   - lines end in LF or CR LF; spaces and tabs around a line are dropped;
 *   - a line whose last character (after that) is '\' continues on the next
 *     one: the backslash goes, the next line is appended as it is;
 *   - "#" or ";" first: a comment; "[name]": a section, name trimmed and
 *     lowercased;
 *   - "key = value": key trimmed and lowercased; a value starting with " or
 *     ' runs to the same quote, kept as is; any other value ends at the
 *     first ; or # and is trimmed.
 * What iniparser accepts but we refuse (a duplicate, a value with an
 * unclosed quote, ...) is listed in docs/ini.md. */
#include "nntrainer/ini_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct key_rec {
  nnt_ini_key k;
  size_t sec; /* index of its section */
  char *own;  /* the allocation holding name and value of a key set by nnt_ini_set */
} key_rec;

struct nnt_ini {
  char *text; /* the file; names and values are cut out of it in place */
  nnt_ini_section *sec;
  size_t n_sec, cap_sec;
  key_rec *keys; /* section by section, in file order */
  size_t n_keys, cap_keys;
};

typedef struct parser {
  nnt_ini *ini;
  const char *name; /* the file, for messages */
  nnt_err *e;
} parser;

/* ---- messages ----------------------------------------------------------- */

/* "<file>: line N: [section] what" (the section when there is one). */
static int syntax_error(parser *p, unsigned line, int in_section, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int syntax_error(parser *p, unsigned line, int in_section, const char *fmt, ...) {
  char what[NNT_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const nnt_ini *ini = p->ini;
  if (in_section && ini->n_sec)
    return nnt_err_set(p->e, NNT_ERR_INVAL, "%s: line %u: [%s] %s", p->name, line,
                       ini->sec[ini->n_sec - 1].name, what);
  return nnt_err_set(p->e, NNT_ERR_INVAL, "%s: line %u: %s", p->name, line, what);
}

static int no_memory(parser *p) {
  return nnt_err_set(p->e, NNT_ERR_NOMEM, "%s: out of memory reading the file", p->name);
}

/* ---- text check ---------------------------------------------------------- */

/* Length of the UTF-8 sequence at s (n bytes left), 0 when it is not valid
 * UTF-8 (overlong forms, surrogates and values past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0], min;
  size_t len;
  uint32_t cp;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, cp = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, cp = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

/* The file must be UTF-8 text: no control bytes but tab, LF and a CR that
 * ends a line, no invalid UTF-8, no byte order mark. */
static int check_text(parser *p, const unsigned char *t, size_t n) {
  if (n >= 3 && t[0] == 0xef && t[1] == 0xbb && t[2] == 0xbf)
    return syntax_error(p, 1, 0, "the file starts with a UTF-8 byte order mark, which "
                                 "NNTrainer's reader (iniparser) cannot read: save it without");
  unsigned line = 1;
  size_t bol = 0; /* offset where the line begins */
  for (size_t i = 0; i < n;) {
    unsigned c = t[i];
    if (c == '\n') {
      line++;
      bol = ++i;
      continue;
    }
    if (c == '\r') {
      size_t j = i + 1;
      while (j < n && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r'))
        j++;
      if (j < n && t[j] != '\n')
        return syntax_error(p, line, 0, "a carriage return (CR) inside the line, at column %zu: "
                                        "lines end in LF or CR LF", i - bol + 1);
      i = j;
      continue;
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f)
      return syntax_error(p, line, 0, "binary content (byte 0x%02x at column %zu): not a "
                                      "text INI file", c, i - bol + 1);
    size_t len = utf8_len(t + i, n - i);
    if (!len)
      return syntax_error(p, line, 0, "binary content (byte 0x%02x at column %zu is not "
                                      "UTF-8 text): not a text INI file", c, i - bol + 1);
    i += len;
  }
  return NNT_OK;
}

/* ---- building ------------------------------------------------------------- */

/* Room for one more of n elements of size elem in *arr (capacity *cap). */
static int reserve(void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap)
    return 0;
  size_t nc = *cap ? *cap * 2 : 16;
  void *a = nnt_realloc(*arr, nc * elem);
  if (!a)
    return -1;
  *arr = a;
  *cap = nc;
  return 0;
}

static void lower(char *s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z')
      *s = (char)(*s - 'A' + 'a');
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* s: "[...]" of len characters (len >= 2). */
static int section_line(parser *p, char *s, size_t len, unsigned line) {
  char *b = s + 1, *end = memchr(b, ']', len - 1);
  if (end != s + len - 1)
    return syntax_error(p, line, 0, "'%.80s' is not a [section]: text after its first ']'", s);
  while (b < end && is_blank(*b))
    b++;
  while (end > b && is_blank(end[-1]))
    end--;
  if (b == end)
    return syntax_error(p, line, 0, "'%.80s' is a section without a name", s);
  *end = '\0';
  if (strchr(b, ':'))
    return syntax_error(p, line, 0, "section name '%.80s' holds ':', which NNTrainer's reader "
                                    "(iniparser) takes for its key separator", b);
  lower(b);
  nnt_ini *ini = p->ini;
  if (reserve((void **)&ini->sec, &ini->cap_sec, ini->n_sec, sizeof *ini->sec))
    return no_memory(p);
  ini->sec[ini->n_sec++] = (nnt_ini_section){.name = b, .line = line, .first = ini->n_keys};
  return NNT_OK;
}

/* s: a line that is neither blank, a comment nor a section. */
static int key_line(parser *p, char *s, unsigned line) {
  char *eq = strchr(s, '=');
  if (!eq)
    return syntax_error(p, line, 1, "'%.80s' is not a [section], a key = value or a comment", s);
  if (eq == s)
    return syntax_error(p, line, 1, "'%.80s' has no key before '='", s);
  char *kend = eq;
  while (is_blank(kend[-1]))
    kend--;
  *kend = '\0';
  lower(s);
  nnt_ini *ini = p->ini;
  if (!ini->n_sec)
    return syntax_error(p, line, 0, "key '%.80s' comes before any [section]", s);
  char *v = eq + 1, *vend;
  while (is_blank(*v))
    v++;
  if (*v == '"' || *v == '\'') {
    char *close = strchr(v + 1, *v), *after;
    if (!close)
      return syntax_error(p, line, 1, "%s: the value's opening %c has no closing %c", s, *v, *v);
    for (after = close + 1; is_blank(*after); after++)
      ;
    if (*after && *after != '#' && *after != ';')
      return syntax_error(p, line, 1, "%s: '%.40s' after the closing quote (a comment there "
                                      "starts with # or ;)", s, after);
    vend = close;
    v++;
  } else {
    vend = v + strcspn(v, ";#");
    while (vend > v && is_blank(vend[-1]))
      vend--;
  }
  *vend = '\0';
  if (reserve((void **)&ini->keys, &ini->cap_keys, ini->n_keys, sizeof *ini->keys))
    return no_memory(p);
  ini->keys[ini->n_keys++] =
      (key_rec){.k = {.name = s, .value = v, .line = line}, .sec = ini->n_sec - 1};
  ini->sec[ini->n_sec - 1].n_keys++;
  return NNT_OK;
}

/* One logical line (continuations joined, trailing blanks gone). */
static int logical_line(parser *p, char *s, unsigned line) {
  while (is_blank(*s))
    s++;
  size_t len = strlen(s);
  if (!len || s[0] == '#' || s[0] == ';')
    return NNT_OK;
  if (s[0] == '[' && s[len - 1] == ']' && len >= 2)
    return section_line(p, s, len, line);
  return key_line(p, s, line);
}

/* Cut text (len bytes, with a spare byte after them) into logical lines in
 * place: the write position never passes the read position, since a line
 * loses at least its newline. */
static int parse_lines(parser *p, char *text, size_t len) {
  char *r = text, *end = text + len, *w = text, *ls = text;
  unsigned line = 0, first = 0;
  int pending = 0, rc;
  while (r < end) {
    char *nl = memchr(r, '\n', (size_t)(end - r)), *pe = nl ? nl : end, *q = pe;
    line++;
    while (q > r && (is_blank(q[-1]) || q[-1] == '\r'))
      q--;
    if (!pending) {
      ls = w;
      first = line;
    }
    memmove(w, r, (size_t)(q - r));
    w += q - r;
    r = nl ? nl + 1 : end;
    /* iniparser trims the joined line, then looks for the backslash */
    while (w > ls && is_blank(w[-1]))
      w--;
    if (w > ls && w[-1] == '\\') {
      w--;
      pending = 1;
      continue;
    }
    pending = 0;
    *w = '\0';
    if ((rc = logical_line(p, ls, first)))
      return rc;
    w++;
  }
  if (pending) {
    *w = '\0';
    while (is_blank(*ls))
      ls++;
    if (*ls && *ls != '#' && *ls != ';')
      return syntax_error(p, first, 1, "'%.80s' continues ('\\' at its end) past the end of "
                                       "the file; NNTrainer's reader would drop it", ls);
  }
  return NNT_OK;
}

/* ---- duplicates ------------------------------------------------------------ */

static int cmp_sec(const void *a, const void *b) {
  const nnt_ini_section *x = *(const nnt_ini_section *const *)a;
  const nnt_ini_section *y = *(const nnt_ini_section *const *)b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int cmp_key(const void *a, const void *b) {
  const key_rec *x = *(const key_rec *const *)a, *y = *(const key_rec *const *)b;
  if (x->sec != y->sec)
    return x->sec < y->sec ? -1 : 1;
  int c = strcmp(x->k.name, y->k.name);
  return c ? c : (x->k.line > y->k.line) - (x->k.line < y->k.line);
}

/* Report the duplicate section or key (names compared lowercase) given
 * first in the file, if any. Sorting keeps this O(n log n) for any file. */
static int check_duplicates(parser *p) {
  nnt_ini *ini = p->ini;
  size_t n = ini->n_sec > ini->n_keys ? ini->n_sec : ini->n_keys;
  const void **v = nnt_malloc((n ? n : 1) * sizeof *v);
  if (!v)
    return no_memory(p);
  const nnt_ini_section *ds = NULL, *dfirst = NULL;
  for (size_t i = 0; i < ini->n_sec; i++)
    v[i] = &ini->sec[i];
  qsort(v, ini->n_sec, sizeof *v, cmp_sec);
  /* sorted by (name, line): the pair starting a run of equal names holds
   * the first occurrence and the earliest repeat */
  for (size_t i = 1; i < ini->n_sec; i++) {
    const nnt_ini_section *a = v[i - 1], *b = v[i];
    if (!strcmp(a->name, b->name) && (!ds || b->line < ds->line)) {
      ds = b;
      dfirst = a;
    }
  }
  const key_rec *dk = NULL, *kfirst = NULL;
  for (size_t i = 0; i < ini->n_keys; i++)
    v[i] = &ini->keys[i];
  qsort(v, ini->n_keys, sizeof *v, cmp_key);
  for (size_t i = 1; i < ini->n_keys; i++) {
    const key_rec *a = v[i - 1], *b = v[i];
    if (a->sec == b->sec && !strcmp(a->k.name, b->k.name) && (!dk || b->k.line < dk->k.line)) {
      dk = b;
      kfirst = a;
    }
  }
  nnt_free(v);
  if (dk && (!ds || dk->k.line < ds->line))
    return nnt_err_set(p->e, NNT_ERR_INVAL,
                       "%s: line %u: [%s] %s: duplicate key, already given on line %u (keys "
                       "ignore case)", p->name, dk->k.line, ini->sec[dk->sec].name, dk->k.name,
                       kfirst->k.line);
  if (ds)
    return nnt_err_set(p->e, NNT_ERR_INVAL,
                       "%s: line %u: duplicate section [%s], already given on line %u (section "
                       "names ignore case)", p->name, ds->line, ds->name, dfirst->line);
  return NNT_OK;
}

/* ---- reading ----------------------------------------------------------------- */

/* Parse buf (len bytes and one spare), which the result takes over; on error
 * everything is freed. */
static int parse_owned(const char *name, char *buf, size_t len, nnt_ini **out, nnt_err *e) {
  nnt_ini *ini = nnt_calloc(1, sizeof *ini);
  if (!ini) {
    nnt_free(buf);
    return nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory reading the file", name);
  }
  ini->text = buf;
  buf[len] = '\0';
  parser p = {.ini = ini, .name = name, .e = e};
  int rc = check_text(&p, (const unsigned char *)buf, len);
  if (!rc && (rc = parse_lines(&p, buf, len)) == NNT_ERR_INVAL) {
    /* a duplicate before the bad line is the first problem in the file */
    nnt_err keep = {0};
    if (e)
      keep = *e;
    int rd = check_duplicates(&p);
    if (rd == NNT_OK && e)
      *e = keep;
    else if (rd != NNT_OK)
      rc = rd;
  } else if (!rc) {
    rc = check_duplicates(&p);
  }
  if (rc) {
    nnt_ini_free(ini);
    return rc;
  }
  *out = ini;
  return NNT_OK;
}

int nnt_ini_parse(const char *name, const char *text, size_t len, nnt_ini **out, nnt_err *e) {
  if (!out)
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: NULL result pointer");
  *out = NULL;
  if (!name || (!text && len))
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: NULL name or text");
  if (len > NNT_INI_MAX_BYTES)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s: %zu bytes, more than the %zu MiB an INI file may "
                       "hold", name, len, NNT_INI_MAX_BYTES >> 20);
  char *buf = nnt_malloc(len + 1);
  if (!buf)
    return nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory reading the file", name);
  if (len)
    memcpy(buf, text, len);
  return parse_owned(name, buf, len, out, e);
}

static const char *file_kind(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a plain file";
}

int nnt_ini_read_file(const char *path, nnt_ini **out, nnt_err *e) {
  if (!out)
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: NULL result pointer");
  *out = NULL;
  if (!path)
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: NULL path");
  /* O_NONBLOCK: opening a FIFO must not wait for a writer */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return nnt_err_set(e, NNT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
  struct stat st;
  int rc = NNT_OK;
  char *buf = NULL;
  size_t n = 0, cap = 0;
  if (fstat(fd, &st)) {
    rc = nnt_err_set(e, NNT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    rc = nnt_err_set(e, NNT_ERR_IO, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
  } else if ((uintmax_t)st.st_size > NNT_INI_MAX_BYTES) {
    rc = nnt_err_set(e, NNT_ERR_INVAL, "%s: %jd bytes, more than the %zu MiB an INI file may "
                     "hold", path, (intmax_t)st.st_size, NNT_INI_MAX_BYTES >> 20);
  } else {
    /* read to the end, whatever the size said: the file may change */
    cap = (size_t)st.st_size + 1;
    for (;;) {
      if (n == cap) {
        size_t nc = cap * 2 > NNT_INI_MAX_BYTES + 1 ? NNT_INI_MAX_BYTES + 1 : cap * 2;
        if (nc == cap) {
          rc = nnt_err_set(e, NNT_ERR_INVAL, "%s: more than the %zu MiB an INI file may hold",
                           path, NNT_INI_MAX_BYTES >> 20);
          break;
        }
        char *nb = nnt_realloc(buf, nc + 1);
        if (!nb) {
          rc = nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory reading the file", path);
          break;
        }
        buf = nb;
        cap = nc;
      } else if (!buf && !(buf = nnt_malloc(cap + 1))) {
        rc = nnt_err_set(e, NNT_ERR_NOMEM, "%s: out of memory reading the file", path);
        break;
      }
      ssize_t got = read(fd, buf + n, cap - n);
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0) {
        rc = nnt_err_set(e, NNT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        break;
      }
      if (!got)
        break;
      n += (size_t)got;
    }
  }
  close(fd);
  if (rc) {
    nnt_free(buf);
    return rc;
  }
  return parse_owned(path, buf, n, out, e);
}

/* ---- access ------------------------------------------------------------------- */

void nnt_ini_free(nnt_ini *ini) {
  if (!ini)
    return;
  for (size_t i = 0; i < ini->n_keys; i++)
    nnt_free(ini->keys[i].own);
  nnt_free(ini->keys);
  nnt_free(ini->sec);
  nnt_free(ini->text);
  nnt_free(ini);
}

size_t nnt_ini_section_count(const nnt_ini *ini) { return ini ? ini->n_sec : 0; }

const nnt_ini_section *nnt_ini_section_at(const nnt_ini *ini, size_t i) {
  return ini && i < ini->n_sec ? &ini->sec[i] : NULL;
}

const nnt_ini_section *nnt_ini_find_section(const nnt_ini *ini, const char *name) {
  for (size_t i = 0; ini && name && i < ini->n_sec; i++)
    if (!strcasecmp(ini->sec[i].name, name))
      return &ini->sec[i];
  return NULL;
}

const nnt_ini_key *nnt_ini_key_at(const nnt_ini *ini, const nnt_ini_section *s, size_t i) {
  return ini && s && i < s->n_keys ? &ini->keys[s->first + i].k : NULL;
}

const nnt_ini_key *nnt_ini_find_key(const nnt_ini *ini, const nnt_ini_section *s,
                                    const char *key) {
  for (size_t i = 0; ini && s && key && i < s->n_keys; i++)
    if (!strcasecmp(ini->keys[s->first + i].k.name, key))
      return &ini->keys[s->first + i].k;
  return NULL;
}

const char *nnt_ini_get(const nnt_ini *ini, const nnt_ini_section *s, const char *key) {
  const nnt_ini_key *k = nnt_ini_find_key(ini, s, key);
  return k ? k->value : NULL;
}

int nnt_ini_set(nnt_ini *ini, const char *section, const char *key, const char *value,
                size_t value_len, nnt_err *e) {
  if (!ini || !section || !key || !value)
    return nnt_err_set(e, NNT_ERR_INVAL, "ini: NULL argument");
  const nnt_ini_section *s = nnt_ini_find_section(ini, section);
  if (!s)
    return nnt_err_set(e, NNT_ERR_INVAL, "no section [%s]", section);
  if (!key[0])
    return nnt_err_set(e, NNT_ERR_INVAL, "[%s]: empty key", section);
  size_t si = (size_t)(s - ini->sec), kl = strlen(key), vl = value_len;
  char *own = nnt_malloc(kl + vl + 2);
  if (!own)
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory setting [%s] %s", section, key);
  memcpy(own, key, kl + 1);
  lower(own);
  memcpy(own + kl + 1, value, vl);
  own[kl + 1 + vl] = '\0';
  nnt_ini_key k = {.name = own, .value = own + kl + 1, .line = 0};
  for (size_t i = s->first; i < s->first + s->n_keys; i++)
    if (!strcmp(ini->keys[i].k.name, own)) {
      nnt_free(ini->keys[i].own);
      ini->keys[i].own = own;
      ini->keys[i].k = k;
      return NNT_OK;
    }
  if (reserve((void **)&ini->keys, &ini->cap_keys, ini->n_keys, sizeof *ini->keys)) {
    nnt_free(own);
    return nnt_err_set(e, NNT_ERR_NOMEM, "out of memory setting [%s] %s", section, key);
  }
  size_t at = ini->sec[si].first + ini->sec[si].n_keys;
  memmove(&ini->keys[at + 1], &ini->keys[at], (ini->n_keys - at) * sizeof *ini->keys);
  ini->keys[at] = (key_rec){.k = k, .sec = si, .own = own};
  ini->n_keys++;
  ini->sec[si].n_keys++;
  for (size_t i = si + 1; i < ini->n_sec; i++)
    ini->sec[i].first++;
  return NNT_OK;
}

/* ---- writing ------------------------------------------------------------------ */

/* Valid UTF-8 without control characters other than tab. */
static int is_text(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = strlen(s);
  for (size_t i = 0, len; i < n; i += len) {
    if ((u[i] < 0x20 && u[i] != '\t') || u[i] == 0x7f || !(len = utf8_len(u + i, n - i)))
      return 0;
  }
  return 1;
}

int nnt_ini_value_quote(const char *v) {
  if (!v || !is_text(v))
    return -1;
  size_t n = strlen(v);
  int plain = !n || (!is_blank(v[0]) && !is_blank(v[n - 1]) && v[0] != '"' && v[0] != '\'' &&
                     v[n - 1] != '\\' && !strpbrk(v, ";#"));
  if (plain)
    return 0;
  if (!strchr(v, '"'))
    return '"';
  if (!strchr(v, '\''))
    return '\'';
  return -1;
}

int nnt_ini_name_writable(const char *name, int section) {
  if (!name || !name[0] || !is_text(name) || is_blank(name[0]) ||
      is_blank(name[strlen(name) - 1]))
    return 0;
  if (section)
    return !strpbrk(name, "]:");
  return !strchr(name, '=') && !strchr("[#;", name[0]);
}
