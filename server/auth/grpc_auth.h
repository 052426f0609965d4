// API keys on the gRPC port: an AuthMetadataProcessor that gRPC runs on the
// initial metadata of every call on the port, before the call reaches any
// service, so every method of every registered service (tessera.v1,
// reflection, and any added later) is covered. Only grpc.health.v1 may be
// left open, for probes.
#pragma once

#include <memory>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include "server/auth/authenticator.h"

namespace tessera::server::auth {

// The method prefix of the health service.
inline constexpr char kHealthMethodPrefix[] = "/grpc.health.v1.Health/";

class GrpcKeyProcessor final : public grpc::AuthMetadataProcessor {
 public:
  // `auth` must outlive every call; `open_health`: health calls need no key.
  GrpcKeyProcessor(const Authenticator* auth, bool open_health);

  // The check is quick: gRPC runs it inline, on the call's thread.
  bool IsBlocking() const override { return false; }

  // UNAUTHENTICATED unless the call carries a valid key (or is an open
  // health call). The key headers stay: admission reads the key's name.
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const Authenticator* auth_;
  const bool open_health_;
};

// Plaintext server credentials whose calls all go through `processor`
// (grpc::InsecureServerCredentials() cannot take one). TLS credentials take
// the processor through their own SetAuthMetadataProcessor.
std::shared_ptr<grpc::ServerCredentials> InsecureCredentialsWithProcessor(
    std::shared_ptr<grpc::AuthMetadataProcessor> processor);

}  // namespace tessera::server::auth
