// Helpers for tests that drive the engine directly.
#pragma once

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"

namespace tessera::testing {

inline std::string SourcePath(const std::string& relative) {
  return std::string(TESSERA_SOURCE_DIR) + "/" + relative;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Collects one request's events; Wait() blocks until OnFinish.
class CollectingSink : public GenerationSink {
 public:
  void OnTokens(TokenEvent event) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : event.tokens) token_ids.push_back(t.token_id);
    for (auto& t : event.tokens) tokens.push_back(std::move(t));
    text += event.text;
    ++num_events;
  }
  void OnFinish(FinishEvent event) override {
    std::lock_guard<std::mutex> lock(mu_);
    text += event.text;
    finish = std::move(event);
    done = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done; });
  }

  std::vector<int32_t> token_ids;
  std::vector<GeneratedToken> tokens;
  std::string text;
  int num_events = 0;
  FinishEvent finish;
  bool done = false;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
};

inline GenerationRequest GreedyRequest(uint64_t id, std::vector<int32_t> prompt,
                                       int32_t max_tokens) {
  GenerationRequest r;
  r.id = id;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stopping.max_tokens = max_tokens;
  return r;
}

}  // namespace tessera::testing
