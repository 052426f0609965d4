// The tessera-cli commands. Each returns the process exit code.
#pragma once

#include "client/session.h"

namespace tessera::cli {

int RunGenerate(const Session& session);
int RunTokenize(const Session& session);
int RunDetokenize(const Session& session);
int RunInfo(const Session& session);

}  // namespace tessera::cli
