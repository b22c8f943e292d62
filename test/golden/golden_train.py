"""Shared pieces of the whole-model training golden generators
(gen_training.py, gen_shared.py): float32 rounding, the raw float file
writer, NNTrainer's optimizer steps (sgd, adam, adamw) in float64 and the
files of one case. Imported by those scripts; not run on its own.

NNTrainer's conventions reproduced here (see gen_training.py's docstring):
adam adds epsilon to the uncorrected sqrt(v) and folds the bias corrections
into the step size; adamw applies the decoupled decay w *= 1 - lr * wd with
the plain lr before the same Adam step.
"""
import os

import torch


def f32(t):
    """Round to float32 and back, so the reference starts from exactly the
    values written to the files."""
    return t.to(torch.float32).to(torch.float64)


def batches(steps, batch, n_in, n_out):
    """steps batches of (x [batch, n_in], one-hot label [batch, n_out])."""
    out = []
    for _ in range(steps):
        x = f32(torch.randn(batch, n_in))
        label = torch.nn.functional.one_hot(torch.randint(0, n_out, (batch,)), n_out)
        out.append((x, label.to(torch.float64)))
    return out


def write_floats(path, arrays):
    with open(path, "wb") as f:
        for a in arrays:
            f.write(a.detach().to(torch.float32).contiguous().numpy().tobytes())


def train(params, data, opt, lr, forward_backward, eps=1e-7, wd=0.0):
    """Runs one step per batch of data with optimizer opt ("sgd", "adam" or
    "adamw"); forward_backward(params, x, label) returns (loss, grads).
    Returns the loss of each step (before its update) and the parameters
    after each step."""
    params = [p.clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    b1, b2 = 0.9, 0.999
    losses, after = [], []
    for it, (x, label) in enumerate(data):
        loss, grads = forward_backward(params, x, label)
        t = it + 1
        lr_t = lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
        for i, g in enumerate(grads):
            if opt == "sgd":
                params[i] = params[i] - lr * g
                continue
            if opt == "adamw":
                params[i] = params[i] * (1 - lr * wd)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            params[i] = params[i] - lr_t * m[i] / (v[i].sqrt() + eps)
        losses.append(loss)
        after.append([p.clone() for p in params])
    return losses, after


def records(data):
    """The raw dataset's records in step order: per record input then label."""
    out = []
    for x, label in data:
        for r in range(x.shape[0]):
            out += [x[r], label[r]]
    return out


def write_case(d, params, data, losses, after):
    """The data files of one case in folder d (model.ini is the caller's):
    init.bin, train.dat, losses.bin, step_<k>.bin."""
    os.makedirs(d, exist_ok=True)
    write_floats(os.path.join(d, "init.bin"), params)
    write_floats(os.path.join(d, "train.dat"), records(data))
    write_floats(os.path.join(d, "losses.bin"), [torch.tensor(losses)])
    for k, ws in enumerate(after, start=1):
        write_floats(os.path.join(d, "step_%d.bin" % k), ws)
