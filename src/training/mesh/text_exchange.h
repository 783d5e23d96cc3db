// Texts of every rank, gathered on every rank: how DeviceMesh learns the places and transports
// that only each rank knows (the public API has no way to ask a communicator for them).
#pragma once

#include <string>
#include <vector>

#include "ccl/training/mesh.hpp"

namespace ccl::training {

// Collective over `comm`: returns every rank's `text`, by rank (the lengths by all-gather,
// then the texts by the uneven all-gather, end to end).
std::vector<std::string> all_gather_text(Communicator& comm, const std::string& text);

// A place as one line of text ("host\n0.2.1") and back; the host may hold any byte but '\n'.
std::string encode_place(const MeshPlace& place);
MeshPlace decode_place(const std::string& text);

}  // namespace ccl::training
