// nntrainer-xcheck: a small program linked against NNTrainer (the C++
// project nntrainer reimplements) to move weight files between the two.
//
//   xcheck train INI OUT_BIN [--save-after AFTER_BIN]
//     Loads INI (its [train_set] path is relative to the INI's folder: the
//     program works from there), sets save_path = OUT_BIN, trains for the
//     INI's epochs. NNTrainer writes OUT_BIN at the end of every epoch.
//     --save-after also saves with save() once train() has returned.
//   xcheck load INI BIN [--resave OUT_BIN] [--resave-idle OUT_BIN]
//     Builds the model from INI for training, loads BIN, allocates the
//     training tensors (as train() does: NNTrainer writes a weight's moments
//     only while its gradient is allocated), prints a manifest of what was
//     read: per weight (graph order) its name, shape, offset, sum and
//     first values, whether its layer is trainable and the weight has a
//     gradient, and how many optimizer variables NNTrainer saves for it; the
//     "adam" tag, the moments and the epoch/iteration counters with their
//     offsets; the size such a file has, and the real size. --resave writes
//     the loaded model again with NNTrainer's save(), for a byte comparison;
//     --resave-idle saves before the training tensors are allocated, as an
//     application's save() after train() returns does (no moments follow
//     the "adam" tag then).
//
// The manifest format is described in test/golden/README.md. The program
// reads RunLayerContext through forEachLayer, so it needs NNTrainer's
// internal headers and the compile definitions of its build.
#include <model.h>

#include <layer_context.h>
#include <layer_node.h>
#include <tensor.h>

#include <iniparser.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

std::string abs_path(const std::string &p) {
  if (!p.empty() && p[0] == '/')
    return p;
  char buf[4096];
  if (!getcwd(buf, sizeof buf))
    return p;
  return std::string(buf) + "/" + p;
}

// Work from the INI's folder; returns the INI's base name.
std::string enter_ini_dir(const std::string &ini) {
  size_t slash = ini.find_last_of('/');
  if (slash == std::string::npos)
    return ini;
  std::string dir = ini.substr(0, slash);
  if (chdir(dir.c_str()) != 0) {
    perror(dir.c_str());
    exit(2);
  }
  return ini.substr(slash + 1);
}

std::string optimizer_type(const std::string &ini) {
  dictionary *d = iniparser_load(ini.c_str());
  if (!d)
    return "";
  std::string t = iniparser_getstring(d, "optimizer:type", "");
  iniparser_freedict(d);
  for (auto &c : t)
    c = (char)tolower((unsigned char)c);
  return t;
}

std::string dim_str(const ml::train::TensorDim &d) {
  std::ostringstream s;
  s << d.batch() << ':' << d.channel() << ':' << d.height() << ':' << d.width();
  return s.str();
}

double sum_of(const nntrainer::Tensor &t) {
  const float *p = t.getData<float>();
  double s = 0;
  for (size_t i = 0; i < t.size(); i++)
    s += p[i];
  return s;
}

std::unique_ptr<ml::train::Model> build(const std::string &ini_name) {
  auto model = ml::train::createModel(ml::train::ModelType::NEURAL_NET);
  if (model->loadFromConfig(ini_name) != 0) {
    std::cerr << "xcheck: NNTrainer cannot load " << ini_name << "\n";
    exit(1);
  }
  return model;
}

int cmd_train(const std::string &ini, const std::string &out,
              const std::string &after) {
  std::string out_abs = abs_path(out);
  std::string after_abs = after.empty() ? "" : abs_path(after);
  std::string name = enter_ini_dir(ini);
  auto model = build(name);
  model->setProperty({"save_path=" + out_abs});
  if (model->compile() || model->initialize()) {
    std::cerr << "xcheck: compile/initialize failed\n";
    return 1;
  }
  int rc = model->train();
  std::cout << "\ntrain: rc " << rc << " epoch " << model->getCurrentEpoch()
            << " loss " << model->getTrainingLoss() << "\n";
  if (rc == 0 && !after_abs.empty())
    model->save(after_abs, ml::train::ModelFormat::MODEL_FORMAT_BIN);
  return rc == 0 ? 0 : 1;
}

int cmd_load(const std::string &ini, const std::string &bin,
             const std::string &resave, const std::string &resave_idle) {
  std::string bin_abs = abs_path(bin);
  std::string resave_abs = resave.empty() ? "" : abs_path(resave);
  std::string idle_abs = resave_idle.empty() ? "" : abs_path(resave_idle);
  std::string name = enter_ini_dir(ini);
  std::string opt = optimizer_type(name);
  auto model = build(name);
  if (model->compile() || model->initialize()) {
    std::cerr << "xcheck: compile/initialize failed\n";
    return 1;
  }
  // NNTrainer reports a short trailer on std::cerr only and goes on.
  std::ostringstream err;
  std::streambuf *old = std::cerr.rdbuf(err.rdbuf());
  try {
    model->load(bin_abs);
  } catch (std::exception &ex) {
    std::cerr.rdbuf(old);
    std::cout << "loaded 0 " << ex.what() << "\n";
    return 1;
  }
  std::cerr.rdbuf(old);
  if (!idle_abs.empty())
    model->save(idle_abs, ml::train::ModelFormat::MODEL_FORMAT_BIN);
  model->allocate(ml::train::ExecutionMode::TRAIN);
  bool trailer_ok = err.str().find("failed to read additional data") ==
                    std::string::npos;

  struct stat st;
  long real_size = stat(bin_abs.c_str(), &st) == 0 ? (long)st.st_size : -1;

  std::vector<std::string> weights, moments;
  size_t off = 0;
  // first pass: weights (what LayerNode::save writes with opt_var = false)
  model->forEachLayer([&](ml::train::Layer &l, nntrainer::RunLayerContext &rc,
                          void *) {
    auto &node = static_cast<nntrainer::LayerNode &>(l);
    bool trainable = node.getTrainable();
    for (unsigned i = 0; i < rc.getNumWeights(); i++) {
      if (!rc.isGradientFirstAccess(i))
        continue;
      const nntrainer::Tensor &w = rc.getWeight(i);
      bool grad = rc.weightHasGradient(i);
      unsigned nvar = (trainable && grad) ? rc.getNumWeightOptVar(i) : 0;
      std::ostringstream s;
      s.precision(17);
      s << "weight " << rc.getWeightName(i) << ' ' << dim_str(w.getDim())
        << " offset " << off << " floats " << w.size() << " sum "
        << sum_of(w) << " trainable " << trainable << " grad " << grad
        << " optvars " << nvar << " first";
      s.precision(9);
      for (size_t k = 0; k < w.size() && k < 4; k++)
        s << ' ' << w.getData<float>()[k];
      weights.push_back(s.str());
      off += w.size() * sizeof(float);
    }
  });
  std::string tag_line;
  if (opt == "adam") {
    std::ostringstream s;
    s << "tag adam offset " << off;
    tag_line = s.str();
    off += 4;
    // second pass: optimizer variables (LayerNode::save with opt_var = true)
    model->forEachLayer([&](ml::train::Layer &l,
                            nntrainer::RunLayerContext &rc, void *) {
      auto &node = static_cast<nntrainer::LayerNode &>(l);
      for (unsigned i = 0; i < rc.getNumWeights(); i++) {
        if (!rc.isGradientFirstAccess(i) || !node.getTrainable() ||
            !rc.weightHasGradient(i))
          continue;
        for (unsigned j = 0; j < rc.getNumWeightOptVar(i); j++) {
          const nntrainer::Tensor &v = rc.getWeightOptVar(i, j);
          std::ostringstream m;
          m.precision(17);
          m << "moment " << rc.getWeightName(i) << ' ' << j << " offset "
            << off << " floats " << v.size() << " sum " << sum_of(v);
          moments.push_back(m.str());
          off += v.size() * sizeof(float);
        }
      }
    });
  }
  // counters: unsigned int epoch_idx, iter (training mode only)
  size_t counters_off = off;
  off += 2 * sizeof(unsigned int);
  unsigned epoch = 0, iter = 0;
  if (real_size >= (long)off) {
    std::ifstream f(bin_abs, std::ios::binary);
    f.seekg((std::streamoff)counters_off);
    f.read((char *)&epoch, sizeof epoch);
    f.read((char *)&iter, sizeof iter);
  }

  std::string base = bin.substr(bin.find_last_of('/') + 1);
  std::cout << "# NNTrainer's reading of " << base << " (generated by "
            << "benchmarks/nntrainer-xcheck; do not edit)\n";
  std::cout << "loaded 1\n";
  std::cout << "trailer_ok " << trailer_ok << "\n";
  std::cout << "optimizer " << opt << "\n";
  for (auto &w : weights)
    std::cout << w << "\n";
  if (!tag_line.empty())
    std::cout << tag_line << "\n";
  for (auto &m : moments)
    std::cout << m << "\n";
  std::cout << "counters offset " << counters_off << " epoch " << epoch
            << " iteration " << iter << " current_epoch "
            << model->getCurrentEpoch() << "\n";
  std::cout << "expected_size " << off << "\n";
  std::cout << "file_size " << real_size << "\n";

  if (!resave_abs.empty())
    model->save(resave_abs, ml::train::ModelFormat::MODEL_FORMAT_BIN);
  return (trailer_ok && real_size == (long)off) ? 0 : 3;
}

} // namespace

int main(int argc, char **argv) {
  if (argc >= 4 && !strcmp(argv[1], "train"))
    return cmd_train(argv[2], argv[3],
                     argc >= 6 && !strcmp(argv[4], "--save-after") ? argv[5]
                                                                   : "");
  if (argc >= 4 && !strcmp(argv[1], "load")) {
    std::string resave, idle;
    for (int i = 4; i + 1 < argc; i += 2) {
      if (!strcmp(argv[i], "--resave"))
        resave = argv[i + 1];
      else if (!strcmp(argv[i], "--resave-idle"))
        idle = argv[i + 1];
      else
        break;
    }
    return cmd_load(argv[2], argv[3], resave, idle);
  }
  std::cerr << "usage: xcheck train INI OUT_BIN [--save-after AFTER_BIN]\n"
               "       xcheck load INI BIN [--resave OUT_BIN] "
               "[--resave-idle OUT_BIN]\n";
  return 2;
}
