// Holds back generated text that could still turn into a stop string, and
// finds the first stop string once it is complete. Text before a match is
// released; the match and anything after it are dropped.
#pragma once

#include <string>
#include <vector>

namespace tessera {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings, bool include_stop = false);

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string matched; no more text follows
  };

  // Appends newly decoded text.
  Result Push(const std::string& text);
  // Releases whatever is held back (the stream ended for another reason).
  std::string Flush();

 private:
  // Bytes at the end of `pending_` that are a proper prefix of a stop string.
  size_t HeldBackLength() const;

  std::vector<std::string> stops_;
  bool include_stop_;
  std::string pending_;
};

}  // namespace tessera
