#!/usr/bin/python3
"""Golden data from PyTorch for nntrainer's tests.

Run from the repository root with Debian's python3-torch:
    /usr/bin/python3 test/golden/gen_golden.py
It rewrites test/golden/data/*.bin. Every file is raw little-endian float32,
the arrays concatenated in the order given below; the C tests
(test/unit/test_golden.c) know the shapes.

Layer cases (objective J = sum(out * R), so dX = dJ/dX with dout = R):
  fc_<name>.bin:  x, W [in, out] (row-major), b, R, out, dx, dW, db
  act_<name>.bin: x, R, out, dx
  loss_<name>.bin: x, label, loss (1 value), dx
Training cases (MLP 8 -> 16 relu -> 12 sigmoid -> 4, batch 4, 5 steps):
  train_<opt>_<loss>.bin: initial weights (NNTrainer order: per layer W [in,
  out] then b), then 5 batches of (x [4, 8], label [4, 4]), then per step:
  loss (1 value) and all weights after the step.
NNTrainer's conventions are reproduced by hand where PyTorch differs: the
softmax cross-entropy has 1e-20 inside the log and is a batch mean; Adam adds
epsilon (1e-7) to the uncorrected sqrt(v) with a bias-corrected step size.
"""
import os
import torch

torch.manual_seed(1234)
torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(OUT, exist_ok=True)


def save(name, *arrays):
    with open(os.path.join(OUT, name + ".bin"), "wb") as f:
        for a in arrays:
            f.write(torch.as_tensor(a, dtype=torch.float32).contiguous().numpy().tobytes())


def fc_case(name, shape, out_features):
    x = torch.randn(*shape, requires_grad=True)
    w = (torch.rand(shape[-1], out_features) - 0.5).requires_grad_()
    b = (torch.rand(out_features) - 0.5).requires_grad_()
    y = x @ w + b
    r = torch.rand_like(y) * 2 - 1
    (y * r).sum().backward()
    save("fc_" + name, x.detach(), w.detach(), b.detach(), r, y.detach(), x.grad, w.grad, b.grad)


ACTS = {
    "relu": torch.relu,
    "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.01),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "swish": lambda x: x * torch.sigmoid(x),
    "gelu": torch.nn.functional.gelu,
    "elu": torch.nn.functional.elu,
    "selu": torch.selu,
    "softplus": torch.nn.functional.softplus,
    "mish": lambda x: x * torch.tanh(torch.nn.functional.softplus(x)),
    "none": lambda x: x,
}


def act_case(name):
    x = (torch.randn(3, 10) * 2).requires_grad_()
    y = ACTS[name](x)
    r = torch.rand_like(y) * 2 - 1
    (y * r).sum().backward()
    save("act_" + name, x.detach(), r, y.detach(), x.grad)


def xent_softmax(x, label):
    p = torch.softmax(x, dim=-1)
    return -(label * torch.log(p + 1e-20)).sum() / x.shape[0]


def xent_sigmoid(x, label):
    return torch.nn.functional.binary_cross_entropy_with_logits(x, label)


def mse(x, label):
    return ((x - label) ** 2).mean()


LOSSES = {"cross_softmax": xent_softmax, "cross_sigmoid": xent_sigmoid, "mse": mse}


def loss_case(name):
    x = torch.randn(4, 5, requires_grad=True)
    label = torch.nn.functional.one_hot(torch.randint(0, 5, (4,)), 5).float()
    if name == "mse":
        label = torch.rand(4, 5)
    loss = LOSSES[name](x, label)
    loss.backward()
    save("loss_" + name, x.detach(), label, loss.detach().reshape(1), x.grad)


def train_case(opt, loss_name, lr):
    sizes = [(8, 16), (16, 12), (12, 4)]
    params = []
    for i, o in sizes:
        params.append((torch.rand(i, o) - 0.5) * 0.8)
        params.append((torch.rand(o) - 0.5) * 0.2)
    params = [p.requires_grad_() for p in params]
    init = [p.detach().clone() for p in params]
    batches = []
    for _ in range(5):
        x = torch.randn(4, 8)
        lab = torch.nn.functional.one_hot(torch.randint(0, 4, (4,)), 4).float()
        batches.append((x, lab))
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    steps = []
    for t, (x, lab) in enumerate(batches, start=1):
        h = torch.relu(x @ params[0] + params[1])
        h = torch.sigmoid(h @ params[2] + params[3])
        z = h @ params[4] + params[5]
        if loss_name == "cross":
            loss = xent_softmax(z, lab)
        else:
            loss = mse(torch.sigmoid(z), lab)
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for i, p in enumerate(params):
                g = p.grad
                if opt == "sgd":
                    p -= lr * g
                else:
                    b1, b2, eps = 0.9, 0.999, 1e-7
                    m[i] = b1 * m[i] + (1 - b1) * g
                    v[i] = b2 * v[i] + (1 - b2) * g * g
                    lr_t = lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
                    p -= lr_t * m[i] / (v[i].sqrt() + eps)
        steps.append(loss.detach().reshape(1))
        steps.extend(p.detach().clone() for p in params)
    flat = init + [a for xb in batches for a in xb] + steps
    save("train_%s_%s" % (opt, loss_name), *flat)


fc_case("2d", (3, 7), 5)
fc_case("4d", (2, 2, 3, 4), 5)
for a in ACTS:
    act_case(a)
for l in LOSSES:
    loss_case(l)
train_case("sgd", "cross", 0.1)
train_case("adam", "cross", 0.01)
train_case("sgd", "mse", 0.5)
print("golden data written to", OUT)
