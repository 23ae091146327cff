// Shared by the fuzz targets (docs/fuzzing.md): FUZZ_CHECK(cond) aborts with the condition's text
// when a property that must hold for every input does not, so libFuzzer keeps the input as a
// crash. Anything that throws out of LLVMFuzzerTestOneInput is a crash as well.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
