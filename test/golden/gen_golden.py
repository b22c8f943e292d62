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
  conv_<name>.bin: x, filter [out, in, kh, kw], bias, R, out, dx, dfilter, dbias
  pool_<name>.bin: x, R, out, dx
  bn_<name>.bin:   x, gamma, beta, R, out, dx, dgamma, dbeta (training mode)
Training cases (MLP 8 -> 16 relu -> 12 sigmoid -> 4, batch 4, 5 steps):
  train_<opt>_<loss>.bin: initial weights (NNTrainer order: per layer W [in,
  out] then b), then 5 batches of (x [4, 8], label [4, 4]), then per step:
  loss (1 value) and all weights after the step.
  move_<name>.bin: inputs, R per output, outputs, dX per input (addition,
  concat, split, multiout, identity, permute, upsample2d)
Residual case (resnet_<opt>.bin and resnet.ini): conv-BN-relu-conv-BN, added
to the first block's output, relu, global average pooling, fully connected,
softmax cross-entropy; input 2:6:6, batch 4, 4 steps; same layout as the
training cases, weights including batch-norm's moving statistics.
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


def conv_case(name, x_shape, filters, k, stride, padding, dilation):
    F = torch.nn.functional
    x = torch.randn(*x_shape, requires_grad=True)
    w = (torch.rand(filters, x_shape[1], *k) - 0.5).requires_grad_()
    b = (torch.rand(filters) - 0.5).requires_grad_()
    t, bo, l, r = padding
    xp = F.pad(x, (l, r, t, bo))
    y = F.conv2d(xp, w, b, stride=stride, dilation=dilation)
    rr = torch.rand_like(y) * 2 - 1
    (y * rr).sum().backward()
    save("conv_" + name, x.detach(), w.detach(), b.detach(), rr, y.detach(), x.grad, w.grad,
         b.grad)


def pool_case(name, x_shape, mode, k, stride, padding):
    F = torch.nn.functional
    x = torch.randn(*x_shape, requires_grad=True)
    t, bo, l, r = padding
    if mode == "max":
        y = F.max_pool2d(F.pad(x, (l, r, t, bo), value=-1e30), k, stride)
    elif mode == "average":
        y = F.avg_pool2d(F.pad(x, (l, r, t, bo)), k, stride)
    elif mode == "global_max":
        y = x.amax(dim=(2, 3), keepdim=True)
    else:
        y = x.mean(dim=(2, 3), keepdim=True)
    rr = torch.rand_like(y) * 2 - 1
    (y * rr).sum().backward()
    save("pool_" + name, x.detach(), rr, y.detach(), x.grad)


def bn_train(x, gamma, beta, eps=1e-3):
    mean = x.mean(dim=(0, 2, 3), keepdim=True)
    var = x.var(dim=(0, 2, 3), unbiased=False, keepdim=True)
    xhat = (x - mean) / torch.sqrt(var + eps)
    return gamma.view(1, -1, 1, 1) * xhat + beta.view(1, -1, 1, 1), mean.flatten(), var.flatten()


def bn_case(name, x_shape):
    x = torch.randn(*x_shape, requires_grad=True)
    g = (torch.rand(x_shape[1]) + 0.5).requires_grad_()
    b = (torch.rand(x_shape[1]) - 0.5).requires_grad_()
    y, _, _ = bn_train(x, g, b)
    rr = torch.rand_like(y) * 2 - 1
    (y * rr).sum().backward()
    save("bn_" + name, x.detach(), g.detach(), b.detach(), rr, y.detach(), x.grad, g.grad, b.grad)


RESNET_INI = """[Model]
type = NeuralNetwork
batch_size = 4
epochs = 1
loss = cross
[Optimizer]
type = %s
learning_rate = %s
[in]
type = input
input_shape = 2:6:6
[c1]
type = conv2d
filters = 3
kernel_size = 3,3
padding = 1,1
disable_bias = true
[b1]
type = batch_normalization
activation = relu
[c2]
type = conv2d
filters = 3
kernel_size = 3,3
padding = 1,1
disable_bias = true
[b2]
type = batch_normalization
[add]
type = addition
input_layers = b2, b1
activation = relu
[pool]
type = pooling2d
pooling = global_average
flatten = true
[fc]
type = fully_connected
unit = 3
activation = softmax
"""


def resnet_case(opt, lr):
    F = torch.nn.functional
    with open(os.path.join(OUT, "resnet_%s.ini" % opt), "w") as f:
        f.write(RESNET_INI % (opt, lr))
    P = {}
    P["c1w"] = (torch.rand(3, 2, 3, 3) - 0.5) * 0.8
    P["b1mm"], P["b1mv"] = torch.zeros(3), torch.ones(3)
    P["b1g"], P["b1b"] = torch.rand(3) + 0.5, (torch.rand(3) - 0.5) * 0.2
    P["c2w"] = (torch.rand(3, 3, 3, 3) - 0.5) * 0.8
    P["b2mm"], P["b2mv"] = torch.zeros(3), torch.ones(3)
    P["b2g"], P["b2b"] = torch.rand(3) + 0.5, (torch.rand(3) - 0.5) * 0.2
    P["fw"] = (torch.rand(3, 3) - 0.5) * 0.8
    P["fb"] = (torch.rand(3) - 0.5) * 0.2
    # no conv bias before batch-norm: its true gradient is zero, and Adam
    # would turn float noise in it into full-size steps
    order = ["c1w", "b1mm", "b1mv", "b1g", "b1b", "c2w", "b2mm", "b2mv", "b2g", "b2b", "fw",
             "fb"]
    trainable = [k for k in order if not k.endswith("mm") and not k.endswith("mv")]
    for k in trainable:
        P[k].requires_grad_()
    init = [P[k].detach().clone() for k in order]
    batches = []
    for _ in range(4):
        x = torch.randn(4, 2, 6, 6)
        lab = F.one_hot(torch.randint(0, 3, (4,)), 3).float()
        batches.append((x, lab))
    m = {k: torch.zeros_like(P[k]) for k in trainable}
    v = {k: torch.zeros_like(P[k]) for k in trainable}
    steps = []
    for t, (x, lab) in enumerate(batches, start=1):
        h1, mu1, var1 = bn_train(F.conv2d(x, P["c1w"], None, padding=1), P["b1g"], P["b1b"])
        h1 = torch.relu(h1)
        h2, mu2, var2 = bn_train(F.conv2d(h1, P["c2w"], None, padding=1), P["b2g"], P["b2b"])
        h = torch.relu(h2 + h1).mean(dim=(2, 3))
        z = h @ P["fw"] + P["fb"]
        loss = xent_softmax(z, lab)
        for k in trainable:
            P[k].grad = None
        loss.backward()
        with torch.no_grad():
            for (mm, mv, mu, var) in (("b1mm", "b1mv", mu1, var1), ("b2mm", "b2mv", mu2, var2)):
                P[mm] = 0.99 * P[mm] + 0.01 * mu
                P[mv] = 0.99 * P[mv] + 0.01 * var
            for k in trainable:
                g = P[k].grad
                if opt == "sgd":
                    P[k] -= lr * g
                else:
                    m[k] = 0.9 * m[k] + 0.1 * g
                    v[k] = 0.999 * v[k] + 0.001 * g * g
                    lr_t = lr * (1 - 0.999 ** t) ** 0.5 / (1 - 0.9 ** t)
                    P[k] -= lr_t * m[k] / (v[k].sqrt() + 1e-7)
        steps.append(loss.detach().reshape(1))
        steps.extend(P[k].detach().clone() for k in order)
    flat = init + [a for xb in batches for a in xb] + steps
    save("resnet_%s" % opt, *flat)


def move_case(name, shapes, fn):
    xs = [torch.randn(*sh, requires_grad=True) for sh in shapes]
    ys = fn(*xs)
    if not isinstance(ys, (list, tuple)):
        ys = [ys]
    rs = [torch.rand_like(y) * 2 - 1 for y in ys]
    sum((y * r).sum() for y, r in zip(ys, rs)).backward()
    save("move_" + name, *[x.detach() for x in xs], *rs, *[y.detach() for y in ys],
         *[x.grad for x in xs])


fc_case("2d", (3, 7), 5)
fc_case("4d", (2, 2, 3, 4), 5)
for a in ACTS:
    act_case(a)
for l in LOSSES:
    loss_case(l)
train_case("sgd", "cross", 0.1)
train_case("adam", "cross", 0.01)
train_case("sgd", "mse", 0.5)
conv_case("basic", (2, 2, 5, 7), 3, (3, 3), 1, (0, 0, 0, 0), 1)
conv_case("stride2_same", (2, 2, 5, 6), 2, (3, 3), 2, (1, 1, 1, 1), 1)
conv_case("dilated", (1, 3, 6, 5), 2, (2, 3), 1, (1, 0, 2, 1), 2)
conv_case("pointwise", (2, 4, 3, 3), 5, (1, 1), 1, (0, 0, 0, 0), 1)
pool_case("max", (2, 2, 4, 6), "max", 2, 2, (0, 0, 0, 0))
pool_case("max_pad", (1, 2, 5, 5), "max", 3, 2, (1, 1, 1, 1))
pool_case("average", (2, 2, 4, 6), "average", 2, 2, (0, 0, 0, 0))
pool_case("global_max", (2, 3, 3, 4), "global_max", 0, 0, (0, 0, 0, 0))
pool_case("global_average", (2, 3, 3, 4), "global_average", 0, 0, (0, 0, 0, 0))
bn_case("conv", (4, 3, 2, 3))
resnet_case("sgd", 0.1)
resnet_case("adam", 0.01)
print("golden data written to", OUT)
move_case("addition", [(2, 3, 2, 2), (2, 3, 2, 2)], lambda a, b: a + b)
move_case("concat_c", [(2, 2, 2, 3), (2, 1, 2, 3)], lambda a, b: torch.cat([a, b], 1))
move_case("concat_w", [(2, 1, 2, 3), (2, 1, 2, 2)], lambda a, b: torch.cat([a, b], 3))
move_case("split_w", [(2, 1, 2, 6)], lambda a: list(torch.split(a, 3, dim=3)))
move_case("multiout", [(2, 1, 2, 3)], lambda a: [a * 1, a * 1])
move_case("identity", [(2, 2, 2, 2)], lambda a: a * 1)
move_case("permute", [(2, 2, 3, 4)], lambda a: a.permute(0, 3, 1, 2))
move_case("upsample2d", [(2, 2, 2, 3)],
          lambda a: torch.nn.functional.interpolate(a, scale_factor=(2, 3), mode="nearest"))
