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
    /* lstm (with dropout; bidirectional and frozen, so its backward runs
     * without calc_gradient), lstmcell with both outputs read */
    HEAD("cross", "adam", "")
    "[in]\ntype = input\ninput_shape = 1:4:3\n\n"
    "[l1]\ntype = lstm\nunit = 3\nreturn_sequences = true\ndropout_rate = 0.2\n\n"
    "[l2]\ntype = lstm\nunit = 2\nbidirectional = true\nintegrate_bias = true\n"
    "trainable = false\n\n"
    "[h0]\ntype = fully_connected\nunit = 2\ninput_layers = l2\n\n"
    "[c0]\ntype = fully_connected\nunit = 2\ninput_layers = l2\n\n"
    "[cell]\ntype = lstmcell\nunit = 2\ninput_layers = l2, h0, c0\n\n"
    "[cat]\ntype = concat\naxis = 3\ninput_layers = cell(0), cell(1)\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\n",
    /* self-attention: multi_head_attention (two heads, causal, dropout)
     * reading one layer three times, then attention with and without a key,
     * and a LoRA head */
    HEAD("cross", "adam", "")
    "[in]\ntype = input\ninput_shape = 1:4:6\n\n"
    "[mha]\ntype = multi_head_attention\nnum_heads = 2\ncausal_mask = true\n"
    "dropout_rate = 0.2\ninput_layers = in, in, in\n\n"
    "[att]\ntype = attention\nscaled_dot_product = true\ninput_layers = mha, in, in\n\n"
    "[att2]\ntype = attention\ncausal_mask = true\ninput_layers = att, mha\n\n"
    "[flat]\ntype = flatten\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nlora_rank = 2\nlora_alpha = 4\n"
    "activation = softmax\n",
    /* the recurrent layers over a sequence: gru (dropout) into rnn */
    HEAD("mse", "adam", "")
    "[in]\ntype = input\ninput_shape = 1:4:3\n\n"
    "[g]\ntype = gru\nunit = 4\nreturn_sequences = true\ndropout_rate = 0.2\n\n"
    "[r]\ntype = rnn\nunit = 3\nintegrate_bias = true\n\n"
    "[out]\ntype = fully_connected\nunit = 2\n",
    /* the cells, one step each: the state from a fully connected layer */
    HEAD("cross", "sgd", "")
    "[in]\ntype = input\ninput_shape = 1:1:6\n\n"
    "[h0]\ntype = fully_connected\nunit = 4\ninput_layers = in\n\n"
    "[gc]\ntype = grucell\nunit = 4\nreset_after = false\ninput_layers = in, h0\n\n"
    "[rc]\ntype = rnncell\nunit = 4\ninput_layers = in, gc\n\n"
    "[out]\ntype = fully_connected\nunit = 3\nactivation = softmax\ninput_layers = rc\n",
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
