#include "server/http/session.h"

#include <algorithm>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

namespace tessera::server::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
constexpr size_t kReadChunk = 8 * 1024;
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

bool IsDisconnect(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == beast::error::timeout ||
         ec == asio::error::operation_aborted || ec == asio::error::broken_pipe;
}

}  // namespace

struct Session::StreamHead {
  bhttp::response<bhttp::empty_body> response;
  bhttp::response_serializer<bhttp::empty_body> serializer{response};
};

Session::Session(asio::ip::tcp::socket socket, HttpEnv& env, ResponseCounter& responses,
                 std::shared_ptr<asio::ssl::context> tls)
    : stream_(std::move(socket), std::move(tls)), env_(env), responses_(responses) {
  if (env_.surface == Surface::kApi) env_.service->metrics->AddHttpConnections(1);
}

Session::~Session() {
  if (responding_) responses_.Done();
  if (generation_ && !generation_->generation->done()) {
    generation_->client_gone->store(true);
    for (uint64_t id : generation_->ids) generation_->engine->Cancel(id);
  }
  if (env_.surface == Surface::kApi) env_.service->metrics->AddHttpConnections(-1);
}

void Session::Start() {
  beast::error_code ignored;
  stream_.socket().set_option(asio::ip::tcp::no_delay(true), ignored);
  // The TLS handshake counts as the start of a request.
  stream_.expires_after(env_.header_timeout);
  stream_.async_handshake([self = shared_from_this()](beast::error_code ec) {
    if (ec) {
      spdlog::debug("HTTP TLS handshake failed: {}", ec.message());
      return self->Close();
    }
    self->WaitForRequest();
  });
}

void Session::WaitForRequest() {
  if (closed_) return;
  if (buffer_.size() > 0) return ReadHeader();
  // Idle keep-alive wait; the request's time limit starts with its first byte.
  stream_.expires_after(env_.idle_timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            if (ec) return self->Close();
                            self->buffer_.commit(n);
                            self->ReadHeader();
                          });
}

void Session::ReadHeader() {
  head_request_ = false;  // known once this request's header is parsed
  parser_.emplace();
  parser_->header_limit(kMaxHeaderBytes);
  parser_->body_limit(static_cast<uint64_t>(env_.max_body_bytes));
  stream_.expires_after(env_.header_timeout);
  bhttp::async_read_header(stream_, buffer_, *parser_,
                           [self = shared_from_this()](beast::error_code ec, size_t) {
                             self->OnHeader(ec);
                           });
}

void Session::OnHeader(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) {
    return WriteReply(ErrorReply(MakeError(413, "the request body is too large",
                                           "request_too_large")), true);
  }
  if (ec == bhttp::error::header_limit) {
    return WriteReply(ErrorReply(MakeError(431, "the request header is too large",
                                           "header_too_large")), true);
  }
  if (ec && IsDisconnect(ec)) return Close();
  if (ec) {
    return WriteReply(ErrorReply(MakeError(400, "malformed HTTP request: " + ec.message(),
                                           "bad_request")), true);
  }
  const boost::optional<uint64_t> length = parser_->content_length();
  if (length && *length > static_cast<uint64_t>(env_.max_body_bytes)) {
    return WriteReply(ErrorReply(MakeError(413, "the request body is too large",
                                           "request_too_large")), true);
  }
  if (parser_->is_done()) return Dispatch();
  if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) {
    asio::async_write(stream_, asio::buffer(kContinue, sizeof(kContinue) - 1),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        self->ReadBody();
                      });
    return;
  }
  ReadBody();
}

void Session::ReadBody() {
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); });
}

void Session::OnBody(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) {
    return WriteReply(ErrorReply(MakeError(413, "the request body is too large",
                                           "request_too_large")), true);
  }
  if (ec && IsDisconnect(ec)) return Close();
  if (ec) {
    return WriteReply(ErrorReply(MakeError(400, "malformed HTTP request body: " + ec.message(),
                                           "bad_request")), true);
  }
  Dispatch();
}

void Session::Dispatch() {
  bhttp::request<bhttp::string_body> request = parser_->release();
  parser_.reset();
  keep_alive_ = request.keep_alive();
  head_request_ = request.method() == bhttp::verb::head;
  HttpRequest in;
  in.method = std::string(request.method_string());
  std::string target(request.target());
  in.path = target.substr(0, target.find('?'));
  in.content_type = std::string(request[bhttp::field::content_type]);
  if (auto it = request.find(bhttp::field::authorization); it != request.end()) {
    in.authorization = std::string(it->value());
  }
  if (auto it = request.find("x-api-key"); it != request.end()) in.api_key = std::string(it->value());
  in.body = std::move(request.body());
  responding_ = true;
  responses_.Add();
  RouteResult result = Route(in, env_, weak_from_this());
  if (Reply* reply = std::get_if<Reply>(&result)) return WriteReply(std::move(*reply), false);
  StartGeneration(std::move(std::get<StartedGeneration>(result)));
}

void Session::WriteReply(Reply reply, bool close_after) {
  if (closed_) return;
  if (!responding_) {
    responding_ = true;
    responses_.Add();
  }
  if (close_after) keep_alive_ = false;
  auto response = std::make_shared<bhttp::response<bhttp::string_body>>(
      static_cast<bhttp::status>(reply.status), 11);
  response->set(bhttp::field::server, "tessera");
  response->set(bhttp::field::content_type, reply.content_type);
  if (!reply.allow.empty()) response->set(bhttp::field::allow, reply.allow);
  // Only a missing or wrong API key answers 401 (RFC 6750).
  if (reply.status == 401) response->set(bhttp::field::www_authenticate, "Bearer");
  response->keep_alive(keep_alive_);
  // A response to HEAD has no content (RFC 9110, 9.3.2): a body would be
  // read as the start of the next response on a kept-alive connection.
  if (!head_request_) response->body() = std::move(reply.body);
  response->prepare_payload();
  stream_.expires_after(env_.write_timeout);
  bhttp::async_write(stream_, *response,
                     [self = shared_from_this(), response](beast::error_code ec, size_t) {
                       self->OnResponseWritten(ec);
                     });
}

void Session::OnResponseWritten(beast::error_code ec) {
  if (ec) return ClientGone();
  EndResponse();
}

void Session::EndResponse() {
  if (responding_) {
    responding_ = false;
    responses_.Done();
  }
  generation_.reset();
  if (!keep_alive_) {
    beast::error_code ignored;
    stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    return Close();
  }
  if (watch_pending_) {
    // The watch read ends with operation_aborted and resumes reading.
    watch_stop_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
    return;
  }
  WaitForRequest();
}

void Session::StartGeneration(StartedGeneration started) {
  generation_.emplace(std::move(started));
  stream_header_sent_ = false;
  stream_ended_ = false;
  pending_.clear();
  WatchForClose();
  if (!generation_->stream) return;
  head_ = std::make_shared<StreamHead>();
  bhttp::response<bhttp::empty_body>& response = head_->response;
  response.version(11);
  response.result(bhttp::status::ok);
  response.set(bhttp::field::server, "tessera");
  response.set(bhttp::field::content_type, "text/event-stream");
  response.set(bhttp::field::cache_control, "no-cache");
  response.keep_alive(keep_alive_);
  response.chunked(true);
  pending_ = generation_->generation->StreamStart();
  write_in_flight_ = true;
  stream_.expires_after(env_.write_timeout);
  bhttp::async_write_header(stream_, head_->serializer,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->head_.reset();
                              self->write_in_flight_ = false;
                              if (ec) return self->ClientGone();
                              self->stream_header_sent_ = true;
                              self->FlushStream();
                            });
}

void Session::WatchForClose() {
  watch_pending_ = true;
  watch_stop_ = false;
  stream_.async_watch_read(
      asio::buffer(watch_buffer_),
      asio::bind_executor(stream_.get_executor(),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->watch_pending_ = false;
                            if (self->watch_stop_) {
                              self->watch_stop_ = false;
                              if (n > 0) {
                                asio::buffer_copy(self->buffer_.prepare(n),
                                                  asio::buffer(self->watch_buffer_, n));
                                self->buffer_.commit(n);
                              }
                              return self->WaitForRequest();
                            }
                            if (ec) return self->ClientGone();
                            // A pipelined request: kept for later, up to the
                            // size of one whole request. More is not HTTP a
                            // client can mean, and would pile up in memory.
                            if (self->buffer_.size() + n > self->MaxPipelinedBytes()) {
                              spdlog::debug("HTTP client sent over {} bytes during a response; "
                                            "closing", self->MaxPipelinedBytes());
                              return self->ClientGone();
                            }
                            asio::buffer_copy(self->buffer_.prepare(n),
                                              asio::buffer(self->watch_buffer_, n));
                            self->buffer_.commit(n);
                            if (self->generation_) self->WatchForClose();
                          }));
}

size_t Session::MaxPipelinedBytes() const {
  return kMaxHeaderBytes + static_cast<size_t>(std::max<int64_t>(env_.max_body_bytes, 0));
}

void Session::Deliver(ChoiceEvent event) {
  asio::post(stream_.get_executor(),
             [self = shared_from_this(), event = std::move(event)]() mutable {
               self->OnEvent(std::move(event));
             });
}

void Session::OnEvent(ChoiceEvent event) {
  if (closed_ || !generation_) return;
  Generation& generation = *generation_->generation;
  std::string out = generation.OnEvent(event);
  if (generation_->stream) {
    pending_ += out;
    return FlushStream();
  }
  if (!generation.done()) return;
  if (const std::optional<HttpError>& error = generation.error()) {
    return WriteReply(ErrorReply(*error), false);
  }
  WriteReply(Reply{200, "application/json", generation.FinalBody(), ""}, false);
}

void Session::FlushStream() {
  if (closed_ || !generation_ || write_in_flight_ || !stream_header_sent_ || stream_ended_) return;
  auto done = [self = shared_from_this()](beast::error_code ec, size_t) {
    self->OnStreamWritten(ec);
  };
  if (!pending_.empty()) {
    writing_ = std::move(pending_);
    pending_.clear();
    write_in_flight_ = true;
    stream_.expires_after(env_.write_timeout);
    asio::async_write(stream_, bhttp::make_chunk(asio::buffer(writing_)), std::move(done));
    return;
  }
  if (!generation_->generation->done()) return;
  stream_ended_ = true;
  write_in_flight_ = true;
  stream_.expires_after(env_.write_timeout);
  asio::async_write(stream_, bhttp::make_chunk_last(), std::move(done));
}

void Session::OnStreamWritten(beast::error_code ec) {
  write_in_flight_ = false;
  if (ec) return ClientGone();
  if (stream_ended_) return EndResponse();
  FlushStream();
}

void Session::ClientGone() {
  if (generation_ && !generation_->generation->done()) {
    generation_->client_gone->store(true);
    for (uint64_t id : generation_->ids) generation_->engine->Cancel(id);
  }
  Close();
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  if (responding_) {
    responding_ = false;
    responses_.Done();
  }
  beast::error_code ignored;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
}

}  // namespace tessera::server::http
