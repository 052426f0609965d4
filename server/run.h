// tessera-server's process: flags, signals, start, load, drain on
// SIGTERM/SIGINT. Exit codes: 0 after a clean shutdown, 1 when the server
// cannot start or the model cannot be loaded, 2 for invalid flags, 3 when
// the shutdown could not finish (an engine step stuck past the drain
// deadline) and the process ended itself.
#pragma once

#include "server/chat_renderer.h"

namespace tessera::server {

// `chat` renders chat prompts for the HTTP front (null: none).
int ServerMain(int argc, char** argv, const ChatRenderer* chat);

}  // namespace tessera::server
