/* Stand-in for NNTrainer's test/include/nntrainer_test_util.h: the helpers
 * its Tizen C API tests use, written for this library (the original pulls
 * in NNTrainer's C++ internals). Each helper does what the tests expect of
 * it:
 *   - IniSection / IniWrapper / ScopedIni: build a small INI file from
 *     "key = value | key = value" strings, with "+" to add or override keys
 *     and "-key" to drop one; ScopedIni writes NAME.ini in the working
 *     directory and removes it when it goes out of scope.
 *   - getResPath: a resource file's path: $NNTRAINER_RESOURCE_PATH/FILE
 *     when that is set, else ./res/<bases>/FILE.
 *   - DataInformation, createTrainData, createValidData, getSample: a
 *     generator callback over the raw resource files (trainingSet.dat,
 *     valSet.dat: records of 62720 input floats and a 10-float one-hot
 *     label), visiting the samples in an order reshuffled each epoch and
 *     setting *last on the epoch's final sample, which it also fills.
 *   - nntrainer::Engine::Global().setWorkingDirectory(dir): changes the
 *     process's working directory to dir (NNTrainer resolves the INI's
 *     relative paths against its own working directory; this library
 *     resolves them against the INI's folder, which ScopedIni puts in the
 *     working directory).
 * Used only when NNTrainer's C API tests are built against this library
 * (docs/capi.md); not part of the library. */
#ifndef NNT_CAPI_SHIM_TEST_UTIL_H
#define NNT_CAPI_SHIM_TEST_UTIL_H

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nntrainer.h>

/* Tolerance of the tests' float comparisons. */
#define tolerance 1.0e-5

/* ml_train_model_get_summary's metric codes, which Tizen's public header
 * does not name (docs/capi.md). */
#define ML_TRAIN_SUMMARY_MODEL_TRAIN_LOSS 101
#define ML_TRAIN_SUMMARY_MODEL_VALID_LOSS 102
#define ML_TRAIN_SUMMARY_MODEL_VALID_ACCURACY 103

/* googletest's name for value-parameterized instantiation. */
#define GTEST_PARAMETER_TEST INSTANTIATE_TEST_SUITE_P

namespace nntrainer {

/* One [section] of an INI: its name and its keys in key order. */
class IniSection {
public:
  IniSection() = default;
  explicit IniSection(const std::string &name);
  /* entries: "key = value" pieces separated by '|'; a piece "-key" removes
   * the key. Throws std::invalid_argument on a piece that is neither. */
  IniSection(const std::string &name, const std::string &entries);

  IniSection &operator+=(const std::string &entries);
  IniSection operator+(const std::string &entries) const;
  IniSection &operator+=(const IniSection &rhs);
  IniSection operator+(const IniSection &rhs) const;

  const std::string &getName() const { return name; }
  void write(std::ostream &out) const;

private:
  std::string name;
  std::map<std::string, std::string> entry;
};

/* A named INI file made of sections, in order. */
class IniWrapper {
public:
  using Sections = std::vector<IniSection>;
  IniWrapper() = default;
  IniWrapper(const std::string &name, const Sections &sections = {});

  std::string getIniName() const { return name + ".ini"; }
  std::string getName() const { return name; }
  /* Write the file (replacing one of that name); throws std::runtime_error. */
  void save_ini() const;
  void erase_ini() const noexcept;

private:
  std::string name;
  Sections sections;
};

/* NNTrainer's global engine, reduced to the one call the tests make. */
class Engine {
public:
  static Engine &Global();
  /* chdir(dir); throws std::invalid_argument when that fails. */
  void setWorkingDirectory(const std::string &dir);
};

} /* namespace nntrainer */

/* Writes its INI when made, removes it when destroyed. */
class ScopedIni {
public:
  explicit ScopedIni(const nntrainer::IniWrapper &ini);
  ScopedIni(const std::string &name, const nntrainer::IniWrapper::Sections &sections);
  ~ScopedIni();
  ScopedIni(const ScopedIni &) = delete;
  ScopedIni &operator=(const ScopedIni &) = delete;
  std::string getIniName() { return ini.getIniName(); }

private:
  nntrainer::IniWrapper ini;
};

/* The user data of getSample: one raw resource file and where the epoch is. */
class DataInformation {
public:
  /* Throws std::invalid_argument when the file cannot be read. */
  DataInformation(unsigned int num_samples, const std::string &filename);
  unsigned int count;       /* samples given in this epoch */
  unsigned int num_samples; /* samples in the file */
  std::ifstream file;
  std::vector<unsigned int> order; /* this epoch's sample order */
  unsigned long long state;        /* the shuffling generator's state */
};

DataInformation createTrainData(); /* over trainingSet.dat */
DataInformation createValidData(); /* over valSet.dat */

/* ml_train_datagen_cb over a DataInformation (user_data). */
int getSample(float **outVec, float **outLabel, bool *last, void *user_data);

const std::string getResPath(const std::string &filename,
                             const std::initializer_list<const char *> fallback_base = {});

#endif
