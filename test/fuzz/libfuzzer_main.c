/* The libFuzzer entry point of one target: NNT_FUZZ_FN names its function
 * (test/fuzz/CMakeLists.txt builds one executable per target). */
#include "fuzz.h"

#ifndef NNT_FUZZ_FN
#error "define NNT_FUZZ_FN as one of the nnt_fuzz_* functions of fuzz.h"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  nnt_fuzz_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  NNT_FUZZ_FN(data, size);
  return 0;
}
