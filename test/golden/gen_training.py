#!/usr/bin/python3
"""Golden data for whole-model training, computed with PyTorch in float64.

Run from anywhere with Debian's python3-torch (torch 1.13):
    /usr/bin/python3 test/golden/gen_training.py
It rewrites test/golden/training/<case>/ for every case below; the output is
the same on every run (fixed seed, float64 on one CPU thread).

The model, in NNTrainer's INI terms:
    [fc1] fully_connected unit=16 input_shape=1:1:8 activation=relu
    [fc2] fully_connected unit=12 activation=sigmoid
    [fc3] fully_connected unit=4  activation=softmax (cross) or sigmoid (mse)
batch_size 4, 5 steps (one epoch over 20 records, in file order).

Cases:
    sgd_cross    sgd  lr 0.1,  softmax cross-entropy
    adam_cross   adam lr 0.01, softmax cross-entropy
    sgd_mse      sgd  lr 0.5,  sigmoid output with mse
    adamw_cross  adamw lr 0.01 weight_decay 0.1, softmax cross-entropy

Files of a case (all float32 little-endian, no header, except model.ini):
    model.ini    the model as an INI file nntrainer loads (no save_path, so
                 training never writes into this folder)
    init.bin     initial weights, NNTrainer's .bin layout: per layer in
                 order fc1, fc2, fc3: weight [in, out] row-major, bias [out]
                 (400 floats)
    train.dat    NNTrainer's raw dataset: per record the 8 input floats then
                 the 4 label floats; records in step order (20 records)
    losses.bin   the loss of each step, computed before that step's update
                 (5 floats)
    step_<k>.bin the weights after step k = 1..5, same layout as init.bin

NNTrainer's conventions, reproduced by hand where PyTorch differs:
  * softmax cross-entropy: loss = -sum(label * log(softmax + 1e-20)) / batch;
    its derivative is exactly (softmax - label) / batch (fed to backward by
    hand rather than differentiated through the 1e-20).
  * mse: mean over all elements; derivative 2 (y - label) / (batch * 4).
  * adam: epsilon (1e-7) added to the uncorrected sqrt(v), the bias
    corrections folded into the step size:
        w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps),
    t = iteration + 1. torch.optim.Adam instead divides by
    sqrt(v / (1 - b2^t)) + eps, so it is not used.
  * adamw: the same Adam step after the decoupled decay
        w *= 1 - lr * weight_decay
    (plain lr, not the bias-corrected one); NNTrainer's adamw epsilon
    default is 1e-8, written explicitly in the INI.
"""
import os

import torch

from golden_train import batches, f32, train, write_case

torch.set_num_threads(1)
torch.manual_seed(20251207)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "training")
SIZES = [(8, 16), (16, 12), (12, 4)]
BATCH = 4
STEPS = 5

CASES = [
    # name, optimizer, lr, loss, extra optimizer keys
    ("sgd_cross", "sgd", 0.1, "cross", {}),
    ("adam_cross", "adam", 0.01, "cross",
     {"beta1": "0.9", "beta2": "0.999", "epsilon": "1e-7"}),
    ("sgd_mse", "sgd", 0.5, "mse", {}),
    ("adamw_cross", "adamw", 0.01, "cross",
     {"beta1": "0.9", "beta2": "0.999", "epsilon": "1e-8", "weight_decay": "0.1"}),
]


def initial_weights():
    params = []
    for i, o in SIZES:
        bound = (6.0 / (i + o)) ** 0.5  # xavier-uniform-like spread
        params.append(f32((torch.rand(i, o) * 2 - 1) * bound))  # [in, out]
        params.append(f32((torch.rand(o) * 2 - 1) * 0.1))
    return params


def write_ini(path, name, opt, lr, loss, extra):
    last_act = "softmax" if loss == "cross" else "sigmoid"
    opt_keys = "".join("%s = %s\n" % kv for kv in extra.items())
    text = (
        "# Golden case %s, written by test/golden/gen_training.py: do not edit.\n"
        "# Initial weights: init.bin (load them after initialize); expected\n"
        "# results: losses.bin, step_<k>.bin. See test/golden/README.md.\n"
        "[Model]\n"
        "type = NeuralNetwork\n"
        "batch_size = %d\n"
        "epochs = 1\n"
        "loss = %s\n"
        "\n"
        "[Optimizer]\n"
        "type = %s\n"
        "learning_rate = %s\n"
        "%s"
        "\n"
        "[train_set]\n"
        "type = file\n"
        "path = train.dat\n"
        "# ours: keep the records in file order (NNTrainer always shuffles)\n"
        "shuffle = false\n"
        "\n"
        "[fc1]\n"
        "type = fully_connected\n"
        "unit = 16\n"
        "input_shape = 1:1:8\n"
        "activation = relu\n"
        "\n"
        "[fc2]\n"
        "type = fully_connected\n"
        "unit = 12\n"
        "activation = sigmoid\n"
        "\n"
        "[fc3]\n"
        "type = fully_connected\n"
        "unit = 4\n"
        "activation = %s\n"
    ) % (name, BATCH, loss, opt, repr(lr), opt_keys, last_act)
    with open(path, "w") as f:
        f.write(text)


def forward_backward(params, x, label, loss_name):
    """Loss of the batch and the gradients of params, NNTrainer's way."""
    ps = [p.clone().requires_grad_() for p in params]
    h = torch.relu(x @ ps[0] + ps[1])
    h = torch.sigmoid(h @ ps[2] + ps[3])
    z = h @ ps[4] + ps[5]
    if loss_name == "cross":
        p = torch.softmax(z, dim=-1)
        loss = -(label * torch.log(p + 1e-20)).sum() / BATCH
        z.backward((p - label).detach() / BATCH)
    else:
        y = torch.sigmoid(z)
        loss = ((y - label) ** 2).mean()
        loss.backward()
    return loss.item(), [q.grad.detach() for q in ps]


def main():
    params = initial_weights()
    data = batches(STEPS, BATCH, 8, 4)
    for name, opt, lr, loss_name, extra in CASES:
        d = os.path.join(ROOT, name)
        os.makedirs(d, exist_ok=True)
        write_ini(os.path.join(d, "model.ini"), name, opt, lr, loss_name, extra)
        losses, after = train(
            params, data, opt, lr,
            lambda p, x, label: forward_backward(p, x, label, loss_name),
            eps=float(extra.get("epsilon", "1e-7")),
            wd=float(extra.get("weight_decay", "0")))
        write_case(d, params, data, losses, after)
        print("%-12s losses %s" % (name, " ".join("%.6f" % l for l in losses)))
    print("golden training data written to", ROOT)


if __name__ == "__main__":
    main()
