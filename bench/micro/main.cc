// tessera-microbench's entry point: takes --threads=N (else the
// TESSERA_BENCH_THREADS environment variable, else every core) before handing
// the remaining flags to Google Benchmark.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "bench/micro/bench_common.h"

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    constexpr const char* kFlag = "--threads=";
    if (i > 0 && std::strncmp(argv[i], kFlag, std::strlen(kFlag)) == 0) {
      tessera::bench::SetBenchThreads(std::atoi(argv[i] + std::strlen(kFlag)));
      continue;
    }
    rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  benchmark::AddCustomContext("tessera_threads",
                              std::to_string(tessera::bench::BenchThreads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
