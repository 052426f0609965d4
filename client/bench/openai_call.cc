#include "client/bench/openai_call.h"

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/bench/timeline.h"

namespace tessera::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using asio::ip::tcp;
using nlohmann::json;

// The request body for a GenerateRequest; a token-id prompt becomes a list
// of ids (completions) or, for chat, words standing in for them.
json RequestBody(const tessera::v1::GenerateRequest& request, const std::string& model, bool chat) {
  json body = {{"model", model},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"max_tokens", request.stopping().max_tokens()},
               {"temperature", request.sampling().temperature()},
               {"ignore_eos", request.stopping().ignore_eos()}};
  if (request.sampling().has_seed()) body["seed"] = request.sampling().seed();
  if (request.priority() != 0) body["priority"] = request.priority();  // vLLM's extension
  json prompt;
  if (request.has_token_ids()) {
    if (chat) {
      std::string words;
      for (int32_t id : request.token_ids().ids()) absl::StrAppend(&words, words.empty() ? "" : " ", "w", id);
      prompt = words;
    } else {
      prompt = json(std::vector<int32_t>(request.token_ids().ids().begin(),
                                         request.token_ids().ids().end()));
    }
  } else {
    prompt = request.text();
  }
  if (chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  } else {
    body["prompt"] = prompt;
  }
  return body;
}

class OpenAiCall final : public BenchCall, public std::enable_shared_from_this<OpenAiCall> {
 public:
  OpenAiCall(asio::io_context& io, const tcp::resolver::results_type& endpoints,
             ConnectionPool* pool, bhttp::request<bhttp::string_body> request, int64_t index,
             double timeout, std::atomic<int64_t>* tokens, CallObserver* observer, bool chat)
      : socket_(io), timer_(io), endpoints_(endpoints), pool_(pool), request_(std::move(request)),
        timeout_(timeout), tokens_(tokens), observer_(observer), chat_(chat) {
    record_.index = index;
  }

  // The call owns itself until it ends.
  void Hold() { self_ = shared_from_this(); }
  // Recorded for the per-priority report.
  void SetPriority(int32_t priority) { record_.priority = priority; }

  void Start() override {
    asio::post(timer_.get_executor(), [this] { Connect(); });
  }

  void Cancel() override {
    asio::post(timer_.get_executor(), [self = shared_from_this()] { self->Fail("cancelled"); });
  }

 private:
  void Connect() {
    sent_ = std::chrono::steady_clock::now();
    timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(timeout_)));
    timer_.async_wait([this](beast::error_code ec) {
      if (!ec) Fail("deadline exceeded");
    });
    // A kept-alive connection of an earlier call, as HTTP clients (the
    // openai SDKs, aiohttp in vLLM's benchmark) reuse them.
    if (std::optional<tcp::socket> idle = pool_->Take()) {
      socket_ = *std::move(idle);
      reused_ = true;
      return Send();
    }
    NewConnection();
  }

  void NewConnection() {
    reused_ = false;
    asio::async_connect(socket_, endpoints_, [this](beast::error_code ec, const tcp::endpoint&) {
      if (ec) return Fail("connect: " + ec.message());
      socket_.set_option(tcp::no_delay(true));
      Send();
    });
  }

  // The server may have closed a kept-alive connection meanwhile: a call
  // that got no byte of its answer on one starts again on a new connection.
  bool RetryOnNewConnection() {
    // Not once any byte of an answer came (the server may be generating).
    if (!reused_ || received_ || finished_ || buffer_.size() > 0 ||
        (parser_ && parser_->got_some())) {
      return false;
    }
    beast::error_code ignored;
    socket_.close(ignored);
    buffer_.clear();
    NewConnection();
    return true;
  }

  void Send() {
    bhttp::async_write(socket_, request_, [this](beast::error_code ec, size_t) {
      if (ec && RetryOnNewConnection()) return;
      if (ec) return Fail("write: " + ec.message());
      parser_.emplace();
      parser_->body_limit(std::uint64_t{1} << 30);
      on_chunk_ = [this](uint64_t, beast::string_view data, beast::error_code&) {
        OnData(data);
        return data.size();
      };
      parser_->on_chunk_body(on_chunk_);
      Read();
    });
  }

  void Read() {
    bhttp::async_read_some(socket_, buffer_, *parser_, [this](beast::error_code ec, size_t n) {
      if (ec && RetryOnNewConnection()) return;
      if (ec) return Fail("read: " + ec.message());
      received_ = received_ || n > 0;
      if (parser_->is_done()) return Done();
      Read();
    });
  }

  double Now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - sent_).count();
  }

  void OnData(beast::string_view data) {
    sse_.append(data.data(), data.size());
    size_t end;
    while ((end = sse_.find("\n\n")) != std::string::npos) {
      std::string event = sse_.substr(0, end);
      sse_.erase(0, end + 2);
      if (!absl::StartsWith(event, "data: ")) continue;
      OnEvent(event.substr(6));
    }
  }

  void OnEvent(const std::string& payload) {
    if (payload == "[DONE]") return;
    json chunk = json::parse(payload, nullptr, false);
    if (chunk.is_discarded()) return;
    if (chunk.contains("error")) {
      error_ = chunk["error"].value("message", "error event");
      return;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      usage_tokens_ = chunk["usage"].value("completion_tokens", int64_t{0});
      record_.prompt_tokens = chunk["usage"].value("prompt_tokens", int64_t{0});
    }
    if (!chunk.contains("choices") || !chunk["choices"].is_array()) return;
    for (const json& choice : chunk["choices"]) {
      const json* text = nullptr;
      if (chat_ && choice.contains("delta") && choice["delta"].contains("content")) {
        text = &choice["delta"]["content"];
      } else if (!chat_ && choice.contains("text")) {
        text = &choice["text"];
      }
      if (text != nullptr && text->is_string() && !text->get<std::string>().empty()) {
        timeline_.OnMessage(Now(), 1);
        tokens_->fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  void Done() {
    const unsigned status = parser_->get().result_int();
    keep_alive_ = parser_->get().keep_alive();
    if (status != 200) {
      return Finish(false, static_cast<int>(status), absl::StrCat("HTTP ", status, ": ",
                                                                  parser_->get().body()));
    }
    // Tokens whose text came in one chunk (or none) still count once.
    if (usage_tokens_ > timeline_.tokens()) {
      timeline_.OnMessage(Now(), usage_tokens_ - timeline_.tokens());
    }
    Finish(error_.empty(), error_.empty() ? 0 : 13, error_);
  }

  void Fail(const std::string& message) { Finish(false, 14, message); }

  void Finish(bool ok, int code, const std::string& message) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    if (keep_alive_ && buffer_.size() == 0) {
      // A whole answer was read and the server keeps the connection.
      pool_->Put(std::move(socket_));
    } else {
      beast::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_both, ignored);
      socket_.close(ignored);
    }
    timeline_.OnDone(Now());
    timeline_.FillRecord(record_);
    record_.ok = ok;
    record_.status_code = code;
    record_.error_message = message;
    CallObserver* observer = observer_;
    RequestRecord record = std::move(record_);
    observer->Detach(this);
    observer->Finished(std::move(record));
    // Handlers still queued hold no reference: they see finished_ and stop.
    asio::post(timer_.get_executor(), [self = std::move(self_)] {});
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  const tcp::resolver::results_type& endpoints_;
  ConnectionPool* pool_;
  bhttp::request<bhttp::string_body> request_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  // The parser holds a reference to it.
  std::function<size_t(uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
  double timeout_;
  std::atomic<int64_t>* tokens_;
  CallObserver* observer_;
  bool chat_;
  std::shared_ptr<OpenAiCall> self_;
  std::chrono::steady_clock::time_point sent_;
  std::string sse_;
  std::string error_;
  int64_t usage_tokens_ = 0;
  bool reused_ = false;      // sent on a kept-alive connection
  bool received_ = false;    // a byte of the answer arrived
  bool keep_alive_ = false;  // the answer was whole and the server keeps the connection
  bool finished_ = false;
  TokenTimeline timeline_;
  RequestRecord record_;
};

}  // namespace

std::optional<tcp::socket> ConnectionPool::Take() {
  while (!idle_.empty()) {
    tcp::socket socket = std::move(idle_.back());
    idle_.pop_back();
    if (socket.is_open()) return socket;
  }
  return std::nullopt;
}

void ConnectionPool::Put(tcp::socket socket) {
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(socket));
}

absl::StatusOr<HttpTarget> ParseBaseUrl(const std::string& url) {
  std::string rest = url;
  if (!absl::StartsWith(rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("--base-url must start with http://, got '", url, "'"));
  }
  rest = rest.substr(7);
  HttpTarget target;
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  target.base_path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!target.base_path.empty() && target.base_path.back() == '/') target.base_path.pop_back();
  if (absl::EndsWith(target.base_path, "/v1")) target.base_path.resize(target.base_path.size() - 3);
  const size_t colon = hostport.rfind(':');
  target.host = hostport.substr(0, colon);
  target.port = colon == std::string::npos ? "80" : hostport.substr(colon + 1);
  int port = 0;
  if (target.host.empty() || !absl::SimpleAtoi(target.port, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--base-url: bad host or port in '", url, "'"));
  }
  return target;
}

absl::StatusOr<OpenAiModel> FetchOpenAiModel(const HttpTarget& target) {
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(resolver.resolve(target.host, target.port));
    bhttp::request<bhttp::empty_body> request(bhttp::verb::get, target.base_path + "/v1/models", 11);
    request.set(bhttp::field::host, target.host);
    if (!target.api_key.empty()) request.set(bhttp::field::authorization, "Bearer " + target.api_key);
    bhttp::write(stream, request);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> response;
    bhttp::read(stream, buffer, response);
    if (response.result_int() != 200) {
      return absl::UnavailableError(absl::StrCat("GET /v1/models: HTTP ", response.result_int()));
    }
    json body = json::parse(response.body());
    const json& model = body.at("data").at(0);
    OpenAiModel out;
    out.id = model.at("id").get<std::string>();
    if (model.contains("meta") && model["meta"].is_object()) {
      out.vocab_size = model["meta"].value("n_vocab", int64_t{0});
      out.context_length = model["meta"].value("n_ctx_train", int64_t{0});
    }
    if (model.contains("max_model_len") && model["max_model_len"].is_number_integer()) {
      out.context_length = model["max_model_len"].get<int64_t>();
    }
    return out;
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("GET /v1/models: ", e.what()));
  }
}

OpenAiClient::OpenAiClient(HttpTarget target, std::string model, bool chat)
    : target_(std::move(target)), model_(std::move(model)), chat_(chat), work_(io_.get_executor()) {
  tcp::resolver resolver(io_);
  endpoints_ = resolver.resolve(target_.host, target_.port);
  thread_ = std::thread([this] { io_.run(); });
}

OpenAiClient::~OpenAiClient() {
  work_.reset();
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void OpenAiClient::Preconnect(int n) {
  std::vector<tcp::socket> sockets;
  for (int i = 0; i < n; ++i) {
    tcp::socket socket(io_);
    beast::error_code ec;
    asio::connect(socket, endpoints_, ec);
    if (ec) break;
    socket.set_option(tcp::no_delay(true), ec);
    sockets.push_back(std::move(socket));
  }
  // The pool belongs to the I/O thread.
  std::promise<void> done;
  asio::post(io_, [this, &sockets, &done] {
    for (tcp::socket& socket : sockets) pool_.Put(std::move(socket));
    done.set_value();
  });
  done.get_future().wait();
}

CallLauncher OpenAiClient::Launcher() {
  return [this](tessera::v1::GenerateRequest request, int64_t index, double timeout,
                std::atomic<int64_t>* tokens, CallObserver* observer) -> BenchCall* {
    bhttp::request<bhttp::string_body> http(
        bhttp::verb::post, target_.base_path + (chat_ ? "/v1/chat/completions" : "/v1/completions"),
        11);
    http.set(bhttp::field::host, target_.host);
    http.set(bhttp::field::content_type, "application/json");
    if (!target_.api_key.empty()) http.set(bhttp::field::authorization, "Bearer " + target_.api_key);
    http.body() = RequestBody(request, model_, chat_).dump();
    http.prepare_payload();
    auto call = std::make_shared<OpenAiCall>(io_, endpoints_, &pool_, std::move(http), index,
                                             timeout, tokens, observer, chat_);
    call->SetPriority(request.priority());
    call->Hold();
    return call.get();
  };
}

}  // namespace tessera::bench
