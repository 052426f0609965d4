// The gRPC chat methods' shared part: a ChatRequest's messages rendered with
// the server's ChatRenderer into the GenerateRequest that Generate and
// Complete take, so that chat runs through the same validation and engine
// path. Without a renderer: FAILED_PRECONDITION.
#pragma once

#include <string>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "absl/status/statusor.h"
#include "server/chat_renderer.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::server {

absl::StatusOr<std::string> RenderChatPrompt(const v1::RenderChatRequest& request,
                                             const ChatRenderer* chat);

// A raw ChatRequest to a raw GenerateRequest whose prompt is the rendered
// chat, tokenized by `tokenizer` (see TokenizeChatPrompt).
absl::StatusOr<grpc::ByteBuffer> ChatToGenerateRequest(const grpc::ByteBuffer& raw,
                                                       const ChatRenderer* chat,
                                                       const Tokenizer& tokenizer);

// A streaming call that ends at once with `status`.
grpc::ServerWriteReactor<grpc::ByteBuffer>* FinishedWriter(const grpc::Status& status);

}  // namespace tessera::server
