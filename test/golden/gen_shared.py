#!/usr/bin/python3
"""Golden data for weight sharing (shared_from), computed with PyTorch in
float64.

Run from anywhere with Debian's python3-torch (torch 1.13):
    /usr/bin/python3 test/golden/gen_shared.py
It rewrites test/golden/training/<case>/ for the cases below; the output is
the same on every run (fixed seed, float64 on one CPU thread).

The model, in NNTrainer's INI terms: a tied-weight MLP in which fc2 uses
fc1's weight and bias (one square 6x6 weight, one bias of 6):
    [fc1] fully_connected unit=6 input_shape=1:1:6 activation=tanh
    [mid] fully_connected unit=6 activation=sigmoid
    [fc2] fully_connected unit=6 shared_from=fc1 activation=tanh
    [out] fully_connected unit=4 activation=softmax, loss cross
batch_size 4, 5 steps (one epoch over 20 records, in file order). In
PyTorch terms fc1 and fc2 are one nn.Linear applied twice, so autograd sums
the two uses' gradients.

Cases:
    tied_sgd     sgd  lr 0.1
    tied_adam    adam lr 0.01 (beta1 0.9, beta2 0.999, epsilon 1e-7)

Files of a case: as test/golden/gen_training.py writes them (model.ini,
init.bin, train.dat, losses.bin, step_<k>.bin), with the weight file in the
order NNTrainer saves a shared weight: where its gradient is first touched
in the backward pass, i.e. at the sharer that comes last in the graph
(fc2), so the layout is mid (weight, bias), the shared fc1/fc2 (weight,
bias), out (weight, bias): 42 + 42 + 28 = 112 floats.

NNTrainer's conventions (softmax cross-entropy with 1e-20, its Adam) are
reproduced as in gen_training.py (the optimizer steps and file writers are
shared with it in golden_train.py).
"""
import os

import torch

from golden_train import batches, f32, train, write_case

torch.set_num_threads(1)
torch.manual_seed(20261124)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "training")
BATCH = 4
STEPS = 5
CASES = [
    ("tied_sgd", "sgd", 0.1, {}),
    ("tied_adam", "adam", 0.01, {"beta1": "0.9", "beta2": "0.999", "epsilon": "1e-7"}),
]


def initial_weights():
    """Parameters in file order: mid.w, mid.b, shared.w, shared.b, out.w,
    out.b (weights [in, out])."""
    def layer(i, o):
        bound = (6.0 / (i + o)) ** 0.5
        return [f32((torch.rand(i, o) * 2 - 1) * bound), f32((torch.rand(o) * 2 - 1) * 0.1)]
    shared = layer(6, 6)
    mid = layer(6, 6)
    out = layer(6, 4)
    return mid + shared + out


def write_ini(path, name, opt, lr, extra):
    opt_keys = "".join("%s = %s\n" % kv for kv in extra.items())
    text = (
        "# Golden case %s, written by test/golden/gen_shared.py: do not edit.\n"
        "# Initial weights: init.bin (load them after initialize); expected\n"
        "# results: losses.bin, step_<k>.bin. See test/golden/README.md.\n"
        "[Model]\n"
        "type = NeuralNetwork\n"
        "batch_size = %d\n"
        "epochs = 1\n"
        "loss = cross\n"
        "\n"
        "[Optimizer]\n"
        "type = %s\n"
        "learning_rate = %s\n"
        "%s"
        "\n"
        "[train_set]\n"
        "type = file\n"
        "path = train.dat\n"
        "shuffle = false\n"
        "\n"
        "[fc1]\n"
        "type = fully_connected\n"
        "unit = 6\n"
        "input_shape = 1:1:6\n"
        "activation = tanh\n"
        "\n"
        "[mid]\n"
        "type = fully_connected\n"
        "unit = 6\n"
        "activation = sigmoid\n"
        "\n"
        "[fc2]\n"
        "type = fully_connected\n"
        "unit = 6\n"
        "shared_from = fc1\n"
        "activation = tanh\n"
        "\n"
        "[out]\n"
        "type = fully_connected\n"
        "unit = 4\n"
        "activation = softmax\n"
    ) % (name, BATCH, opt, repr(lr), opt_keys)
    with open(path, "w") as f:
        f.write(text)


def forward_backward(params, x, label):
    ps = [p.clone().requires_grad_() for p in params]
    mw, mb, sw, sb, ow, ob = ps
    h = torch.tanh(x @ sw + sb)        # fc1
    h = torch.sigmoid(h @ mw + mb)     # mid
    h = torch.tanh(h @ sw + sb)        # fc2: the same weight and bias
    z = h @ ow + ob
    p = torch.softmax(z, dim=-1)
    loss = -(label * torch.log(p + 1e-20)).sum() / BATCH
    z.backward((p - label).detach() / BATCH)
    return loss.item(), [q.grad.detach() for q in ps]


def main():
    params = initial_weights()
    data = batches(STEPS, BATCH, 6, 4)
    for name, opt, lr, extra in CASES:
        d = os.path.join(ROOT, name)
        os.makedirs(d, exist_ok=True)
        write_ini(os.path.join(d, "model.ini"), name, opt, lr, extra)
        losses, after = train(params, data, opt, lr, forward_backward)
        write_case(d, params, data, losses, after)
        print("%-10s losses %s" % (name, " ".join("%.6f" % l for l in losses)))
    print("golden training data written to", ROOT)


if __name__ == "__main__":
    main()
