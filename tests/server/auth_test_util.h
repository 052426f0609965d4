// Helpers of the API key tests: calls with chosen metadata or headers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/test_util.h"

namespace tessera::server::testing {

using Metadata = std::vector<std::pair<std::string, std::string>>;

inline Metadata Bearer(const std::string& key) { return {{"authorization", "Bearer " + key}}; }

// Calls `method` with an empty request (a unary call, whatever the
// method's kind: the key is checked before the request is read).
inline grpc::Status CallEmpty(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                       const Metadata& metadata) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(10)));
  for (const auto& [key, value] : metadata) context.AddMetadata(key, value);
  grpc::Slice slice("");
  grpc::ByteBuffer request(&slice, 1);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&context, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  return status;
}

struct HttpResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

// One HTTP/1.0 request with `headers` (each "Name: value").
inline HttpResponse HttpRequest(int port, const std::string& method, const std::string& path,
                         const std::vector<std::string>& headers, const std::string& body = "") {
  HttpResponse out;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return out;
  }
  std::string request = method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n";
  for (const std::string& h : headers) request += h + "\r\n";
  if (!body.empty()) {
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\n";
  }
  request += "\r\n" + body;
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return out;
  }
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) raw.append(buffer, n);
  close(fd);
  const size_t split = raw.find("\r\n\r\n");
  if (raw.size() < 12 || split == std::string::npos) return out;
  out.status = std::stoi(raw.substr(9, 3));
  out.head = raw.substr(0, split);
  out.body = raw.substr(split + 4);
  return out;
}

}  // namespace tessera::server::testing
