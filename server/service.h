// The tessera.v1.Inference service. Every method takes raw request bytes so
// that malformed requests get INVALID_ARGUMENT with a message (see
// ParseMessage), where generated types would answer a bare error.
#pragma once

#include <string>

#include "server/engine_call.h"
#include "tessera/v1/inference.grpc.pb.h"

namespace tessera::server {

using InferenceServiceBase = v1::Inference::WithRawCallbackMethod_Generate<
    v1::Inference::WithRawCallbackMethod_Complete<v1::Inference::WithRawCallbackMethod_Tokenize<
        v1::Inference::WithRawCallbackMethod_Detokenize<
            v1::Inference::WithRawCallbackMethod_GetModelInfo<
                v1::Inference::WithRawCallbackMethod_Chat<
                    v1::Inference::WithRawCallbackMethod_ChatComplete<
                        v1::Inference::WithRawCallbackMethod_RenderChat<
                            v1::Inference::CallbackService>>>>>>>>;

class InferenceService final : public InferenceServiceBase {
 public:
  // `env` is shared with the HTTP front (one request id sequence).
  explicit InferenceService(ServiceEnv* env);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  // Chat, ChatComplete and RenderChat: see server/chat_calls.h.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Chat(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* ChatComplete(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RenderChat(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  ServiceEnv& env_;
};

// The server's version string.
std::string ServerVersion();

}  // namespace tessera::server
