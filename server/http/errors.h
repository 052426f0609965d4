// OpenAI-style error responses: {"error": {"message", "type", "param",
// "code"}} with the HTTP status that goes with them.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace tessera::server::http {

struct HttpError {
  int status = 500;
  std::string message;
  std::string type;   // e.g. invalid_request_error
  std::string param;  // the offending field, or empty (null)
  std::string code;   // e.g. model_not_found, or empty (null)
};

// An INVALID_ARGUMENT status that names the request field it is about.
absl::Status InvalidParam(absl::string_view param, absl::string_view message);

// The HTTP error for a status from request parsing, validation or the
// engine: INVALID_ARGUMENT 400, NOT_FOUND 404, RESOURCE_EXHAUSTED 429,
// UNAVAILABLE 503, others 500. Validation messages name the gRPC API's
// fields (sampling.temperature); they are renamed to the OpenAI ones.
HttpError ErrorFromStatus(const absl::Status& status);

HttpError MakeError(int status, std::string message, std::string code = "",
                    std::string param = "");

// The JSON body of an error response.
std::string ErrorBody(const HttpError& error);

}  // namespace tessera::server::http
