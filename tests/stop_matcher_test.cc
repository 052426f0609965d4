#include "engine/scheduler/stop_matcher.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(StopMatcher, HoldsBackPossiblePrefixes) {
  StopMatcher m({"END"});
  auto r = m.Push("abc E");
  EXPECT_EQ(r.text, "abc ");
  EXPECT_FALSE(r.stopped);
  r = m.Push("N");
  EXPECT_EQ(r.text, "");
  r = m.Push("Dxyz");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, ReleasesFalseStartsAndFlushes) {
  StopMatcher m({"END", "\n\n"});
  EXPECT_EQ(m.Push("E").text, "");
  EXPECT_EQ(m.Push("X").text, "EX");
  EXPECT_EQ(m.Push("a\n").text, "a");
  EXPECT_EQ(m.Flush(), "\n");
}

TEST(StopMatcher, EarliestMatchWinsAndIncludeOption) {
  StopMatcher m({"cd", "bc"});
  auto r = m.Push("abcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  StopMatcher inc({"cd"}, /*include_stop=*/true);
  EXPECT_EQ(inc.Push("abcde").text, "abcd");
}

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("hello").text, "hello");
  EXPECT_EQ(m.Flush(), "");
}

}  // namespace
}  // namespace tessera
