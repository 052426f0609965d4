// The streaming Generate call and the unary Complete call.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "server/engine_call.h"

namespace tessera::server {

// Starts a Generate call on a raw GenerateRequest. Never returns null: a
// refused request finishes the call with its status.
grpc::ServerWriteReactor<grpc::ByteBuffer>* StartGenerate(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer& request,
                                                          ServiceEnv& env);

// Starts a Complete call; the CompleteResponse is serialized into `response`.
grpc::ServerUnaryReactor* StartComplete(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
                                        ServiceEnv& env);

}  // namespace tessera::server
