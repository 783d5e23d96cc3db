// The recovery plane's messages (recovery_listener.h). A connection to a process's recovery
// listener opens with a Hello naming the communicator (its tag), the rank it is for, the rank it
// is from, what it asks and which agreement; a vote may follow. Answers are one Reply each.
// Small and fixed: a connection that sends anything else is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/unique_id.h"

namespace ccl::recovery {

enum class Ask : uint32_t {
  kSubmit = 1,  // a participant's vote, to the agreement's coordinator; answered by the decision
  kWatch = 2,   // a coordinator watches a participant: answered by a decision it has, else held
                // open (its end means the participant's process is gone)
  kRevoke = 3,  // the sender revoked the communicator: no answer
  kHold = 4,    // held open while the receiver lives (a survivor's liveness during a shrink)
};

// A communicator on the recovery plane: its tag, and the key its ranks drew at the rendezvous
// (the tag alone is no secret: it names the shared-memory segments in /dev/shm).
struct CommName {
  std::string tag;
  Secret key{};
};

struct Hello {
  uint32_t magic = kMagic;
  uint32_t ask = 0;
  char comm_tag[16] = {};
  uint8_t key[16] = {};
  int32_t to = -1;                                // the rank of the communicator the message is for
  int32_t from = -1;                              // the rank that sends it
  uint64_t seq = 0;                               // the agreement's number on the communicator
  static constexpr uint32_t kMagic = 0x63636c52;  // "cclR"
};
static_assert(sizeof(Hello) == 56);

// A vote, and a decision: a flag, a set of failed ranks, and bytes the decision carries (the new
// communicator's rendezvous in a shrink).
struct Vote {
  int32_t flag = 0;
  std::vector<int32_t> failed;  // increasing
  std::vector<uint8_t> extra;
};
constexpr size_t kMaxFailed = 1 << 18;
constexpr size_t kMaxExtra = 4096;

enum class Reply : uint32_t { kDecision = 1, kUnknown = 2 };

Hello make_hello(Ask ask, const CommName& comm, int to, int from, uint64_t seq);
std::string tag_of(const Hello& hello);

// Whole messages with a deadline; a closed peer is RemoteError, a malformed one InternalError.
void send_hello(Socket& socket, const Hello& hello, Deadline deadline);
// A connection to a rank's listener that opened with `hello`: invalid if the rank's process is
// gone (refused, or closed under the hello). Timeout at the deadline.
Socket open_with_hello(const SocketAddress& listener, const Hello& hello, Deadline deadline);
Hello recv_hello(Socket& socket, Deadline deadline);
void send_vote(Socket& socket, const Vote& vote, Deadline deadline);
Vote recv_vote(Socket& socket, Deadline deadline);
void send_reply(Socket& socket, Reply reply, const Vote* decision, Deadline deadline);
// kDecision fills `decision`.
Reply recv_reply(Socket& socket, Vote* decision, Deadline deadline);

}  // namespace ccl::recovery
