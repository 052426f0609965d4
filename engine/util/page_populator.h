// Faults in the pages of large buffers from a background thread, without
// changing their contents (madvise MADV_POPULATE_WRITE, Linux 5.14 and
// later), so that the engine's first writes into a lazily backed buffer (the
// KV cache, whose blocks are handed out over the server's first minutes) do
// not pay for the kernel zeroing pages inside an engine step. The engine may
// write the same memory meanwhile: populating never writes data. Where the
// kernel lacks the advice, nothing happens and pages fault in on first use
// as before. The destructor stops between chunks and joins, so the object
// must be destroyed before the memory it covers.
//
// Populating takes a core and, under some hypervisors, seconds for a
// gigabyte; the engine's first steps would share the two cores of a small
// machine with it. So it can yield: between chunks it asks `busy`, and
// while that says yes it waits (kIdleWait at a time) and asks again. Under
// steady load it may never finish, and pages then fault in on first use.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <thread>
#include <vector>

namespace tessera {

class PagePopulator {
 public:
  // How long populating waits before it asks `busy` again.
  static constexpr std::chrono::milliseconds kIdleWait{20};

  PagePopulator() = default;
  // Starts populating ranges (each rounded inward to whole pages). busy,
  // when given, is called from the populating thread only.
  explicit PagePopulator(std::vector<std::span<std::byte>> ranges,
                         std::function<bool()> busy = nullptr);
  PagePopulator(PagePopulator&&) = default;
  PagePopulator& operator=(PagePopulator&&) = default;
  ~PagePopulator() = default;  // std::jthread: requests stop, then joins

  // Blocks until every range is populated (or populating gave up).
  void Wait();

 private:
  std::jthread thread_;
};

}  // namespace tessera
