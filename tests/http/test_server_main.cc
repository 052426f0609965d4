// tessera-http-test-server: tessera-server with the test ChatML renderer, so
// that the HTTP tests reach the chat endpoints end to end.
#include "server/run.h"
#include "tests/http/chatml_renderer.h"

int main(int argc, char** argv) {
  static const tessera::server::testing::ChatMlRenderer renderer;
  return tessera::server::ServerMain(argc, argv, &renderer);
}
