/* Window properties and geometry for convolution and pooling layers. */
#include <stdio.h>
#include "nntrainer/layer.h"

void nnt_window_props_init(nnt_window_props *p) {
  p->k[0] = p->k[1] = 1;
  p->s[0] = p->s[1] = 1;
  p->d[0] = p->d[1] = 1;
  p->k_set = p->s_set = 0;
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
    rc = pair(key, value, p->s, one_d, 1, e);
    p->s_set = !rc;
    return rc;
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

/* "same": the output is ceil(in / stride); the extra goes bottom/right. */
static void same_pad(unsigned in, unsigned k, unsigned s, unsigned d, unsigned *lo,
                     unsigned *hi) {
  unsigned out = (in + s - 1) / s, span = (k - 1) * d + 1;
  long total = (long)(out - 1) * s + span - in;
  if (total < 0)
    total = 0;
  *lo = (unsigned)(total / 2);
  *hi = (unsigned)(total - total / 2);
}

int nnt_window_geom(const nnt_window_props *p, nnt_dim in, const char *kernel_key,
                    nnt_conv_geom *g, nnt_err *e) {
  g->c = in.c, g->h = in.h, g->w = in.w;
  g->kh = p->k[0], g->kw = p->k[1];
  g->sh = p->s[0], g->sw = p->s[1];
  g->dh = p->d[0], g->dw = p->d[1];
  if (p->pad_mode == 2) {
    same_pad(in.h, g->kh, g->sh, g->dh, &g->pt, &g->pb);
    same_pad(in.w, g->kw, g->sw, g->dw, &g->pl, &g->pr);
  } else if (p->pad_mode == 1) {
    g->pt = g->pb = g->pl = g->pr = 0;
  } else {
    g->pt = p->pad[0], g->pb = p->pad[1], g->pl = p->pad[2], g->pr = p->pad[3];
  }
  unsigned span_h = (g->kh - 1) * g->dh + 1, span_w = (g->kw - 1) * g->dw + 1;
  unsigned ph = in.h + g->pt + g->pb, pw = in.w + g->pl + g->pr;
  if (span_h > ph || span_w > pw) {
    char a[64];
    return nnt_err_set(e, NNT_ERR_INVAL,
                       "%s: %ux%u (dilated %ux%u) does not fit the padded input %ux%u "
                       "(input %s)",
                       kernel_key, g->kh, g->kw, span_h, span_w, ph, pw,
                       nnt_dim_str(in, a, sizeof a));
  }
  g->oh = (ph - span_h) / g->sh + 1;
  g->ow = (pw - span_w) / g->sw + 1;
  return NNT_OK;
}
