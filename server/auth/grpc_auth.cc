#include "server/auth/grpc_auth.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace tessera::server::auth {
namespace {

constexpr char kAuthorization[] = "authorization";
constexpr char kApiKey[] = "x-api-key";
constexpr char kPath[] = ":path";

absl::string_view View(grpc::string_ref ref) { return absl::string_view(ref.data(), ref.size()); }

std::optional<absl::string_view> Lookup(const grpc::AuthMetadataProcessor::InputMetadata& md,
                                        const char* key) {
  auto it = md.find(key);
  if (it == md.end()) return std::nullopt;
  return View(it->second);
}

// Binds a port with the core insecure credentials and `processor`, which
// the core calls for every call's initial metadata.
class ProcessedInsecureCredentials final : public grpc::ServerCredentials {
 public:
  explicit ProcessedInsecureCredentials(std::shared_ptr<grpc::AuthMetadataProcessor> processor)
      : processor_(std::move(processor)) {}

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) override {
    processor_ = processor;
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    grpc_server_credentials* creds = grpc_insecure_server_credentials_create();
    // The core owns this reference and drops it (Destroy) with the port.
    grpc_auth_metadata_processor core{
        &ProcessedInsecureCredentials::Process, &ProcessedInsecureCredentials::Destroy,
        new std::shared_ptr<grpc::AuthMetadataProcessor>(processor_)};
    grpc_server_credentials_set_auth_metadata_processor(creds, core);
    const int port = grpc_server_add_http2_port(server, addr.c_str(), creds);
    grpc_server_credentials_release(creds);
    return port;
  }

  static void Destroy(void* state) {
    delete static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
  }

  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* md,
                      size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
    auto& processor = *static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
    grpc::AuthMetadataProcessor::InputMetadata input;
    for (size_t i = 0; i < num_md; ++i) {
      input.emplace(grpc::string_ref(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(md[i].key)),
                                     GRPC_SLICE_LENGTH(md[i].key)),
                    grpc::string_ref(
                        reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(md[i].value)),
                        GRPC_SLICE_LENGTH(md[i].value)));
    }
    grpc::AuthMetadataProcessor::OutputMetadata consumed;
    grpc::AuthMetadataProcessor::OutputMetadata response;
    const grpc::Status status = processor->Process(input, nullptr, &consumed, &response);
    // Consumed headers are removed from the call by key.
    std::vector<grpc_metadata> removed;
    for (const auto& [key, value] : consumed) {
      grpc_metadata entry{};
      entry.key = grpc_slice_from_static_buffer(key.data(), key.size());
      entry.value = grpc_slice_from_static_buffer(value.data(), value.size());
      removed.push_back(entry);
    }
    const std::string message = status.error_message();
    done(user_data, removed.data(), status.ok() ? removed.size() : 0, nullptr, 0,
         static_cast<grpc_status_code>(status.error_code()),
         status.ok() ? nullptr : message.c_str());
  }

  std::shared_ptr<grpc::AuthMetadataProcessor> processor_;
};

}  // namespace

GrpcKeyProcessor::GrpcKeyProcessor(const Authenticator* auth, bool open_health)
    : auth_(auth), open_health_(open_health) {}

grpc::Status GrpcKeyProcessor::Process(const InputMetadata& auth_metadata,
                                       grpc::AuthContext* /*context*/,
                                       OutputMetadata* /*consumed_auth_metadata*/,
                                       OutputMetadata* /*response_metadata*/) {
  const absl::string_view path = Lookup(auth_metadata, kPath).value_or("");
  if (open_health_ && absl::StartsWith(path, kHealthMethodPrefix)) return grpc::Status::OK;
  Credentials credentials{Lookup(auth_metadata, kAuthorization), Lookup(auth_metadata, kApiKey)};
  absl::StatusOr<std::string> name = auth_->Check(credentials, Front::kGrpc, path);
  if (!name.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(name.status().message()));
  }
  return grpc::Status::OK;
}

std::shared_ptr<grpc::ServerCredentials> InsecureCredentialsWithProcessor(
    std::shared_ptr<grpc::AuthMetadataProcessor> processor) {
  return std::make_shared<ProcessedInsecureCredentials>(std::move(processor));
}

}  // namespace tessera::server::auth
