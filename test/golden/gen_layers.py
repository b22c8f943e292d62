#!/usr/bin/python3
"""Golden data from PyTorch for the single-layer cases of test_layers_golden.c.

Rerun from the repository root with Debian's python3-torch (1.13):
    /usr/bin/python3 test/golden/gen_layers.py
It rewrites test/golden/layers/*.bin and is deterministic (fixed seed, one
thread): rerunning it without changes gives the same bytes. Commit what it
writes; the C test never needs torch.

The cases complement gen_golden.py (which covers 2-D fully connected layers,
activations on moderate values and one-hot losses): 4-D inputs with odd
sizes, fully connected without bias and with one unit, activations on values
where naive formulas overflow (|x| up to 90), soft labels, and the outputs
of the loss layers.

Every file is raw little-endian float32, the arrays concatenated in the
order below. Inputs are float32; the reference is computed in float64 from
them and rounded once. The objective for non-loss layers is
J = sum(out * R), so dX = dJ/dX is the backward with d_out = R.

  fc_<case>.bin   x, W [in, unit] (row-major, NNTrainer's layout), b (absent
                  with disable_bias), R, out, dx, dW, db (absent)
  act_<name>.bin  x [2:2:3:7], R, out, dx      (softmax over the last axis)
  loss_<name>.bin x, label, out (the layer output: softmax or sigmoid
                  probabilities, or x for mse), loss (1 value), dx

  attn_<case>.bin, mha_<case>.bin, lora_<case>.bin (test_attention_golden.c):
                  the inputs, the weights in NNTrainer's order and layout, R,
                  out, the inputs' derivatives, the trainable weights'
                  gradients (a LoRA layer's loraA and loraB only)

NNTrainer's definitions, reproduced here:
  cross_softmax: loss = -sum(label * log(softmax(x) + 1e-20)) / batch, over
    the last axis, summed over every other axis; dx = (softmax - label) /
    batch, which is the gradient when each label row sums to one (checked
    against autograd below).
  cross_sigmoid: the mean over all elements of the sigmoid cross entropy on
    logits (binary_cross_entropy_with_logits); dx = (sigmoid - label) / N.
  mse: the mean over all elements of (x - label)^2; dx = 2 (x - label) / N.
  leaky_relu has slope 0.01, elu alpha 1, gelu is the exact erf form.
"""
import math
import os

import torch
import torch.nn.functional as F

torch.manual_seed(20240)
torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers")
os.makedirs(OUT, exist_ok=True)


def save(name, *arrays):
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        for a in arrays:
            t = torch.as_tensor(a).detach().to(torch.float32).contiguous()
            f.write(t.numpy().astype("<f4").tobytes())


def f32(*shape, scale=1.0):
    """Random float32 values, returned as float64 holding exactly them."""
    return (torch.randn(*shape) * scale).to(torch.float32).double()


def fc_case(name, shape, unit, bias=True):
    x = f32(*shape).requires_grad_()
    w = (torch.rand(shape[-1], unit) - 0.5).to(torch.float32).double().requires_grad_()
    b = (torch.rand(unit) - 0.5).to(torch.float32).double().requires_grad_()
    y = x @ w + (b if bias else 0)
    r = (torch.rand(y.shape) * 2 - 1).to(torch.float32).double()
    (y * r).sum().backward()
    if bias:
        save("fc_" + name, x, w, b, r, y, x.grad, w.grad, b.grad)
    else:
        save("fc_" + name, x, w, r, y, x.grad, w.grad)


ACTS = {
    "relu": F.relu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.01),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "swish": F.silu,
    "gelu": F.gelu,
    "elu": lambda x: F.elu(x, 1.0),
    "selu": F.selu,
    "softplus": F.softplus,
    "mish": F.mish,
    "none": lambda x: x,
}

# values where exp overflows float32 (|x| > 88) or a naive formula loses
# everything, placed at the start of the tensor
EDGES = [0.0, 1e-3, -1e-3, 15.0, -15.0, 30.0, -30.0, 90.0, -90.0, 0.5, -0.5]


def act_case(name):
    x = f32(2, 2, 3, 7, scale=4.0)
    x.view(-1)[: len(EDGES)] = torch.tensor(EDGES, dtype=torch.float64)
    x.requires_grad_()
    y = ACTS[name](x)
    r = (torch.rand(y.shape) * 2 - 1).to(torch.float32).double()
    (y * r).sum().backward()
    save("act_" + name, x, r, y, x.grad)


def loss_case(name, shape, scale):
    x = f32(*shape, scale=scale).requires_grad_()
    n, batch = x.numel(), shape[0]
    if name == "cross_softmax":
        # soft labels: each row over the last axis sums to one
        label = torch.rand(*shape).to(torch.float32).double()
        label = (label / label.sum(dim=-1, keepdim=True)).to(torch.float32).double()
        out = torch.softmax(x, dim=-1)
        loss = -(label * torch.log(out + 1e-20)).sum() / batch
        dx = (out - label) / batch
        loss.backward()
        # float32 labels sum to one only to ~1e-7, hence the tolerance
        assert torch.allclose(x.grad, dx, rtol=0, atol=1e-7), "softmax dx"
    elif name == "cross_sigmoid":
        label = torch.rand(*shape).to(torch.float32).double()
        out = torch.sigmoid(x)
        loss = F.binary_cross_entropy_with_logits(x, label)
        loss.backward()
        dx = x.grad
        assert torch.allclose(dx, (out - label) / n, rtol=0, atol=1e-15), "sigmoid dx"
    else:
        label = f32(*shape)
        out = x
        loss = ((x - label) ** 2).mean()
        loss.backward()
        dx = x.grad
    save("loss_" + name, x, label, out, loss.reshape(1), dx)


fc_case("4d_nobias", (2, 3, 2, 5), 4, bias=False)
fc_case("unit1", (3, 1, 1, 6), 1)
fc_case("wide", (2, 1, 1, 33), 17)
for a in ACTS:
    act_case(a)
loss_case("cross_softmax", (3, 1, 2, 5), 3.0)
loss_case("cross_sigmoid", (2, 1, 3, 4), 10.0)
loss_case("mse", (2, 2, 2, 3), 1.0)


# lstm and lstmcell against torch.nn.LSTM / LSTMCell in float64. NNTrainer
# keeps weight_ih [feature, 4 unit] and weight_hh [unit, 4 unit], the gate
# columns in PyTorch's order i, f, g, o: PyTorch's weights transposed. Its
# bias_ih, bias_hh are PyTorch's; integrate_bias's bias_h is their sum (here
# PyTorch's bias_hh is 0). Without return_sequences the output is position
# T - 1 of the sequence, both directions (what NNTrainer returns, and
# PyTorch's out[:, -1]). Files, little-endian float32:
#   lstm_<case>.bin      x [b, T, feat], the weights in NNTrainer's order
#                        (direction 0, then reverse_*), R, out, dx, then
#                        every weight's gradient in the same order
#   lstmcell_<case>.bin  x, h, c, the weights, R_h, R_c, h', c', dx, dh, dc,
#                        the weights' gradients
def lstm_weights(mod, suffix, bias):
    """NNTrainer's weights of one direction as (tensor, torch leaf) pairs."""
    out = [
        ("weight_ih", getattr(mod, "weight_ih" + suffix), True),
        ("weight_hh", getattr(mod, "weight_hh" + suffix), True),
    ]
    if bias == "integrate":
        out.append(("bias_h", getattr(mod, "bias_ih" + suffix), False))
    elif bias == "separate":
        out.append(("bias_ih", getattr(mod, "bias_ih" + suffix), False))
        out.append(("bias_hh", getattr(mod, "bias_hh" + suffix), False))
    return out


def lstm_init(mod, bias):
    with torch.no_grad():
        for name, p in mod.named_parameters():
            p.copy_(((torch.rand(p.shape) - 0.5) * 1.2).to(torch.float32).double())
            if bias == "integrate" and name.startswith("bias_hh"):
                p.zero_()


def lstm_case(name, b, T, feat, unit, seq, bidir, bias):
    mod = torch.nn.LSTM(feat, unit, batch_first=True, bidirectional=bidir,
                        bias=bias != "none").double()
    lstm_init(mod, bias)
    x = f32(b, T, feat).requires_grad_()
    y, _ = mod(x)
    if not seq:
        y = y[:, -1:, :]
    r = (torch.rand(y.shape) * 2 - 1).to(torch.float32).double()
    (y * r).sum().backward()
    ws = []
    for suffix in ([""] + (["_reverse"] if bidir else [])):
        ws += lstm_weights(mod, "_l0" + suffix, bias)
    vals = [p.t() if mat else p for _, p, mat in ws]
    grads = [p.grad.t() if mat else p.grad for _, p, mat in ws]
    if bias == "separate":
        # both biases enter alike: their gradients are equal
        assert torch.allclose(grads[2], grads[3], rtol=0, atol=1e-12)
    save("lstm_" + name, x, *vals, r, y, x.grad, *grads)


def lstmcell_case(name, b, feat, unit, bias):
    mod = torch.nn.LSTMCell(feat, unit, bias=bias != "none").double()
    lstm_init(mod, bias)
    x = f32(b, feat).requires_grad_()
    h = f32(b, unit).requires_grad_()
    c = f32(b, unit).requires_grad_()
    h2, c2 = mod(x, (h, c))
    rh = (torch.rand(h2.shape) * 2 - 1).to(torch.float32).double()
    rc = (torch.rand(c2.shape) * 2 - 1).to(torch.float32).double()
    ((h2 * rh).sum() + (c2 * rc).sum()).backward()
    ws = lstm_weights(mod, "", bias)
    vals = [p.t() if mat else p for _, p, mat in ws]
    grads = [p.grad.t() if mat else p.grad for _, p, mat in ws]
    save("lstmcell_" + name, x, h, c, *vals, rh, rc, h2, c2, x.grad, h.grad, c.grad, *grads)


lstm_case("seq", 2, 5, 3, 4, True, False, "separate")
lstm_case("last_int", 3, 4, 2, 3, False, False, "integrate")
lstm_case("bidir_seq", 2, 4, 3, 2, True, True, "separate")
lstm_case("bidir_last_nobias", 2, 3, 2, 3, False, True, "none")
lstmcell_case("sep", 3, 4, 3, "separate")
lstmcell_case("int", 2, 3, 2, "integrate")
# --- attention, multi_head_attention and LoRA (test_attention_golden.c) ---
def causal(s):
    """NNTrainer's causal mask: score (i, j) is -1e10 for j > i."""
    tq, tk = s.shape[-2], s.shape[-1]
    hide = torch.ones(tq, tk, dtype=torch.bool).triu(1)
    return s.masked_fill(hide, -1e10)


def finish(name, inputs, weights, trainable, y):
    r = (torch.rand(y.shape) * 2 - 1).to(torch.float32).double()
    (y * r).sum().backward()
    save(name, *inputs, *weights, r, y, *[t.grad for t in inputs],
         *[w.grad for w, t in zip(weights, trainable) if t])


def attn_case(name, q_shape, v_shape, with_key, scaled, is_causal):
    q = f32(*q_shape).requires_grad_()
    v = f32(*v_shape).requires_grad_()
    k = f32(*v_shape).requires_grad_() if with_key else v
    s = q @ k.transpose(-1, -2)
    if scaled:
        s = s / math.sqrt(k.shape[-1])
    if is_causal:
        s = causal(s)
    y = torch.softmax(s, dim=-1) @ v
    finish(name, [q, v] + ([k] if with_key else []), [], [], y)


def weight(rows, cols):
    return (torch.rand(rows, cols) - 0.5).to(torch.float32).double().requires_grad_()


def mha_case(name, qs, ks, vs, heads, dk=None, dv=None, out=None, bias=True,
             is_causal=False, mask=False):
    q, k, v = (f32(*t).requires_grad_() for t in (qs, ks, vs))
    b, tq, tk = qs[0], qs[2], ks[2]
    dk = dk or qs[3] // heads
    dv = dv or dk
    out = out or qs[3]
    ws = []
    for width, n in ((qs[3], heads * dk), (ks[3], heads * dk), (vs[3], heads * dv),
                     (heads * dv, out)):
        ws.append(weight(width, n))
        if bias:
            ws.append(weight(1, n))
    def proj(x, i, d):
        w = ws[2 * i if bias else i]
        y = x.reshape(-1, x.shape[-1]) @ w
        if bias:
            y = y + ws[2 * i + 1]
        return y.reshape(b, -1, heads, d).transpose(1, 2)  # [b, heads, t, d]
    pq, pk, pv = proj(q, 0, dk), proj(k, 1, dk), proj(v, 2, dv)
    scale = 1 / math.sqrt(dk)
    s = (pq @ pk.transpose(-1, -2)) * scale
    inputs = [q, k, v]
    if mask:
        m = f32(b, heads, tq, tk).requires_grad_()
        s = s + m
        inputs.append(m)
    if is_causal:
        s = causal(s)
    o = (torch.softmax(s, dim=-1) @ pv).transpose(1, 2).reshape(b * tq, heads * dv)
    y = o @ ws[6 if bias else 3]
    if bias:
        y = y + ws[7]
    y = y.reshape(b, 1, tq, out)
    # the same with torch.nn.MultiheadAttention where it can be (one
    # width, no mask): NNTrainer's layout is its in_proj transposed
    if bias and not mask and dk * heads == qs[3] == ks[3] == vs[3] == out and dv == dk:
        ref = torch.nn.MultiheadAttention(out, heads, bias=True, batch_first=True).double()
        with torch.no_grad():
            ref.in_proj_weight.copy_(torch.cat([ws[0].T, ws[2].T, ws[4].T]))
            ref.in_proj_bias.copy_(torch.cat([ws[1][0], ws[3][0], ws[5][0]]))
            ref.out_proj.weight.copy_(ws[6].T)
            ref.out_proj.bias.copy_(ws[7][0])
        am = torch.ones(tq, tk, dtype=torch.bool).triu(1) if is_causal else None
        got = ref(q[:, 0], k[:, 0], v[:, 0], attn_mask=am, need_weights=False)[0]
        assert torch.allclose(got, y[:, 0], rtol=0, atol=1e-12), "mha against torch"
    finish(name, inputs, ws, [True] * len(ws), y)


def lora_case(name, shape, unit, rank, alpha=None, bias=True):
    x = f32(*shape).requires_grad_()
    w, bb = weight(shape[-1], unit), weight(1, unit)
    a, bl = weight(shape[-1], rank), weight(rank, unit)
    s = alpha / rank if alpha else 1.0
    y = x @ w + (bb[0] if bias else 0) + s * ((x @ a) @ bl)
    ws = [w, bb, a, bl] if bias else [w, a, bl]
    finish(name, [x], ws, [False] * (len(ws) - 2) + [True, True], y)


attn_case("attn_plain", (2, 1, 3, 4), (2, 1, 5, 4), False, False, False)
attn_case("attn_scaled_causal_key", (2, 2, 4, 3), (2, 2, 4, 3), True, True, True)
mha_case("mha_h1", (2, 1, 3, 4), (2, 1, 5, 6), (2, 1, 5, 2), 1)
mha_case("mha_h2_causal", (2, 1, 4, 6), (2, 1, 4, 6), (2, 1, 4, 6), 2, is_causal=True)
mha_case("mha_h2", (2, 1, 3, 4), (2, 1, 5, 4), (2, 1, 5, 4), 2)
mha_case("mha_h2_mask_proj", (2, 1, 3, 4), (2, 1, 4, 3), (2, 1, 4, 2), 2, dk=3, dv=2, out=5,
         bias=False, mask=True)
lora_case("lora_alpha", (3, 1, 2, 5), 4, 2, alpha=6)
lora_case("lora_nobias", (2, 1, 1, 7), 3, 3, bias=False)
# ---- rnn, gru and their cells (test_recurrent_golden.c) ----
# Their own generator, so the cases above and any appended later keep their
# numbers. NNTrainer's layout: weight_ih [F, G*U] and weight_hh [U, G*U]
# (PyTorch's transposed), gates in the order z, r, g (PyTorch's r, z, n);
# biases [G*U] in that order. Each file (rec_<case>.bin) holds
#   x [B, T, F] (a cell: [B, F]), h0 [B, U] (cells only), the weights in
#   NNTrainer's order (weight_ih, weight_hh, then bias_h, or bias_ih and
#   bias_hh), R, out, dx, dh0 (cells only), the weights' gradients,
# for J = sum(out * R).
REC = torch.Generator().manual_seed(1515)


def rec_f32(*shape, scale=1.0):
    return (torch.randn(*shape, generator=REC) * scale).to(torch.float32).double()


def zrg(m):
    """PyTorch's gate rows (r, z, n) reordered to NNTrainer's (z, r, g)."""
    r, z, n = m.chunk(3, dim=0)
    return torch.cat([z, r, n], dim=0)


def gru_step(x, h, w_ih, w_hh, b_ih, b_hh, reset_after):
    """One GRU step in NNTrainer's layout and either reset placement; b_ih
    and b_hh are None-able (bias_h is b_ih with b_hh None)."""
    u = h.shape[1]
    gx = x @ w_ih + (b_ih if b_ih is not None else 0)
    bh = b_hh if b_hh is not None else torch.zeros(3 * u, dtype=torch.float64)
    zr = torch.sigmoid(gx[:, : 2 * u] + h @ w_hh[:, : 2 * u] + bh[: 2 * u])
    z, r = zr[:, :u], zr[:, u:]
    if reset_after:
        g = torch.tanh(gx[:, 2 * u :] + r * (h @ w_hh[:, 2 * u :] + bh[2 * u :]))
    else:
        g = torch.tanh(gx[:, 2 * u :] + (r * h) @ w_hh[:, 2 * u :] + bh[2 * u :])
    return z * h + (1 - z) * g


def rec_save(name, inputs, weights, out):
    r = (torch.rand(out.shape, generator=REC) * 2 - 1).to(torch.float32).double()
    (out * r).sum().backward()
    save("rec_" + name, *inputs, *weights, r, out, *[t.grad for t in inputs],
         *[t.grad for t in weights])


def rec_weights(f, u, gates, integrate):
    """Weights in NNTrainer's layout (float32 values), leaves of autograd."""
    ws = [(torch.rand(f, gates * u, generator=REC) - 0.5).to(torch.float32).double(),
          (torch.rand(u, gates * u, generator=REC) - 0.5).to(torch.float32).double()]
    for _ in range(1 if integrate else 2):
        ws.append((torch.rand(gates * u, generator=REC) - 0.5).to(torch.float32).double())
    return [w.requires_grad_() for w in ws]


def gru_seq_case(name, b, t, f, u, reset_after, integrate, return_sequences):
    x = rec_f32(b, t, f).requires_grad_()
    ws = rec_weights(f, u, 3, integrate)
    b_ih, b_hh = (ws[2], None) if integrate else (ws[2], ws[3])
    h = torch.zeros(b, u, dtype=torch.float64)
    hs = []
    for s in range(t):
        h = gru_step(x[:, s], h, ws[0], ws[1], b_ih, b_hh, reset_after)
        hs.append(h)
    out = torch.stack(hs, dim=1) if return_sequences else h.unsqueeze(1)
    if reset_after:  # the same through torch.nn.GRU, NNTrainer's weights mapped to it
        ref = torch.nn.GRU(f, u, batch_first=True).double()
        with torch.no_grad():
            ref.weight_ih_l0.copy_(zrg(ws[0].t()))
            ref.weight_hh_l0.copy_(zrg(ws[1].t()))
            ref.bias_ih_l0.copy_(zrg(b_ih))
            ref.bias_hh_l0.copy_(zrg(b_hh) if b_hh is not None else torch.zeros(3 * u))
        seq, _ = ref(x.detach())
        want = seq if return_sequences else seq[:, -1:]
        assert torch.allclose(out.detach(), want, rtol=0, atol=1e-12), name
    rec_save(name, [x], ws, out)


def rnn_seq_case(name, b, t, f, u, nonlinearity, integrate, return_sequences):
    x = rec_f32(b, t, f).requires_grad_()
    ws = rec_weights(f, u, 1, integrate)
    ref = torch.nn.RNN(f, u, nonlinearity=nonlinearity, batch_first=True).double()
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ws[0].t())
        ref.weight_hh_l0.copy_(ws[1].t())
        ref.bias_ih_l0.copy_(ws[2])
        ref.bias_hh_l0.copy_(torch.zeros(u) if integrate else ws[3])
    # autograd through the module, its parameters tied to NNTrainer's leaves
    del ref.weight_ih_l0, ref.weight_hh_l0, ref.bias_ih_l0, ref.bias_hh_l0
    ref.weight_ih_l0, ref.weight_hh_l0 = ws[0].t(), ws[1].t()
    ref.bias_ih_l0 = ws[2]
    ref.bias_hh_l0 = torch.zeros(u, dtype=torch.float64) if integrate else ws[3]
    seq, _ = ref(x)
    out = seq if return_sequences else seq[:, -1:]
    rec_save(name, [x], ws, out)


def gru_cell_case(name, b, f, u, reset_after, integrate):
    x = rec_f32(b, f).requires_grad_()
    h0 = rec_f32(b, u).requires_grad_()
    ws = rec_weights(f, u, 3, integrate)
    b_ih, b_hh = (ws[2], None) if integrate else (ws[2], ws[3])
    out = gru_step(x, h0, ws[0], ws[1], b_ih, b_hh, reset_after)
    if reset_after:
        ref = torch.nn.GRUCell(f, u).double()
        with torch.no_grad():
            ref.weight_ih.copy_(zrg(ws[0].t()))
            ref.weight_hh.copy_(zrg(ws[1].t()))
            ref.bias_ih.copy_(zrg(b_ih))
            ref.bias_hh.copy_(zrg(b_hh) if b_hh is not None else torch.zeros(3 * u))
        assert torch.allclose(out.detach(), ref(x.detach(), h0.detach()), rtol=0,
                              atol=1e-12), name
    rec_save(name, [x, h0], ws, out)


def rnn_cell_case(name, b, f, u, integrate):
    x = rec_f32(b, f).requires_grad_()
    h0 = rec_f32(b, u).requires_grad_()
    ws = rec_weights(f, u, 1, integrate)
    out = torch.tanh(x @ ws[0] + h0 @ ws[1] + ws[2] + (0 if integrate else ws[3]))
    ref = torch.nn.RNNCell(f, u).double()
    with torch.no_grad():
        ref.weight_ih.copy_(ws[0].t())
        ref.weight_hh.copy_(ws[1].t())
        ref.bias_ih.copy_(ws[2])
        ref.bias_hh.copy_(torch.zeros(u) if integrate else ws[3])
    assert torch.allclose(out.detach(), ref(x.detach(), h0.detach()), rtol=0,
                          atol=1e-12), name
    rec_save(name, [x, h0], ws, out)


gru_seq_case("gru_seq", 2, 4, 3, 5, True, False, True)
gru_seq_case("gru_last_integrate", 3, 5, 2, 4, True, True, False)
gru_seq_case("gru_reset_before", 2, 4, 3, 5, False, False, True)
gru_seq_case("gru_reset_before_integrate", 2, 3, 4, 3, False, True, False)
rnn_seq_case("rnn_seq", 2, 4, 3, 5, "tanh", False, True)
rnn_seq_case("rnn_last_relu_integrate", 3, 5, 2, 4, "relu", True, False)
gru_cell_case("grucell", 3, 4, 5, True, False)
gru_cell_case("grucell_reset_before_integrate", 2, 3, 4, False, True)
rnn_cell_case("rnncell", 3, 4, 5, False)
rnn_cell_case("rnncell_integrate", 2, 3, 4, True)
# ---- sequence layers (test_seq_golden.c) ----------------------------------
# Their own generator, so the cases above keep their values whatever is
# appended here.
SEQ = torch.Generator().manual_seed(15015)


def s32(*shape, scale=1.0):
    return (torch.randn(*shape, generator=SEQ) * scale).to(torch.float32).double()


def sr(shape):
    return (torch.rand(*shape, generator=SEQ) * 2 - 1).to(torch.float32).double()


def emb_case(name, batch, t, in_dim, out_dim, mask=None):
    """emb_<case>.bin: x [batch:1:1:t] (indices, some with a fraction:
    NNTrainer truncates), W [in_dim, out_dim], R, out [batch:1:t:out_dim],
    dW. zero_idx_mask = mask: that index gives zeros and no gradient."""
    idx = torch.randint(0, in_dim, (batch, 1, 1, t), generator=SEQ)
    frac = (torch.randint(0, 4, idx.shape, generator=SEQ) * 0.25).double()
    x = idx.double() + frac
    w = s32(in_dim, out_dim).requires_grad_()
    y = F.embedding(idx.view(batch, 1, t), w)  # batch:1:t:out_dim
    if mask is not None:
        y = y * (idx.view(batch, 1, t, 1) != mask)
    r = sr(y.shape)
    (y * r).sum().backward()
    save("emb_" + name, x, w, r, y, w.grad)


emb_case("plain", 2, 6, 7, 4)
emb_case("mask", 3, 5, 4, 3, mask=2)


def ln_case(name, shape, naxes, eps):
    """ln_<case>.bin: x, gamma, beta (the shape of the last naxes axes), R,
    out, dx, dgamma, dbeta: torch.nn.functional.layer_norm over the last
    naxes axes (biased variance), J = sum(out * R)."""
    x = s32(*shape, scale=2.0).requires_grad_()
    ns = shape[len(shape) - naxes:]
    g = (torch.rand(*ns, generator=SEQ) + 0.5).to(torch.float32).double().requires_grad_()
    b = sr(ns).requires_grad_()
    y = F.layer_norm(x, ns, g, b, eps)
    r = sr(y.shape)
    (y * r).sum().backward()
    save("ln_" + name, x, g, b, r, y, x.grad, g.grad, b.grad)


def pe_case(name, shape, max_t):
    """pe_<case>.bin: x [b:c:h:w], out = x + the table's first h rows, dx
    (= R). NNTrainer's table in float32: a = i / 10000^(2 floor(j/2) / w),
    sin(a) for even j, cos(a) for odd j."""
    x = s32(*shape)
    h, w = shape[2], shape[3]
    i = torch.arange(h, dtype=torch.float32).view(h, 1)
    jj = (torch.arange(w) // 2 * 2).to(torch.float32).view(1, w)
    a = i / torch.pow(torch.tensor(10000.0, dtype=torch.float32), jj / w)
    pe = torch.where(torch.arange(w).view(1, w) % 2 == 1, torch.cos(a), torch.sin(a))
    y = x + pe.double()
    r = sr(y.shape)
    save("pe_" + name, x, r, y, r)


ln_case("w", (2, 1, 3, 5), 1, 1e-3)
ln_case("chw", (2, 2, 3, 4), 3, 1e-2)
pe_case("plain", (2, 1, 6, 8), 10)


def ew_case(op, shape):
    """ew_<op>.bin: a, b (b at least 0.5 from 0), R, out, da, db for
    out = a op b, J = sum(out * R)."""
    a = s32(*shape).requires_grad_()
    b = s32(*shape)
    b = (b.sign() * (b.abs() + 0.5)).to(torch.float32).double().requires_grad_()
    y = {"add": a + b, "subtract": a - b, "multiply": a * b, "divide": a / b}[op]
    r = sr(y.shape)
    (y * r).sum().backward()
    save("ew_" + op, a, b, r, y, a.grad, b.grad)


for op in ("add", "subtract", "multiply", "divide"):
    ew_case(op, (2, 1, 3, 4))


def rm_case(name, shape, axis):
    """rm_<case>.bin: x, R, out (axis kept as 1; no axis: the mean of each
    sample), dx: torch.mean, J = sum(out * R)."""
    x = s32(*shape).requires_grad_()
    dims = (axis,) if axis else (1, 2, 3)
    y = x.mean(dim=dims, keepdim=True)
    r = sr(y.shape)
    (y * r).sum().backward()
    save("rm_" + name, x, r, y, x.grad)


rm_case("all", (2, 2, 3, 4), None)
rm_case("c", (2, 3, 2, 4), 1)
rm_case("h", (2, 2, 3, 4), 2)
rm_case("w", (2, 2, 3, 5), 3)
