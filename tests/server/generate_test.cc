// Generation over loopback against the real engine on stories260K.
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/test_util.h"

namespace tessera::server {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;
using testing::Connect;
using testing::TextRequest;

constexpr char kPrompt[] = "Once upon a time";

using GenerateTest = testing::SharedServerTest;

TEST_F(GenerateTest, GreedyStreamMatchesGoldenReference) {
  testing::StreamResult result = testing::Generate(*stub_, TextRequest(kPrompt, 64));
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_FALSE(result.messages.empty());

  EXPECT_THAT(result.messages.front().prompt_token_ids(), ElementsAre(1, 403, 407, 261, 378));
  for (size_t i = 1; i < result.messages.size(); ++i) {
    EXPECT_EQ(result.messages[i].prompt_token_ids_size(), 0) << "message " << i;
  }
  std::vector<int32_t> ids = result.TokenIds();
  ASSERT_EQ(ids.size(), 64u);
  EXPECT_THAT(std::vector<int32_t>(ids.begin(), ids.begin() + 16),
              ElementsAreArray({432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401,
                                396, 267, 337}));
  EXPECT_THAT(result.Text(), StartsWith(", there was a little girl named Lily."));

  const v1::GenerateResponse& last = result.messages.back();
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(last.usage().prompt_tokens(), 5);
  EXPECT_EQ(last.usage().completion_tokens(), 64);
  EXPECT_GT(last.timings().total_seconds(), 0.0);
  EXPECT_GE(last.timings().total_seconds(), last.timings().time_to_first_token_seconds());
  for (size_t i = 0; i + 1 < result.messages.size(); ++i) {
    EXPECT_EQ(result.messages[i].finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
    EXPECT_FALSE(result.messages[i].has_usage());
  }
}

TEST_F(GenerateTest, CompleteMatchesGenerate) {
  v1::GenerateRequest request = TextRequest(kPrompt, 64);
  testing::StreamResult stream = testing::Generate(*stub_, request);
  ASSERT_TRUE(stream.status.ok()) << stream.status.error_message();
  v1::CompleteResponse complete;
  grpc::Status status = testing::Complete(*stub_, request, &complete);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(complete.token_ids(), ElementsAreArray(stream.TokenIds()));
  EXPECT_EQ(complete.text(), stream.Text());
  EXPECT_THAT(complete.prompt_token_ids(), ElementsAre(1, 403, 407, 261, 378));
  EXPECT_EQ(complete.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(complete.usage().prompt_tokens(), 5);
  EXPECT_EQ(complete.usage().completion_tokens(), 64);
}

TEST_F(GenerateTest, TokenIdPromptIsUsedAsGiven) {
  v1::GenerateRequest by_text = TextRequest(kPrompt, 16);
  v1::GenerateRequest by_ids = by_text;
  for (int id : {1, 403, 407, 261, 378}) by_ids.mutable_token_ids()->add_ids(id);
  v1::CompleteResponse a, b;
  ASSERT_TRUE(testing::Complete(*stub_, by_text, &a).ok());
  ASSERT_TRUE(testing::Complete(*stub_, by_ids, &b).ok());
  EXPECT_THAT(b.prompt_token_ids(), ElementsAre(1, 403, 407, 261, 378));
  EXPECT_THAT(b.token_ids(), ElementsAreArray(a.token_ids()));
}

TEST_F(GenerateTest, SeededSamplingIsReproducible) {
  v1::GenerateRequest request = TextRequest(kPrompt, 48);
  request.mutable_sampling()->set_temperature(1.0f);
  request.mutable_sampling()->set_top_p(0.9f);
  request.mutable_sampling()->set_seed(1234);
  v1::CompleteResponse first, second;
  ASSERT_TRUE(testing::Complete(*stub_, request, &first).ok());
  ASSERT_TRUE(testing::Complete(*stub_, request, &second).ok());
  EXPECT_THAT(second.token_ids(), ElementsAreArray(first.token_ids()));
  EXPECT_EQ(second.text(), first.text());
  EXPECT_GT(first.token_ids_size(), 0);
}

TEST_F(GenerateTest, StopStringEndsWithStopAndIsExcluded) {
  v1::GenerateRequest request = TextRequest(kPrompt, 64);
  request.mutable_stopping()->add_stop("Lily");
  testing::StreamResult result = testing::Generate(*stub_, request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.messages.back().finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(result.Text(), ", there was a little girl named ");
  EXPECT_LT(result.messages.back().usage().completion_tokens(), 64);
}

TEST_F(GenerateTest, StopTokenIdEndsGeneration) {
  // The fourth greedy token is 261; generation stops right after it.
  v1::GenerateRequest request = TextRequest(kPrompt, 64);
  request.mutable_stopping()->add_stop_token_ids(261);
  v1::CompleteResponse response;
  ASSERT_TRUE(testing::Complete(*stub_, request, &response).ok());
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_THAT(response.token_ids(), ElementsAre(432, 383, 286, 261));
  EXPECT_EQ(response.usage().completion_tokens(), 4);
}

TEST_F(GenerateTest, LogprobsHaveOneEntryPerTokenInOrder) {
  v1::GenerateRequest request = TextRequest(kPrompt, 12);
  request.set_logprobs(true);
  request.set_top_logprobs(5);
  testing::StreamResult result = testing::Generate(*stub_, request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.LogprobCount(), 12);
  for (const v1::GenerateResponse& message : result.messages) {
    ASSERT_EQ(message.logprobs_size(), message.token_ids_size());
    for (int i = 0; i < message.logprobs_size(); ++i) {
      const v1::TokenLogprobs& entry = message.logprobs(i);
      EXPECT_EQ(entry.token_id(), message.token_ids(i));
      EXPECT_LE(entry.logprob(), 0.0f);
      ASSERT_EQ(entry.top_size(), 5);
      // Greedy: the chosen token is the most likely one.
      EXPECT_EQ(entry.top(0).token_id(), entry.token_id());
      EXPECT_FLOAT_EQ(entry.top(0).logprob(), entry.logprob());
      for (int k = 1; k < entry.top_size(); ++k) {
        EXPECT_GE(entry.top(k - 1).logprob(), entry.top(k).logprob());
      }
    }
  }
  // Without logprobs requested there are none.
  testing::StreamResult plain = testing::Generate(*stub_, TextRequest(kPrompt, 4));
  EXPECT_EQ(plain.LogprobCount(), 0);
}

TEST_F(GenerateTest, TokenizeDetokenizeRoundTrip) {
  grpc::ClientContext tokenize_context;
  v1::TokenizeRequest tokenize;
  tokenize.set_text(kPrompt);
  v1::TokenizeResponse tokens;
  ASSERT_TRUE(stub_->Tokenize(&tokenize_context, tokenize, &tokens).ok());
  EXPECT_THAT(tokens.token_ids(), ElementsAre(1, 403, 407, 261, 378));
  EXPECT_EQ(tokens.pieces_size(), tokens.token_ids_size());

  grpc::ClientContext no_bos_context;
  tokenize.set_add_bos(false);
  v1::TokenizeResponse no_bos;
  ASSERT_TRUE(stub_->Tokenize(&no_bos_context, tokenize, &no_bos).ok());
  EXPECT_THAT(no_bos.token_ids(), ElementsAre(403, 407, 261, 378));

  grpc::ClientContext detokenize_context;
  v1::DetokenizeRequest detokenize;
  *detokenize.mutable_token_ids() = tokens.token_ids();
  v1::DetokenizeResponse text;
  ASSERT_TRUE(stub_->Detokenize(&detokenize_context, detokenize, &text).ok());
  EXPECT_EQ(text.text(), kPrompt);
}

TEST_F(GenerateTest, ModelInfoDescribesStories260K) {
  grpc::ClientContext context;
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.architecture(), "llama");
  EXPECT_EQ(info.tokenizer(), "llama");
  EXPECT_EQ(info.vocab_size(), 512);
  EXPECT_EQ(info.context_length(), 2048);
  EXPECT_EQ(info.num_layers(), 5);
  EXPECT_EQ(info.num_heads(), 8);
  EXPECT_EQ(info.num_kv_heads(), 4);
  EXPECT_EQ(info.bos_token_id(), 1);
  EXPECT_EQ(info.eos_token_id(), 2);
  EXPECT_EQ(info.device(), "cpu");
  EXPECT_GT(info.num_parameters(), 0);
  EXPECT_FALSE(info.server_version().empty());
  EXPECT_FALSE(info.model_name().empty());
  EXPECT_EQ(info.model_format(), "gguf");
  // Plain RoPE with llama.cpp's default base, every layer over the whole context.
  EXPECT_EQ(info.rope_scaling(), "none");
  EXPECT_EQ(info.rope_freq_base(), 10000.0f);
  EXPECT_EQ(info.rope_scaling_factor(), 1.0f);
  EXPECT_EQ(info.sliding_window(), 0);
  EXPECT_EQ(info.sliding_window_layers_size(), 0);
  EXPECT_EQ(info.rope_freq_base_sliding(), 0.0f);
}

v1::GetModelInfoResponse InfoOf(const RandomModelSpec& spec, const std::string& tag) {
  ServerOptions options = testing::TestOptions();
  options.engine.model_path = tessera::testing::WriteTempModel(spec, tag);
  std::unique_ptr<Server> server = testing::StartServer(options);
  auto stub = v1::Inference::NewStub(Connect(server->port()));
  grpc::ClientContext context;
  v1::GetModelInfoResponse info;
  EXPECT_TRUE(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  return info;
}

// A small random model of `arch`: dim 64, 4 heads, ffn 128, 300 tokens;
// kv_heads 0 means as many as heads.
RandomModelSpec SmallSpec(const std::string& arch, int layers, int kv_heads) {
  RandomModelSpec spec;
  spec.arch = arch;
  spec.dim = 64;
  spec.layers = layers;
  spec.heads = 4;
  spec.kv_heads = kv_heads;
  spec.ffn = 128;
  spec.vocab_size = 300;
  return spec;
}

// Llama 3.1's frequency factors (rope_freqs.weight of factor 8, as
// tessera-make-model --rope-scaling llama3 writes them) and its base.
TEST(ModelInfoTest, ReportsLlama3RopeScaling) {
  RandomModelSpec spec = SmallSpec("llama", 2, 2);
  spec.rope_base = 500000.0f;
  spec.rope_scaling = "llama3";
  const v1::GetModelInfoResponse info = InfoOf(spec, "llama3-rope");
  EXPECT_EQ(info.rope_scaling(), "llama3");
  EXPECT_EQ(info.rope_freq_base(), 500000.0f);
  EXPECT_EQ(info.rope_scaling_factor(), 8.0f);
  EXPECT_EQ(info.sliding_window(), 0);
  EXPECT_EQ(info.sliding_window_layers_size(), 0);
}

// Gemma 3: five sliding-window layers in six, with their own base of 10000
// (llama.cpp's default for rope.freq_base_swa); the global layers use the
// model's base.
TEST(ModelInfoTest, ReportsGemma3SlidingLayers) {
  RandomModelSpec spec = SmallSpec("gemma3", 7, 1);
  spec.rope_base = 1000000.0f;
  spec.sliding_window = 64;
  const v1::GetModelInfoResponse info = InfoOf(spec, "gemma3-rope");
  EXPECT_EQ(info.architecture(), "gemma3");
  EXPECT_EQ(info.rope_scaling(), "none");
  EXPECT_EQ(info.rope_freq_base(), 1000000.0f);
  EXPECT_EQ(info.sliding_window(), 64);
  EXPECT_THAT(info.sliding_window_layers(), ElementsAre(0, 1, 2, 3, 4, 6));
  EXPECT_EQ(info.rope_freq_base_sliding(), 10000.0f);
}

// gpt2 has learned positions: no RoPE to report.
TEST(ModelInfoTest, ReportsNoRopeForGpt2) {
  RandomModelSpec spec = SmallSpec("gpt2", 1, 0);
  const v1::GetModelInfoResponse info = InfoOf(spec, "gpt2-rope");
  EXPECT_EQ(info.rope_scaling(), "");
  EXPECT_EQ(info.rope_freq_base(), 0.0f);
}

// A prompt sent again finds its full blocks in the prefix cache: the final
// message reports them, the tokens are the same, and GetModelInfo shows the
// cached blocks.
TEST_F(GenerateTest, RepeatedPromptReportsCachedTokens) {
  const std::string prompt =
      "Lily and Tom went to the park. They saw a big tree with red apples. Tom wanted to climb "
      "the tree, but Lily said";
  v1::GenerateRequest request = TextRequest(prompt, 16);
  request.set_priority(-3);  // accepted under fcfs, and ignored
  testing::StreamResult first = testing::Generate(*stub_, request);
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  testing::StreamResult second = testing::Generate(*stub_, request);
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  const int32_t prompt_tokens = second.messages.back().usage().prompt_tokens();
  ASSERT_GT(prompt_tokens, 32);
  EXPECT_EQ(second.messages.back().usage().cached_prompt_tokens(), (prompt_tokens - 1) / 16 * 16);
  EXPECT_EQ(second.TokenIds(), first.TokenIds());
  grpc::ClientContext context;
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_TRUE(info.prefix_caching());
  EXPECT_EQ(info.scheduling_policy(), "fcfs");
  EXPECT_GT(info.kv_cache_blocks(), 0);
  EXPECT_GE(info.kv_cache_cached_blocks(), 2);
  EXPECT_LE(info.kv_cache_cached_blocks(), info.kv_cache_blocks());
}

v1::GenerateRequest LongRequest() {
  v1::GenerateRequest request = TextRequest(kPrompt, 2000);
  request.mutable_stopping()->set_ignore_eos(true);
  return request;
}

TEST_F(GenerateTest, CancelMidStreamFreesTheRequest) {
  grpc::ClientContext context;
  context.set_deadline(testing::In(30s));
  auto reader = stub_->Generate(&context, LongRequest());
  v1::GenerateResponse message;
  ASSERT_TRUE(reader->Read(&message));
  context.TryCancel();
  int completion_tokens = 0;
  while (reader->Read(&message)) completion_tokens += message.token_ids_size();
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  EXPECT_TRUE(testing::WaitEngineIdle(*stub_));
}

TEST_F(GenerateTest, DeadlineExceededFreesTheRequest) {
  testing::StreamResult result = testing::Generate(*stub_, LongRequest(), 50ms);
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
      << result.status.error_message();
  EXPECT_LT(result.TokenIds().size(), 2000u);
  EXPECT_TRUE(testing::WaitEngineIdle(*stub_));

  v1::CompleteResponse response;
  grpc::Status status = testing::Complete(*stub_, LongRequest(), &response, 50ms);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_TRUE(testing::WaitEngineIdle(*stub_));
}

TEST_F(GenerateTest, ConcurrentStreamsAllComplete) {
  constexpr int kStreams = 6;
  std::vector<std::thread> threads;
  std::vector<testing::StreamResult> results(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = testing::Generate(*stub_, TextRequest(kPrompt, 64)); });
  }
  for (auto& t : threads) t.join();
  for (const auto& result : results) {
    ASSERT_TRUE(result.status.ok()) << result.status.error_message();
    EXPECT_THAT(result.TokenIds(), ElementsAreArray(results[0].TokenIds()));
  }
}

}  // namespace
}  // namespace tessera::server
