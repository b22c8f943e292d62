/* The helpers declared in nntrainer_test_util.h (this folder's stand-in for
 * NNTrainer's test utilities), for building NNTrainer's Tizen C API tests
 * against this library. */
#include "nntrainer_test_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <unistd.h>

namespace {

constexpr unsigned kFeatures = 62720; /* input floats per record */
constexpr unsigned kClasses = 10;     /* label floats per record */
constexpr std::streamoff kRecordBytes = (kFeatures + kClasses) * sizeof(float);

std::string without_spaces(const std::string &s) {
  std::string r;
  for (char c : s)
    if (c != ' ' && c != '\t')
      r += c;
  return r;
}

/* Split s at every '|'. */
std::vector<std::string> pieces(const std::string &s) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    size_t bar = s.find('|', at);
    out.push_back(s.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos)
      return out;
    at = bar + 1;
  }
}

/* A small xorshift generator for the sample order: the same every run. */
unsigned next_random(unsigned long long &s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return static_cast<unsigned>(s >> 32);
}

void shuffle(std::vector<unsigned int> &v, unsigned long long &state) {
  for (size_t i = v.size(); i > 1; i--) {
    size_t j = next_random(state) % i;
    std::swap(v[i - 1], v[j]);
  }
}

unsigned samples_in(const std::string &path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f.good())
    throw std::invalid_argument("cannot read " + path);
  return static_cast<unsigned>(static_cast<std::streamoff>(f.tellg()) / kRecordBytes);
}

} /* namespace */

namespace nntrainer {

IniSection::IniSection(const std::string &name_) : name(name_) {}

IniSection::IniSection(const std::string &name_, const std::string &entries) : name(name_) {
  *this += entries;
}

IniSection &IniSection::operator+=(const std::string &entries) {
  for (const std::string &raw : pieces(entries)) {
    std::string p = without_spaces(raw);
    if (p.empty())
      continue;
    if (p[0] == '-') {
      entry.erase(p.substr(1));
      continue;
    }
    size_t eq = p.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == p.size() ||
        p.find('=', eq + 1) != std::string::npos)
      throw std::invalid_argument("IniSection: '" + raw + "' is not key = value");
    entry[p.substr(0, eq)] = p.substr(eq + 1);
  }
  return *this;
}

IniSection IniSection::operator+(const std::string &entries) const {
  IniSection r(*this);
  r += entries;
  return r;
}

IniSection &IniSection::operator+=(const IniSection &rhs) {
  for (const auto &kv : rhs.entry)
    entry[kv.first] = kv.second;
  return *this;
}

IniSection IniSection::operator+(const IniSection &rhs) const {
  IniSection r(*this);
  r += rhs;
  return r;
}

void IniSection::write(std::ostream &out) const {
  out << '[' << name << "]\n";
  for (const auto &kv : entry)
    out << kv.first << " = " << kv.second << '\n';
}

IniWrapper::IniWrapper(const std::string &name_, const Sections &sections_) :
  name(name_), sections(sections_) {}

void IniWrapper::save_ini() const {
  std::ofstream out(getIniName(), std::ios::trunc);
  if (!out.good())
    throw std::runtime_error("cannot write " + getIniName());
  for (const IniSection &s : sections) {
    s.write(out);
    out << '\n';
  }
  if (!out.good())
    throw std::runtime_error("cannot write " + getIniName());
}

void IniWrapper::erase_ini() const noexcept {
  if (std::remove(getIniName().c_str()) != 0)
    std::cerr << "cannot remove " << getIniName() << ": " << std::strerror(errno) << '\n';
}

Engine &Engine::Global() {
  static Engine engine;
  return engine;
}

void Engine::setWorkingDirectory(const std::string &dir) {
  if (chdir(dir.c_str()) != 0)
    throw std::invalid_argument("cannot change to " + dir + ": " + std::strerror(errno));
}

} /* namespace nntrainer */

ScopedIni::ScopedIni(const nntrainer::IniWrapper &ini_) : ini(ini_) { ini.save_ini(); }

ScopedIni::ScopedIni(const std::string &name, const nntrainer::IniWrapper::Sections &sections) :
  ini(name, sections) {
  ini.save_ini();
}

ScopedIni::~ScopedIni() { ini.erase_ini(); }

DataInformation::DataInformation(unsigned int num_samples_, const std::string &filename) :
  count(0), num_samples(num_samples_), file(filename, std::ios::binary), order(num_samples_),
  state(0x9e3779b97f4a7c15ULL) {
  if (!file.good())
    throw std::invalid_argument("cannot read " + filename);
  for (unsigned i = 0; i < num_samples; i++)
    order[i] = i;
  shuffle(order, state);
}

DataInformation createTrainData() {
  std::string path = getResPath("trainingSet.dat", {"test"});
  return DataInformation(samples_in(path), path);
}

DataInformation createValidData() {
  std::string path = getResPath("valSet.dat", {"test"});
  return DataInformation(samples_in(path), path);
}

int getSample(float **outVec, float **outLabel, bool *last, void *user_data) {
  auto *d = static_cast<DataInformation *>(user_data);
  if (!d || !d->num_samples)
    return ML_ERROR_INVALID_PARAMETER;
  d->file.clear();
  d->file.seekg(static_cast<std::streamoff>(d->order[d->count]) * kRecordBytes);
  d->file.read(reinterpret_cast<char *>(outVec[0]), kFeatures * sizeof(float));
  d->file.read(reinterpret_cast<char *>(outLabel[0]), kClasses * sizeof(float));
  if (!d->file.good())
    return ML_ERROR_IO_ERROR;
  if (++d->count < d->num_samples) {
    *last = false;
  } else {
    *last = true;
    d->count = 0;
    shuffle(d->order, d->state);
  }
  return ML_ERROR_NONE;
}

const std::string getResPath(const std::string &filename,
                             const std::initializer_list<const char *> fallback_base) {
  const char *prefix = std::getenv("NNTRAINER_RESOURCE_PATH");
  if (prefix && *prefix)
    return std::string(prefix) + "/" + filename;
  char cwd[4096];
  std::string path = getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string(".");
  path += "/res";
  for (const char *base : fallback_base)
    path += std::string("/") + base;
  return path + "/" + filename;
}
