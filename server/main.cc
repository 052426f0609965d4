// tessera-server: serves one GGUF model over gRPC and an OpenAI-compatible
// HTTP API.
//
// Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when the server
// cannot start or the model cannot be loaded, 2 for invalid flags, 3 when
// the shutdown could not finish (see server/run.h).
#include "server/run.h"

int main(int argc, char** argv) { return tessera::server::ServerMain(argc, argv, nullptr); }
