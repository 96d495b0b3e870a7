// gpucompute-load's command line (CLI11) -> LoadConfig.
#pragma once

#include "client/load/config.h"

namespace gpucompute::load {

// Parses argv into `config`. Returns -1 to go on, else the exit code (0 after --help, 2 for a
// bad flag, with the message printed).
int ParseFlags(int argc, char** argv, LoadConfig& config);

}  // namespace gpucompute::load
