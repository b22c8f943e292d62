#!/usr/bin/python3
"""Writes resnet18.ini: ResNet-18 for 3:32:32 inputs and 100 classes, as an
NNTrainer INI. Run from this folder: /usr/bin/python3 gen_resnet18_ini.py
With --frozen it writes resnet18_frozen.ini instead: the backbone frozen
(trainable = false on every conv2d and batch_normalization) and the head
trained with Adam (learning rate 0.001), as NNTrainer's ResNet application
trains it when it does not start from pre-trained weights."""
import sys

FROZEN = "--frozen" in sys.argv[1:]

HEAD = """# ResNet-18 for 3:32:32 inputs and 100 classes (made by gen_resnet18_ini.py).
# Trained on seeded synthetic data; prints its planned memory and step time.
# Run: build/nntrainer train Applications/ResNet/resnet18.ini
[Model]
type = NeuralNetwork
epochs = 1
batch_size = 32
loss = cross
seed = 1

[Optimizer]
type = sgd
learning_rate = 0.01

[train_set]
type = synthetic
samples = 256

[input]
type = input
input_shape = 3:32:32

[conv0]
type = conv2d
filters = 64
kernel_size = 3,3
padding = 1,1
disable_bias = true
weight_initializer = he_normal
{FREEZE}
[bn0]
type = batch_normalization
activation = relu
{FREEZE}"""


def conv(name, inp, filters, k, stride, pad):
    return f"""
[{name}]
type = conv2d
input_layers = {inp}
filters = {filters}
kernel_size = {k},{k}
stride = {stride},{stride}
padding = {pad},{pad}
disable_bias = true
weight_initializer = he_normal
{FREEZE}"""


def bn(name, inp, act=None):
    s = f"\n[{name}]\ntype = batch_normalization\ninput_layers = {inp}\n"
    return s + (f"activation = {act}\n" if act else "") + FREEZE


def block(name, inp, filters, stride, project):
    s = conv(f"{name}_c1", inp, filters, 3, stride, 1)
    s += bn(f"{name}_b1", f"{name}_c1", "relu")
    s += conv(f"{name}_c2", f"{name}_b1", filters, 3, 1, 1)
    s += bn(f"{name}_b2", f"{name}_c2")
    skip = inp
    if project:
        s += conv(f"{name}_sc", inp, filters, 1, stride, 0)
        s += bn(f"{name}_sb", f"{name}_sc")
        skip = f"{name}_sb"
    s += f"\n[{name}_add]\ntype = addition\ninput_layers = {name}_b2, {skip}\nactivation = relu\n"
    return s, f"{name}_add"


FREEZE = "trainable = false\n" if FROZEN else ""
head = HEAD
if FROZEN:
    head = head.replace("made by gen_resnet18_ini.py", "made by gen_resnet18_ini.py --frozen")
    head = head.replace("resnet18.ini\n[Model]", "resnet18_frozen.ini\n"
                        "# The backbone is frozen: only the head (fc) trains, with Adam.\n[Model]")
    head = head.replace("type = sgd\nlearning_rate = 0.01", "type = adam\nlearning_rate = 0.001")
out = head.replace("{FREEZE}", FREEZE)
prev, width = "bn0", 64
for stage, filters in enumerate([64, 128, 256, 512], start=1):
    for b in range(2):
        stride = 2 if stage > 1 and b == 0 else 1
        text, prev = block(f"res{stage}{'ab'[b]}", prev, filters, stride,
                           stride != 1 or filters != width)
        out += text
        width = filters
out += f"""
[pool]
type = pooling2d
input_layers = {prev}
pooling = global_average

[flat]
type = flatten

[fc]
type = fully_connected
unit = 100
activation = softmax
"""
with open("resnet18_frozen.ini" if FROZEN else "resnet18.ini", "w") as f:
    f.write(out)
