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
