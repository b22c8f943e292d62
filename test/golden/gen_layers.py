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
