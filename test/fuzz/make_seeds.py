#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets (test/fuzz/corpus/<target>/).

Run from anywhere: python3 test/fuzz/make_seeds.py. It rewrites the files it
makes and leaves others alone. The input formats are described at the top
of each test/fuzz/fuzz_<target>.c and in docs/fuzzing.md. A name starting
with ok- is a seed the target must take all the way, bad- one it must
refuse (test_fuzz_replay checks both); other seeds may go either way.
"""
import gzip
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---------------------------------------------------------------- ini

MODEL = """[Model]
type = NeuralNetwork
epochs = 1
batch_size = {batch}
loss = {loss}
{extra}
[Optimizer]
type = {opt}
learning_rate = 0.01
{opt_extra}

[train_set]
type = synthetic
samples = 8
"""


def model(batch=2, loss="cross", opt="adam", extra="", opt_extra=""):
    return MODEL.format(batch=batch, loss=loss, opt=opt, extra=extra, opt_extra=opt_extra)


MLP = """
[in]
type = input
input_shape = 1:1:8

[fc1]
type = fully_connected
unit = 6
activation = relu

[out]
type = fully_connected
unit = 3
activation = softmax
"""


def ini_seeds():
    # every INI of the repository, as it is
    for top in ("Applications", "benchmarks", "test/golden"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith(".ini"):
                    rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                    name = "repo-" + rel.replace("/", "-")
                    with open(os.path.join(ROOT, rel), "rb") as src:
                        put("ini", name, src.read())

    put("ini", "ok-mlp.ini", model() + """
[valid_set]
type = synthetic
samples = 4

[test_set]
type = synthetic
samples = 4
shuffle = true
buffer_size = 2
""" + MLP)
    put("ini", "ok-conv.ini", model(extra="seed = 3\nmemory_planner = pool\n") + """
[in]
type = input
input_shape = 2:6:6
normalization = true

[conv]
type = conv2d
filters = 3
kernel_size = 3,3
stride = 2
padding = same
weight_initializer = he_normal
bias_initializer = ones

[pool]
type = pooling2d
pooling = max
pool_size = 2,2
stride = 1,1

[bn]
type = batch_normalization
momentum = 0.9
epsilon = 0.01
activation = tanh

[avg]
type = pooling2d
pooling = global_average

[flat]
type = flatten

[fc]
type = fully_connected
unit = 2
activation = softmax
""")
    put("ini", "ok-conv1d.ini", model(loss="mse", opt="sgd") + """
[in]
type = input
input_shape = 1:1:12
standardization = true

[c1]
type = conv1d
filters = 2
kernel_size = 3
dilation = 2
padding = 1,2

[up]
type = upsample2d
upsample = nearest
kernel_size = 1,2

[flat]
type = flatten

[fc]
type = fully_connected
unit = 4
disable_bias = true
weight_regularizer = l2norm
weight_regularizer_constant = 0.1
""")
    put("ini", "ok-branches.ini", model(extra="memory_optimization = false\n") + """
[in]
type = input
input_shape = 2:2:4

[split]
type = split
axis = 3
split_number = 2

[a]
type = fully_connected
input_layers = split(0)
unit = 2
activation = sigmoid

[b]
type = identity
input_layers = split(1)

[add]
type = addition
input_layers = a, b

[mo]
type = multiout

[p]
type = permute
input_layers = mo(0)
direction = 3,1,2

[r]
type = reshape
input_layers = p
target_shape = 2:2:2

[d]
type = dropout
input_layers = mo(1)
dropout_rate = 0.25

[cat]
type = concat
input_layers = r, d
axis = 1
flatten = true

[fc]
type = fully_connected
unit = 3
activation = softmax
""")
    acts = ["relu", "leaky_relu", "sigmoid", "tanh", "swish", "gelu", "elu", "selu",
            "softplus", "mish", "none"]
    body = "\n[in]\ntype = input\ninput_shape = 1:1:5\n"
    for i, a in enumerate(acts):
        body += "\n[act%d]\ntype = activation\nactivation = %s\n" % (i, a)
    body += "\n[out]\ntype = fully_connected\nunit = 2\nactivation = sigmoid\n"
    put("ini", "ok-activations.ini", model(loss="cross_sigmoid", opt="adamw",
                                         extra="clip_grad_by_norm = 1.5\n") + body)
    scheds = {
        "constant": "learning_rate = 0.1",
        "exponential": "learning_rate = 0.1\ndecay_rate = 0.5\ndecay_steps = 2",
        "step": "learning_rate = 0.1, 0.01, 0.001\niteration = 2, 5",
        "cosine": "max_learning_rate = 0.1\nmin_learning_rate = 0.001\ndecay_steps = 3",
        "linear": "max_learning_rate = 0.1\nmin_learning_rate = 0.001\ndecay_steps = 3",
    }
    for t, keys in scheds.items():
        put("ini", "ok-lr-%s.ini" % t,
            model() + "\n[LearningRateScheduler]\ntype = %s\n%s\n" % (t, keys) + MLP)
    put("ini", "ok-adam-keys.ini", model(opt_extra="beta1 = 0.8\nbeta2 = 0.99\nepsilon = 1e-6\n"
                                         "decay_rate = 0.9\ndecay_steps = 4\n") + MLP)
    put("ini", "ok-legacy-optimizer.ini", """[Model]
type = NeuralNetwork
batch_size = 2
loss = mse
optimizer = sgd
learning_rate = 0.05

[train_set]
type = synthetic
""" + MLP)
    put("ini", "ok-legacy-dataset.ini", model().replace(
        "[train_set]\ntype = synthetic\nsamples = 8\n", "") + """
[Dataset]
TrainData = train.dat
ValidData = valid.dat
TestData = test.dat
LabelData = label.dat
BufferSize = 3
""" + MLP)
    put("ini", "ok-idx.ini", model().replace(
        "type = synthetic\nsamples = 8\n",
        "type = idx\nimages = images.idx\nlabels = labels.idx.gz\n") + MLP)
    put("ini", "ok-overrides.ini", "#ov:fc1.unit=3\tbatch_size=4\tOptimizer.learning_rate=0.5"
        "\tout.activation=softmax\tsave_path=\n" + model() + MLP)
    put("ini", "ok-syntax.ini", ("; comments, quotes, a continued line, CR LF\r\n"
                                 "[MODEL]\r\n  Type = 'NeuralNetwork'  \r\n"
                                 "batch_size = \"2\" ; two\r\n"
                                 "loss = cross # comment\r\n"
                                 "seed = 12\\\r\n34\r\n"
                                 "[optimizer]\r\n\ttype\t=\tsgd\r\n"
                                 "[TRAIN_SET]\r\ntype = synthetic\r\n") + MLP.replace("\n", "\r\n"))
    put("ini", "ok-budget.ini", model(extra="memory_budget = 1M\nload_weights = true\n"
                                      "save_path = model.bin\ncontinue_train = true\n") + MLP)
    put("ini", "ok-tensor-keys.ini", model(extra="tensor_format = NCHW\nloss_scale = 1\n"
                                           "memory_swap = false\ntensor_type = FP32\n") + MLP)
    put("ini", "ok-trainable.ini", model() + MLP.replace("unit = 6\n", "unit = 6\ntrainable = false\n"))

    bad = {
        "bad-duplicate-section.ini": model() + MLP + "\n[FC1]\ntype = identity\n",
        "bad-duplicate-key.ini": model() + MLP.replace("unit = 6\n", "unit = 6\nUNIT = 7\n"),
        "bad-unknown-key.ini": model() + MLP.replace("unit = 6\n", "unit = 6\nunits = 7\n"),
        "bad-unknown-type.ini": model() + MLP.replace("fully_connected\nunit = 6", "fully\nunit = 6"),
        "bad-nul.ini": model() + "\0" + MLP,
        "bad-bom.ini": "\ufeff" + model() + MLP,
        "bad-no-model.ini": MLP,
        "bad-no-layers.ini": model(),
        "bad-cycle.ini": model(loss="mse") + MLP.replace("unit = 6\n", "unit = 6\ninput_layers = out\n"),
        "bad-shape.ini": model() + MLP.replace("1:1:8", "0:1:8"),
        "bad-addition-shapes.ini": model(loss="mse") + """
[in]
type = input
input_shape = 1:1:4
[a]
type = fully_connected
unit = 3
[b]
type = fully_connected
input_layers = in
unit = 2
[add]
type = addition
input_layers = a, b
""",
        "bad-backbone.ini": model() + MLP + "\n[bb]\nbackbone = base.ini\n",
        "bad-unsupported.ini": model(extra="memory_swap = true\n") + MLP,
        "bad-unquoted.ini": model().replace("type = adam", "type = \"adam") + MLP,
        "bad-continued-end.ini": model() + MLP + "unit = 3 \\",
        "bad-scheduler-and-decay.ini": model(opt_extra="decay_rate = 0.5\ndecay_steps = 2\n") +
        "\n[LearningRateScheduler]\ntype = constant\n" + MLP,
        "bad-override-section.ini": "#ov:nosuch.key=1\n" + model() + MLP,
        "bad-batch.ini": model(batch="0") + MLP,
        "bad-big.ini": model(extra="memory_budget = 4K\n") + MLP.replace("unit = 6", "unit = 4000"),
        "bad-loss.ini": model(loss="hinge") + MLP,
        "bad-not-utf8.ini": model().encode() + b"\xff\xfe" + MLP.encode(),
    }
    for name, text in bad.items():
        put("ini", name, text)


# ------------------------------------------------------------ weights

GOLDEN = os.path.join(ROOT, "test", "golden", "nntrainer")
# the fixed models of fuzz_weights.c, in its order
WEIGHT_MODELS = ["fc_adam", "fc_sgd", "fc_adamw", "fc_frozen_adam", "conv_bn_adam",
                 "conv_bn_sgd", "conv_bn_frozen_adam"]


def golden_bin(case):
    with open(os.path.join(GOLDEN, case, "model.bin"), "rb") as f:
        return f.read()


def weight_seeds():
    for i, case in enumerate(WEIGHT_MODELS):
        b = golden_bin(case)
        put("weights", "ok-%s.bin" % case, bytes([i]) + b)
        put("weights", "ok-%s-at-init.bin" % case, bytes([0x80 | i]) + b)
        put("weights", "ok-%s-after-step.bin" % case, bytes([0x40 | i]) + b)
    put("weights", "ok-fc_adam_after_train.bin", bytes([0]) + golden_bin("fc_adam_after_train"))
    fc = golden_bin("fc_adam")          # 296 bytes of weights, "adam", moments, counters
    w = fc[:296]
    put("weights", "ok-fc_adam-weights-only.bin", bytes([0]) + w)
    put("weights", "ok-fc_adam-weights-counters.bin", bytes([0]) + w + struct.pack("<II", 1, 4))
    put("weights", "ok-fc_adam-weights-tag.bin", bytes([0]) + w + b"adam")
    put("weights", "bad-fc_adam-short.bin", bytes([0]) + fc[:-1])
    put("weights", "bad-fc_adam-trailing.bin", bytes([0]) + fc + b"\0")
    put("weights", "bad-fc_adam-nan.bin", bytes([0]) + struct.pack("<f", float("nan")) + fc[4:])
    put("weights", "bad-fc_adam-tag.bin", bytes([0]) + w + b"adaM" + fc[300:])
    neg = bytearray(fc)
    neg[420:424] = struct.pack("<f", -1.0)  # fc1 weight's first second moment (after 30 m)
    put("weights", "bad-fc_adam-negative-moment.bin", bytes([0]) + bytes(neg))
    put("weights", "bad-fc_adam-counters.bin", bytes([0]) + fc[:-8] + struct.pack("<II", 9, 2))
    put("weights", "bad-fc_adam-counter-max.bin",
        bytes([0]) + fc[:-8] + struct.pack("<II", 1, 0xffffffff))
    put("weights", "bad-fc_sgd-into-conv.bin", bytes([4]) + golden_bin("fc_sgd"))
    put("weights", "bad-empty.bin", bytes([1]))


# ---------------------------------------------------------------- idx

def idx(type_code, dims, payload):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def idx_input(flags, classes, images, labels):
    return bytes([flags, classes]) + struct.pack("<H", len(images)) + images + labels


def idx_seeds():
    img = idx(0x08, [4, 2, 3], bytes(range(0, 240, 10)))      # 4 images of 2x3 bytes
    lab = idx(0x08, [4], bytes([0, 2, 1, 2]))
    imgf = idx(0x0D, [3, 2], b"".join(struct.pack(">f", v) for v in (0.5, -1, 2, 1e3, 0, 3.25)))
    labf = idx(0x08, [3], bytes([1, 0, 1]))
    b = lambda batch: (batch - 1) << 5
    put("idx", "ok-bytes.idx", idx_input(b(2), 3, img, lab))
    put("idx", "ok-bytes-gzip.idx", idx_input(3 | b(1) | 8, 3, img, lab))
    put("idx", "ok-bytes-shuffle.idx", idx_input(4 | 8 | b(2), 3, img, lab))
    put("idx", "ok-floats.idx", idx_input(b(3), 2, imgf, labf))
    put("idx", "ok-floats-gzip-images.idx", idx_input(1 | b(1), 0, imgf, labf))
    put("idx", "gzip-inside-plain.idx",
        idx_input(b(1), 3, gzip.compress(img, mtime=0), gzip.compress(lab, mtime=0)))
    put("idx", "bad-width.idx", idx_input(16 | b(1), 3, img, lab))
    put("idx", "bad-label-range.idx", idx_input(b(1), 2, img, lab))
    put("idx", "bad-count.idx", idx_input(b(1), 3, img, idx(0x08, [3], bytes([0, 1, 2]))))
    put("idx", "bad-truncated.idx", idx_input(b(1), 3, img[:-1], lab))
    put("idx", "bad-truncated-gzip.idx", idx_input(1 | b(1), 3, img[:-3], lab))
    put("idx", "bad-magic.idx", idx_input(b(1), 3, b"\x00\x00\x09\x03" + img[4:], lab))
    put("idx", "bad-label-dims.idx", idx_input(b(1), 3, img, idx(0x08, [4, 1], bytes(4))))
    put("idx", "bad-batch.idx", idx_input(b(8), 3, img, lab))
    put("idx", "bad-huge-header.idx",
        idx_input(1 | b(1), 3, idx(0x08, [0xffffffff, 0x10000, 0x10000], b""), lab))


# ------------------------------------------------------------ rawfile

def raw_seeds():
    for shape, case in ((0, "fc_adam"), (1, "conv_bn_adam")):
        with open(os.path.join(GOLDEN, case, "train.dat"), "rb") as f:
            dat = f.read()
        put("rawfile", "ok-golden-%s.dat" % case, bytes([shape, 0]) + dat)
        put("rawfile", "ok-golden-%s-shuffle.dat" % case, bytes([shape, 1 | 2 | 8]) + dat)
        put("rawfile", "bad-golden-%s-cut.dat" % case, bytes([shape, 0]) + dat[:-2])
    floats = lambda *v: b"".join(struct.pack("<f", x) for x in v)
    # shape 3: inputs 2 and 3, label 2, batch 2: 7 floats a record
    recs = b"".join(floats(*[r * 10 + i for i in range(7)]) for r in range(5))
    put("rawfile", "ok-two-inputs.dat", bytes([3, 0x10 | 4]) + recs)
    # shape 4: input 4, labels 2 and 1, batch 3
    recs = b"".join(floats(*[r + i / 8 for i in range(7)]) for r in range(6))
    put("rawfile", "ok-two-labels.dat", bytes([4, 1 | 8]) + recs)
    put("rawfile", "ok-odd-floats.dat",
        bytes([2, 0]) + floats(float("nan"), float("inf"), -0.0, 1e-45))
    put("rawfile", "bad-too-few.dat", bytes([5, 0]) + floats(1, 2, 3, 4))
    put("rawfile", "bad-empty.dat", bytes([7, 0]))


# --------------------------------------------------------------- capi

MLP_SCRIPT = """N0
Lname=in|input_shape=1:1:4
M
N1
Lname=fc1\tunit=8\tactivation=relu
M
N1
Lname=out|unit=3|activation=softmax
M
O0
olearning_rate=0.01
P
D0
T
Closs=cross|batch_size=2
R
Q
"""


CONV_SCRIPT = """N0
Linput_shape=2:5:5
M
N3
Lfilters=2|kernel_size=3,3|padding=same
M
N2
Lmomentum=0.5
M
N4
Lpooling=average|pool_size=2,2
M
N5
M
N1
Lunit=2|activation=sigmoid
M
O2
oweight_decay=0.1\tbeta1=0.5
P
S1
sdecay_rate=0.5|decay_steps=2
A
D0
V{palette}
E4
T
Closs=cross_sigmoid\tbatch_size=1\tmemory_optimization=false
R
Q
"""


def capi_seeds():
    put("capi", "ok-mlp.txt", MLP_SCRIPT)
    put("capi", "ok-mlp-valid-sched.txt", MLP_SCRIPT.replace("P\n", "S2\nslearning_rate=0.1,0.01|iteration=2\nA\nP\n")
        .replace("D0\n", "D0\nD1\nd*buffer_size=2\nd0shuffle=false\nE6\n")
        .replace("R\n", "Repochs=2\tsave_path=/nonexistent/x.bin\nY0\nZ\nY1\nY2\n"))
    put("capi", "ok-conv.txt", CONV_SCRIPT.format(palette="0123"))
    # the same with the whole palette: NaN and infinities in the data stop
    # training (check_finite), so the run is refused
    put("capi", "bad-conv-nan.txt", CONV_SCRIPT.format(palette="0123456789:;<=>?"))
    put("capi", "ok-sgd-mse.txt", """N0
Linput_shape=3
M
N6
Lactivation=tanh
M
N1
Lunit=2
M
N?
M
O1
P
D0
T
Kpool
Cbatch_size=4
R
Rcontinue_train=true
""")
    put("capi", "bad-misuse.txt", """N0
Linput_shape=1:1:4
XL
Lunit=3
M
N1
Lunit=abc
Lnosuch=1
L=1
Lunit
Lunit=2|name=
M
M
O9
O0
olearning_rate=-1
ouser_data=1
XO
P
SD
S0
A
XS
D5
D0
d0user_data
d0user_data=3
d9buffer_size=1
T
XD
T
Cbatch_size=0
C
Lunit=5
R
XM
R
Q
Gnothere
""")
    put("capi", "bad-uncompiled-run.txt", MLP_SCRIPT.replace("Closs=cross|batch_size=2\n", ""))


def main():
    ini_seeds()
    weight_seeds()
    idx_seeds()
    raw_seeds()
    capi_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
