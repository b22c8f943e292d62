/* Shapes: parsing and formatting NNTrainer's b:c:h:w notation, and the
 * checked size of a shape. */
#include "nntrainer/tensor.h"

#include <stdio.h>
#include <string.h>

int nnt_dim_check(nnt_dim d, const char *what, size_t *len, size_t *bytes, nnt_err *e) {
  char s[64];
  if (!d.b || !d.c || !d.h || !d.w)
    return nnt_err_set(e, NNT_ERR_INVAL, "%s %s has an axis of 0", what,
                       nnt_dim_str(d, s, sizeof s));
  size_t n, nb;
  if (nnt_size_mul(d.b, d.c, &n) || nnt_size_mul(n, d.h, &n) || nnt_size_mul(n, d.w, &n) ||
      nnt_size_mul(n, sizeof(float), &nb) || nb > NNT_BYTES_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s %s does not fit: %.4g values of 4 bytes, more than the %zu "
                       "bytes one tensor may take",
                       what, nnt_dim_str(d, s, sizeof s),
                       (double)d.b * d.c * (double)d.h * d.w, NNT_BYTES_MAX);
  if (len)
    *len = n;
  if (bytes)
    *bytes = nb;
  return NNT_OK;
}

int nnt_dim_eq(nnt_dim a, nnt_dim b) {
  return a.b == b.b && a.c == b.c && a.h == b.h && a.w == b.w;
}

int nnt_dim_parse(const char *key, const char *s, nnt_dim *out, nnt_err *e) {
  unsigned v[4], n = 0;
  char buf[128];
  if (!s || strlen(s) >= sizeof buf)
    goto bad;
  strcpy(buf, s);
  /* every part is a positive integer: "1::2" is not a shape */
  for (char *tok = buf, *colon;; tok = colon + 1) {
    if ((colon = strchr(tok, ':')))
      *colon = '\0';
    if (n == 4 || nnt_parse_uint(key, tok, &v[n], NULL) || v[n] == 0)
      goto bad;
    n++;
    if (!colon)
      break;
  }
  unsigned full[4] = {1, 1, 1, 1};
  for (unsigned i = 0; i < n; i++)
    full[4 - n + i] = v[i];
  *out = nnt_dim_make(full[0], full[1], full[2], full[3]);
  return NNT_OK;
bad:
  return nnt_err_set(e, NNT_ERR_INVAL,
                     "key '%s': value '%s' is not a shape (up to four positive "
                     "integers separated by ':', as in 1:28:28)",
                     key, s ? s : "(null)");
}

char *nnt_dim_str(nnt_dim d, char *buf, size_t n) {
  snprintf(buf, n, "%u:%u:%u:%u", d.b, d.c, d.h, d.w);
  return buf;
}
