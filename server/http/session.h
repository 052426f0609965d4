// One HTTP/1.1 connection of the front: reads requests with bounded sizes
// and times (idle wait, then head and body within header_timeout), answers
// them in order, streams generations as SSE, and cancels a generation when
// its client goes away. All of it runs on the connection's strand; nothing
// blocks a thread.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/http/routes.h"
#include "server/http/stream.h"

namespace tessera::server::http {

// Counts the responses in progress across connections, for draining.
class ResponseCounter {
 public:
  void Add() { active_.fetch_add(1); }
  void Done() { active_.fetch_sub(1); }
  int active() const { return active_.load(); }

 private:
  std::atomic<int> active_{0};
};

class Session : public ChoiceTarget, public std::enable_shared_from_this<Session> {
 public:
  // `tls` null: plain HTTP.
  Session(boost::asio::ip::tcp::socket socket, HttpEnv& env, ResponseCounter& responses,
          std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~Session() override;

  void Start();
  // ChoiceTarget: queues the event on the strand (any thread).
  void Deliver(ChoiceEvent event) override;

 private:
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  void WaitForRequest();
  void ReadHeader();
  void OnHeader(boost::beast::error_code ec);
  void ReadBody();
  void OnBody(boost::beast::error_code ec);
  void Dispatch();
  void WriteReply(Reply reply, bool close_after);
  // The most request bytes kept while a response is under way (pipelined):
  // one request's header and body limits.
  size_t MaxPipelinedBytes() const;
  void OnResponseWritten(boost::beast::error_code ec);

  void StartGeneration(StartedGeneration started);
  void WatchForClose();
  void OnEvent(ChoiceEvent event);
  void FlushStream();
  void OnStreamWritten(boost::beast::error_code ec);
  void ClientGone();
  void EndResponse();
  void Close();

  Stream stream_;
  HttpEnv& env_;
  ResponseCounter& responses_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  bool keep_alive_ = true;
  bool head_request_ = false;  // the request being answered is a HEAD: no body
  bool responding_ = false;  // counted in responses_
  bool closed_ = false;

  // The generation being answered, if any.
  std::optional<StartedGeneration> generation_;
  bool stream_header_sent_ = false;
  bool write_in_flight_ = false;
  bool stream_ended_ = false;  // the last chunk is written or being written
  std::string pending_;        // SSE bytes not yet written
  std::string writing_;        // SSE bytes being written
  struct StreamHead;
  std::shared_ptr<StreamHead> head_;  // the SSE response's header while it is written
  // A read kept pending during a generation: it ends with an error when the
  // client goes away (bytes that arrive are kept for the next request).
  bool watch_pending_ = false;
  bool watch_stop_ = false;
  char watch_buffer_[1024];
};

}  // namespace tessera::server::http
