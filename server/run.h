// tessera-server's process: flags, signals, start, load, drain on
// SIGTERM/SIGINT. Exit codes: 0 after a clean shutdown, 1 when the server
// cannot start or the model cannot be loaded, 2 for invalid flags.
#pragma once

#include "server/chat_renderer.h"

namespace tessera::server {

// `chat` renders chat prompts for the HTTP front (null: none).
int ServerMain(int argc, char** argv, const ChatRenderer* chat);

}  // namespace tessera::server
