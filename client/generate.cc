// tessera-cli generate: streams a completion to stdout, or prints it as JSON.
#include <chrono>
#include <cstdio>
#include <string>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/sync_stream.h>
#include <nlohmann/json.hpp>

#include "client/commands.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::cli {
namespace {

namespace pb = ::tessera::v1;
using Json = nlohmann::ordered_json;

pb::GenerateRequest BuildRequest(const GenerateOptions& g) {
  pb::GenerateRequest req;
  req.set_text(g.prompt);
  pb::SamplingParams* s = req.mutable_sampling();
  if (g.temperature) s->set_temperature(*g.temperature);
  s->set_top_k(g.top_k);
  if (g.top_p) s->set_top_p(*g.top_p);
  s->set_min_p(g.min_p);
  if (g.repetition_penalty) s->set_repetition_penalty(*g.repetition_penalty);
  s->set_presence_penalty(g.presence_penalty);
  s->set_frequency_penalty(g.frequency_penalty);
  if (g.seed) s->set_seed(*g.seed);
  pb::StoppingCriteria* stop = req.mutable_stopping();
  if (g.max_tokens) stop->set_max_tokens(*g.max_tokens);
  for (const std::string& str : g.stop) stop->add_stop(str);
  for (int32_t id : g.stop_token_ids) stop->add_stop_token_ids(id);
  stop->set_ignore_eos(g.ignore_eos);
  req.set_top_logprobs(g.top_logprobs);
  req.set_logprobs(g.logprobs);
  return req;
}

const char* FinishReasonName(pb::FinishReason reason) {
  switch (reason) {
    case pb::FINISH_REASON_LENGTH: return "length";
    case pb::FINISH_REASON_STOP: return "stop";
    case pb::FINISH_REASON_EOS: return "eos";
    case pb::FINISH_REASON_CANCELLED: return "cancelled";
    default: return "unspecified";
  }
}

// Everything the stream delivered, merged.
struct Completion {
  pb::GenerateResponse last;  // the final message: finish reason, usage, timings
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;
  std::string text;
  Json logprobs = Json::array();
};

void Merge(const pb::GenerateResponse& resp, Completion& c) {
  if (!resp.prompt_token_ids().empty()) {
    c.prompt_token_ids.assign(resp.prompt_token_ids().begin(), resp.prompt_token_ids().end());
  }
  c.token_ids.insert(c.token_ids.end(), resp.token_ids().begin(), resp.token_ids().end());
  c.text += resp.text();
  for (const pb::TokenLogprobs& lp : resp.logprobs()) {
    Json top = Json::array();
    for (const pb::TopLogprob& alt : lp.top()) {
      top.push_back({{"token_id", alt.token_id()}, {"logprob", alt.logprob()}, {"text", alt.text()}});
    }
    c.logprobs.push_back({{"token_id", lp.token_id()}, {"logprob", lp.logprob()}, {"top", top}});
  }
  if (resp.finish_reason() != pb::FINISH_REASON_UNSPECIFIED) c.last = resp;
}

Json ToJson(const Completion& c, bool with_logprobs) {
  const pb::GenerateResponse& last = c.last;
  Json out = {
      {"prompt_token_ids", c.prompt_token_ids},
      {"token_ids", c.token_ids},
      {"text", c.text},
      {"finish_reason", last.finish_reason() == pb::FINISH_REASON_UNSPECIFIED
                            ? Json(nullptr)
                            : Json(FinishReasonName(last.finish_reason()))},
      {"usage",
       {{"prompt_tokens", last.usage().prompt_tokens()},
        {"completion_tokens", last.usage().completion_tokens()}}},
      {"timings",
       {{"queue_seconds", last.timings().queue_seconds()},
        {"time_to_first_token_seconds", last.timings().time_to_first_token_seconds()},
        {"total_seconds", last.timings().total_seconds()}}},
  };
  if (with_logprobs) out["logprobs"] = c.logprobs;
  return out;
}

void PrintSummary(const Completion& c) {
  const pb::Timings& t = c.last.timings();
  const int32_t n = c.last.usage().completion_tokens();
  const double rate = t.total_seconds() > 0 ? n / t.total_seconds() : 0.0;
  std::fprintf(stderr,
               "[finish=%s prompt_tokens=%d completion_tokens=%d %.1f tokens/s "
               "ttft=%.3fs total=%.3fs]\n",
               FinishReasonName(c.last.finish_reason()), c.last.usage().prompt_tokens(), n,
               rate, t.time_to_first_token_seconds(), t.total_seconds());
}

// Opens the Generate stream with raw responses. The generated stub's reader
// parses each message itself and, when one does not parse, fails the Read
// but leaves the rest of the stream unread, so that Finish never returns;
// parsing here instead keeps the stream drained and the server's status.
std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> OpenGenerate(
    const Session& session, grpc::ClientContext& context, const pb::GenerateRequest& request) {
  const grpc::internal::RpcMethod method("/tessera.v1.Inference/Generate",
                                         grpc::internal::RpcMethod::SERVER_STREAMING);
  return std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>>(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          session.channel.get(), method, &context, request));
}

bool Parse(grpc::ByteBuffer& buffer, pb::GenerateResponse& out) {
  grpc::ProtoBufferReader reader(&buffer);
  return out.ParseFromZeroCopyStream(&reader);
}

}  // namespace

int RunGenerate(const Session& session) {
  const Options& o = session.options;
  const bool json = o.json;
  grpc::ClientContext context;
  ApplyCallOptions(o, context);
  Completion completion;
  bool printed = false;     // text went to stdout, so a newline is owed
  bool bad_message = false;  // a response did not parse
  grpc::Status status;
  {
    ScopedCancellation cancel(*session.interrupts, &context);
    auto reader = OpenGenerate(session, context, BuildRequest(o.generate));
    grpc::ByteBuffer buffer;
    pb::GenerateResponse resp;
    while (reader->Read(&buffer)) {
      if (bad_message || !Parse(buffer, resp)) {
        bad_message = true;
        continue;
      }
      Merge(resp, completion);
      if (!json && !resp.text().empty()) {
        std::fwrite(resp.text().data(), 1, resp.text().size(), stdout);
        std::fflush(stdout);
        printed = true;
      }
    }
    status = reader->Finish();
  }
  if (status.ok() && bad_message) {
    status = grpc::Status(grpc::StatusCode::INTERNAL,
                          "the server sent a GenerateResponse that does not parse");
  }
  if (printed) std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!status.ok() || session.interrupts->interrupted()) {
    return ReportRpcFailure(session, status);
  }
  if (json) {
    const bool with_logprobs = o.generate.logprobs || o.generate.top_logprobs > 0;
    // Alternatives' text may be part of a UTF-8 character: replace, never throw.
    std::printf("%s\n", ToJson(completion, with_logprobs)
                            .dump(2, ' ', false, Json::error_handler_t::replace)
                            .c_str());
  } else {
    if (!printed) std::fputc('\n', stdout);
    PrintSummary(completion);
  }
  return kExitOk;
}

}  // namespace tessera::cli
