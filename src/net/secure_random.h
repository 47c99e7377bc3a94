// Unpredictable numbers from the kernel's CSPRNG (getrandom(2)) for what a host off the path
// must not guess: QPNs and memory keys (EngineConfig::identifier_key), first PSNs, the side
// channel's challenge. The engine never calls this: a driver draws the values and passes them
// in (the engine stays sans-IO and reproducible under a fixed seed).
#pragma once

#include <cstdint>
#include <span>

#include "net/sockets.h"

namespace mrc::net {

// Fills `out` (blocks only until the kernel's pool is initialised, at boot).
NetStatus secure_random_bytes(std::span<uint8_t> out);
// One value; never 0 (0 means "not keyed" in EngineConfig::identifier_key).
NetResult<uint64_t> secure_random_u64();

}  // namespace mrc::net
