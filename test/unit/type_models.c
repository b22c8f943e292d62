/* Small models (INI text) that together use every registered layer type,
 * every loss and the core's own ops (type_models.h). */
#include "type_models.h"

#define HEAD(loss, opt, model)                                                            \
  "[Model]\ntype = NeuralNetwork\nepochs = 1\nbatch_size = 3\nloss = " loss "\n" model     \
  "\n[Optimizer]\ntype = " opt "\n\n"                                                     \
  "[train_set]\ntype = synthetic\nsamples = 6\n\n[valid_set]\ntype = synthetic\n"          \
  "samples = 3\n\n"

const char *const tu_type_models[] = {
    /* fully connected, dropout, softmax, regularizer, clipping, adam */
    HEAD("cross", "adam", "clip_grad_by_norm = 1\n")
    "[in]\ntype = input\ninput_shape = 1:1:8\nnormalization = true\n\n"
    "[fc1]\ntype = fully_connected\nunit = 6\nactivation = relu\n"
    "weight_regularizer = l2norm\nweight_regularizer_constant = 0.01\n\n"
    "[drop]\ntype = dropout\ndropout_rate = 0.3\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n",
    /* convolutions (the second computes a derivative), batch normalization,
     * pooling, flatten, sigmoid, sgd */
    HEAD("cross", "sgd", "")
    "[in]\ntype = input\ninput_shape = 2:6:6\n\n"
    "[conv0]\ntype = conv2d\nfilters = 2\nkernel_size = 1\n\n"
    "[conv1]\ntype = conv2d\nfilters = 3\nkernel_size = 3\npadding = same\n\n"
    "[bn]\ntype = batch_normalization\nactivation = tanh\n\n"
    "[pool1]\ntype = pooling2d\npooling = max\npool_size = 2\nstride = 2\n\n"
    "[pool2]\ntype = pooling2d\npooling = average\npool_size = 2\nstride = 1\n\n"
    "[flat]\ntype = flatten\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = sigmoid\n",
    /* conv1d, upsample2d, permute, reshape, identity, mse, adamw */
    HEAD("mse", "adamw\nweight_decay = 0.01", "")
    "[in]\ntype = input\ninput_shape = 1:1:8\nstandardization = true\n\n"
    "[c1]\ntype = conv1d\nfilters = 2\nkernel_size = 3\n\n"
    "[up]\ntype = upsample2d\nupsample = nearest\nkernel_size = 1,2\n\n"
    "[perm]\ntype = permute\ndirection = 1,3,2\n\n"
    "[rs]\ntype = reshape\ntarget_shape = 1:1:24\n\n"
    "[id]\ntype = identity\n\n"
    "[out]\ntype = fully_connected\nunit = 4\n",
    /* multiout, addition, split, concat, an output read by two layers */
    HEAD("mse", "sgd", "")
    "[in]\ntype = input\ninput_shape = 1:1:6\n\n"
    "[mo]\ntype = multiout\n\n"
    "[a]\ntype = fully_connected\nunit = 4\ninput_layers = mo(0)\n\n"
    "[b]\ntype = fully_connected\nunit = 4\ninput_layers = mo(1)\n\n"
    "[add]\ntype = addition\ninput_layers = a, b\n\n"
    "[sp]\ntype = split\naxis = 3\nsplit_number = 2\ninput_layers = add\n\n"
    "[x]\ntype = fully_connected\nunit = 2\ninput_layers = add\n\n"
    "[cat]\ntype = concat\naxis = 3\ninput_layers = sp(0), sp(1), x\n\n"
    "[out]\ntype = fully_connected\nunit = 3\n",
    /* the loss layers given as layers */
    HEAD("none", "sgd", "")
    "[in]\ntype = input\ninput_shape = 1:1:5\n\n"
    "[out]\ntype = fully_connected\nunit = 3\n\n"
    "[loss]\ntype = cross_sigmoid\n",
    HEAD("none", "sgd", "")
    "[in]\ntype = input\ninput_shape = 1:1:5\n\n"
    "[out]\ntype = fully_connected\nunit = 3\n\n"
    "[loss]\ntype = cross_softmax\n",
    HEAD("none", "sgd", "")
    "[in]\ntype = input\ninput_shape = 1:1:5\n\n"
    "[out]\ntype = fully_connected\nunit = 3\n\n"
    "[loss]\ntype = mse\n",
    /* sequence layers: embedding (min-max normalization makes indices 0
     * and 1 of the synthetic data), layer normalization, positional
     * encoding */
    HEAD("cross", "adam", "")
    "[in]\ntype = input\ninput_shape = 1:1:6\nnormalization = true\n\n"
    "[emb]\ntype = embedding\nin_dim = 4\nout_dim = 5\n\n"
    "[ln]\ntype = layer_normalization\naxis = 3\n\n"
    "[pe]\ntype = positional_encoding\nmax_timestep = 8\n\n"
    "[flat]\ntype = flatten\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n",
    /* the element-wise layers of two inputs (divide by a sigmoid's output),
     * reduce_mean */
    HEAD("mse", "sgd", "")
    "[in]\ntype = input\ninput_shape = 1:1:6\n\n"
    "[a]\ntype = fully_connected\nunit = 4\ninput_layers = in\n\n"
    "[b]\ntype = fully_connected\nunit = 4\nactivation = sigmoid\ninput_layers = in\n\n"
    "[s]\ntype = add\ninput_layers = a, b\n\n"
    "[d]\ntype = subtract\ninput_layers = s, a\n\n"
    "[m]\ntype = multiply\ninput_layers = d, b\n\n"
    "[q]\ntype = divide\ninput_layers = m, b\n\n"
    "[rm]\ntype = reduce_mean\naxis = 3\n\n"
    "[out]\ntype = fully_connected\nunit = 3\n",
};

const size_t tu_n_type_models = sizeof tu_type_models / sizeof tu_type_models[0];
