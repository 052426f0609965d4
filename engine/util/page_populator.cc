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

// Populating stops, and asks whether it should wait, between chunks: two
// huge pages, a few milliseconds of page zeroing.
constexpr size_t kChunkBytes = size_t{4} << 20;

// Waits while busy() says so; false when a stop was asked for meanwhile.
bool WaitUntilIdle(const std::stop_token& stop, const std::function<bool()>& busy) {
  while (!stop.stop_requested() && busy && busy()) {
    std::this_thread::sleep_for(PagePopulator::kIdleWait);
  }
  return !stop.stop_requested();
}

// The ranges' first chunks, then their second ones, and so on: the KV
// cache hands out its lowest blocks first, so every layer's first blocks
// are resident soonest.
void Populate(const std::stop_token& stop, const std::vector<std::span<std::byte>>& ranges,
              const std::function<bool()>& busy) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  std::vector<std::pair<uintptr_t, uintptr_t>> left;  // [at, end) of each range
  for (const std::span<std::byte> range : ranges) {
    const auto begin = reinterpret_cast<uintptr_t>(range.data());
    const uintptr_t at = (begin + page - 1) / page * page;
    const uintptr_t end = (begin + range.size()) / page * page;
    if (at < end) left.emplace_back(at, end);
  }
  for (bool more = true; more;) {
    more = false;
    for (auto& [at, end] : left) {
      if (at >= end) continue;
      if (!WaitUntilIdle(stop, busy)) return;
      const size_t len = std::min<uintptr_t>(kChunkBytes, end - at);
      if (madvise(reinterpret_cast<void*>(at), len, MADV_POPULATE_WRITE) != 0) {
        spdlog::debug("memory is not populated ahead of use: madvise(MADV_POPULATE_WRITE) failed");
        return;
      }
      at += len;
      more = more || at < end;
    }
  }
}

}  // namespace

PagePopulator::PagePopulator(std::vector<std::span<std::byte>> ranges,
                             std::function<bool()> busy)
    : thread_([ranges = std::move(ranges), busy = std::move(busy)](const std::stop_token& stop) {
        Populate(stop, ranges, busy);
      }) {}

void PagePopulator::Wait() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera
