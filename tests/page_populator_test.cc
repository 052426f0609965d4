// PagePopulator: pages become resident without their contents changing.
#include "engine/util/page_populator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

namespace tessera {
namespace {

// An anonymous private mapping, unmapped at the end of the test.
struct Mapping {
  explicit Mapping(size_t bytes) : size(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~Mapping() {
    if (data != nullptr) munmap(data, size);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  size_t size;
  std::byte* data;
};

size_t ResidentPages(const Mapping& m) {
  const size_t page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> in(m.size / page);
  if (mincore(m.data, m.size, in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

bool KernelPopulates() {
  Mapping probe(sysconf(_SC_PAGESIZE));
  return probe.data != nullptr && madvise(probe.data, probe.size, 23 /* MADV_POPULATE_WRITE */) == 0;
}

TEST(PagePopulator, MakesPagesResidentAndKeepsTheirContents) {
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel lacks MADV_POPULATE_WRITE";
  const size_t page = sysconf(_SC_PAGESIZE);
  Mapping m(40 << 20);  // more than one of the populator's chunks
  ASSERT_NE(m.data, nullptr);
  // Two pages written before: their bytes must survive.
  std::memset(m.data + 3 * page, 0x5A, page);
  std::memset(m.data + m.size - page, 0xA5, page);
  ASSERT_LT(ResidentPages(m), m.size / page / 2);
  PagePopulator populator({std::span<std::byte>(m.data, m.size)});
  populator.Wait();
  EXPECT_EQ(ResidentPages(m), m.size / page);
  EXPECT_EQ(m.data[3 * page + 17], std::byte{0x5A});
  EXPECT_EQ(m.data[m.size - 1], std::byte{0xA5});
  EXPECT_EQ(m.data[5 * page], std::byte{0});
}

// While `busy` says so, nothing is populated; once it stops, everything is.
TEST(PagePopulator, WaitsWhileBusy) {
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel lacks MADV_POPULATE_WRITE";
  const size_t page = sysconf(_SC_PAGESIZE);
  Mapping m(16 << 20);
  ASSERT_NE(m.data, nullptr);
  std::atomic<bool> busy{true};
  std::atomic<int> asked{0};
  PagePopulator populator({std::span<std::byte>(m.data, m.size)}, [&] {
    asked.fetch_add(1);
    return busy.load();
  });
  std::this_thread::sleep_for(10 * PagePopulator::kIdleWait);
  EXPECT_EQ(ResidentPages(m), 0u);
  EXPECT_GE(asked.load(), 2);  // it asks again after each wait
  busy = false;
  populator.Wait();
  EXPECT_EQ(ResidentPages(m), m.size / page);
}

// A populator that waits on a busy engine stops promptly when destroyed.
TEST(PagePopulator, StopsWhileWaiting) {
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel lacks MADV_POPULATE_WRITE";
  Mapping m(16 << 20);
  ASSERT_NE(m.data, nullptr);
  const auto start = std::chrono::steady_clock::now();
  {
    PagePopulator populator({std::span<std::byte>(m.data, m.size)}, [] { return true; });
    std::this_thread::sleep_for(3 * PagePopulator::kIdleWait);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(ResidentPages(m), 0u);
}

TEST(PagePopulator, RoundsRangesInwardToWholePages) {
  if (!KernelPopulates()) GTEST_SKIP() << "this kernel lacks MADV_POPULATE_WRITE";
  const size_t page = sysconf(_SC_PAGESIZE);
  Mapping m(8 * page);
  ASSERT_NE(m.data, nullptr);
  madvise(m.data, m.size, MADV_NOHUGEPAGE);
  // From the middle of page 1 to the middle of page 6: pages 2 to 5 only.
  PagePopulator populator({std::span<std::byte>(m.data + page + page / 2, 5 * page)});
  populator.Wait();
  std::vector<unsigned char> in(8);
  ASSERT_EQ(mincore(m.data, m.size, in.data()), 0);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(in[i] & 1, i >= 2 && i <= 5 ? 1 : 0) << "page " << i;
}

}  // namespace
}  // namespace tessera
