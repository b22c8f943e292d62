/* Window properties and geometry for convolution and pooling layers. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include "nntrainer/layer.h"

void nnt_window_props_init(nnt_window_props *p) {
  p->k[0] = p->k[1] = 1;
  p->s[0] = p->s[1] = 1;
  p->d[0] = p->d[1] = 1;
  p->k_set = 0;
  p->pad_mode = 1;
  p->pad[0] = p->pad[1] = p->pad[2] = p->pad[3] = 0;
}

/* "a" or "a,b" (height, width); one_d keeps height 1 and sets width. */
static int pair(const char *key, const char *value, unsigned out[2], int one_d, int positive,
                nnt_err *e) {
  unsigned v[2], n;
  int rc = nnt_parse_uint_list(key, value, v, 2, &n, e);
  if (rc)
    return rc;
  if (positive && (!v[0] || (n == 2 && !v[1])))
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': '%s' must be positive", key, value);
  if (one_d && n != 1)
    return nnt_err_set(e, NNT_ERR_INVAL, "key '%s': '%s' must be one value", key, value);
  if (one_d) {
    out[0] = positive ? 1 : 0;
    out[1] = v[0];
  } else {
    out[0] = v[0];
    out[1] = n == 2 ? v[1] : v[0];
  }
  return NNT_OK;
}

int nnt_window_props_set(nnt_window_props *p, const char *key, const char *kernel_key,
                         const char *value, int one_d, nnt_err *e) {
  int rc;
  if (nnt_streq(key, kernel_key)) {
    rc = pair(key, value, p->k, one_d, 1, e);
    p->k_set = !rc;
    return rc;
  }
  if (nnt_streq(key, "stride")) {
    return pair(key, value, p->s, one_d, 1, e);
  }
  if (nnt_streq(key, "dilation"))
    return pair(key, value, p->d, one_d, 1, e);
  if (nnt_streq(key, "padding")) {
    if (nnt_streq(value, "valid")) {
      p->pad_mode = 1;
      return NNT_OK;
    }
    if (nnt_streq(value, "same")) {
      p->pad_mode = 2;
      return NNT_OK;
    }
    unsigned v[4], n;
    if ((rc = nnt_parse_uint_list(key, value, v, 4, &n, NULL)) || n == 3 || (one_d && n > 2))
      return nnt_err_set(e, NNT_ERR_INVAL,
                         "key 'padding': '%s' is not valid, same, or 1, 2 or 4 values", value);
    p->pad_mode = 0;
    if (one_d) {
      p->pad[0] = p->pad[1] = 0;
      p->pad[2] = v[0];
      p->pad[3] = n == 2 ? v[1] : v[0];
    } else if (n == 1) {
      p->pad[0] = p->pad[1] = p->pad[2] = p->pad[3] = v[0];
    } else if (n == 2) {
      p->pad[0] = p->pad[1] = v[0];
      p->pad[2] = p->pad[3] = v[1];
    } else {
      for (int i = 0; i < 4; i++)
        p->pad[i] = v[i];
    }
    return NNT_OK;
  }
  return NNT_ERR_NOKEY;
}

/* "same": the output is ceil(in / stride); the extra goes bottom/right.
 * With span (the dilated window) at most UINT32_MAX the total padding is
 * below span, so both halves fit. */
static void same_pad(uint64_t in, uint64_t s, uint64_t span, unsigned *lo, unsigned *hi) {
  uint64_t out = (in + s - 1) / s, reach = (out - 1) * s + span;
  uint64_t total = reach > in ? reach - in : 0;
  *lo = (unsigned)(total / 2);
  *hi = (unsigned)(total - total / 2);
}

/* One axis: the dilated window, checked. */
static int span_of(const char *kernel_key, const char *axis, unsigned k, unsigned d,
                   uint64_t *span, nnt_err *e) {
  *span = (uint64_t)(k - 1) * d + 1;
  if (*span > UINT32_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s, dilation: the window %s %u dilated by %u spans %llu, more "
                       "than %u",
                       kernel_key, axis, k, d, (unsigned long long)*span, UINT32_MAX);
  return NNT_OK;
}

/* Geometry in 64 bits: padding and dilation come from the user, so the
 * padded input and the output are checked to fit the 32-bit axes. */
int nnt_window_geom(const nnt_window_props *p, nnt_dim in, const char *kernel_key,
                    nnt_conv_geom *g, nnt_err *e) {
  g->c = in.c, g->h = in.h, g->w = in.w;
  g->kh = p->k[0], g->kw = p->k[1];
  g->sh = p->s[0], g->sw = p->s[1];
  g->dh = p->d[0], g->dw = p->d[1];
  uint64_t span_h, span_w;
  int rc = span_of(kernel_key, "height", g->kh, g->dh, &span_h, e);
  if (!rc)
    rc = span_of(kernel_key, "width", g->kw, g->dw, &span_w, e);
  if (rc)
    return rc;
  if (p->pad_mode == 2) {
    same_pad(in.h, g->sh, span_h, &g->pt, &g->pb);
    same_pad(in.w, g->sw, span_w, &g->pl, &g->pr);
  } else if (p->pad_mode == 1) {
    g->pt = g->pb = g->pl = g->pr = 0;
  } else {
    g->pt = p->pad[0], g->pb = p->pad[1], g->pl = p->pad[2], g->pr = p->pad[3];
  }
  uint64_t ph = (uint64_t)in.h + g->pt + g->pb, pw = (uint64_t)in.w + g->pl + g->pr;
  if (span_h > ph || span_w > pw) {
    char a[64];
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s: %ux%u (dilated %llux%llu) does not fit the padded input "
                       "%llux%llu (input %s)",
                       kernel_key, g->kh, g->kw, (unsigned long long)span_h,
                       (unsigned long long)span_w, (unsigned long long)ph,
                       (unsigned long long)pw, nnt_dim_str(in, a, sizeof a));
  }
  uint64_t oh = (ph - span_h) / g->sh + 1, ow = (pw - span_w) / g->sw + 1;
  /* the kernels index the padded input with long (32 bits on some targets) */
  if (oh > UINT32_MAX || ow > UINT32_MAX || ph > LONG_MAX || pw > LONG_MAX)
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "padding: the output would be %llu x %llu over a padded input of "
                       "%llu x %llu; an output axis may hold at most %u, a padded one %ld",
                       (unsigned long long)oh, (unsigned long long)ow, (unsigned long long)ph,
                       (unsigned long long)pw, UINT32_MAX, LONG_MAX);
  g->oh = (unsigned)oh;
  g->ow = (unsigned)ow;
  return NNT_OK;
}
