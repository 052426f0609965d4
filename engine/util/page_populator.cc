#include "engine/util/page_populator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "spdlog/spdlog.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack the name
#endif

namespace tessera {
namespace {

// Populating stops between chunks when asked to.
constexpr size_t kChunkBytes = size_t{32} << 20;

void Populate(const std::stop_token& stop, const std::vector<std::span<std::byte>>& ranges) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (const std::span<std::byte> range : ranges) {
    const auto begin = reinterpret_cast<uintptr_t>(range.data());
    uintptr_t at = (begin + page - 1) / page * page;
    const uintptr_t end = (begin + range.size()) / page * page;
    for (; at < end && !stop.stop_requested(); at += kChunkBytes) {
      const size_t len = std::min<uintptr_t>(kChunkBytes, end - at);
      if (madvise(reinterpret_cast<void*>(at), len, MADV_POPULATE_WRITE) != 0) {
        spdlog::debug("memory is not populated ahead of use: madvise(MADV_POPULATE_WRITE) failed");
        return;
      }
    }
  }
}

}  // namespace

PagePopulator::PagePopulator(std::vector<std::span<std::byte>> ranges)
    : thread_([ranges = std::move(ranges)](const std::stop_token& stop) { Populate(stop, ranges); }) {}

void PagePopulator::Wait() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera
