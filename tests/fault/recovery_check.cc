// One rank of a recovery trial (README.md; recovery_trials.sh starts it through cclrun). Every
// rank runs a loop of verified operations; the victims (CHAOS_VICTIMS) die by SIGKILL at a chosen
// moment of a chosen phase, and every survivor recovers as a trainer would: on a failed call it
// revokes the communicator, shrinks it with CCL_SHRINK_ABORT (again if a rank dies during the
// shrink), checks who is left, and goes on with the loop on the new communicator.
//
//   CHAOS_VICTIMS  "RANK:PHASE:MS[,RANK:PHASE:MS]", PHASE one of:
//                    init        dies MS after it starts, while the ranks make the communicator
//                                (or, if that is done by then, in the loop's allreduces)
//                    collective  dies MS into the loop: allreduces on the NULL stream
//                    group       the same, in a loop of grouped send/recv rings
//                    stream      the same, every allreduce queued on a cclStream_t and waited
//                                for with cclStreamSynchronize
//                    shrink      dies MS after it enters its first recovery (the revoke, then
//                                the shrink), which the death of another victim started
//   CHAOS_DIR      where the ranks write DIR/pid.RANK (at start) and the victims DIR/stamp.RANK
//                  (their kill time, CLOCK_REALTIME ms)
//   CHAOS_PASSES   loop passes after the last recovery (default 20)
//
// Every rank knows the victims: the loop goes on until none of them is a member any more and
// CHAOS_PASSES passes have run since the last recovery (at most 20000 passes in all), so a late
// victim still dies inside the loop. That is the only use the survivors make of the list; what
// failed is learnt from the library.
//
// A survivor prints, after each recovery,
//   RECOVERED rank R new_rank N size S members a,b,c at_ms T failed_call_ms F shrinks K
//             revoke_ms A shrink_ms B destroy_ms C check_ms D
// (one line) where R is its world rank, members the world ranks of the new communicator, T when
// its first collective (the allgather of the members' world ranks) succeeded and F when the call
// that started the recovery failed (CLOCK_REALTIME ms), A..D the time this recovery spent in
// cclCommRevoke, cclCommShrink, destroying the old communicator and the allgather; at the end
//   DONE rank R members a,b,c passes P at_ms T
// and exits 0. When it cannot go on (a death during init leaves nothing to shrink) it prints
//   FAILED rank R result NAME at STEP: last error
// (NAME as cclRemoteError, STEP one of init, a pass, shrink, the allgather after the shrink)
// and exits 0 for cclRemoteError or cclTimeout, 3 for anything else; a wrong result prints
// CORRUPT and exits 5, anything else unexpected BAD and exits 3.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"
#include "trial_files.h"

namespace {

using ccl::fault::now_ms;
using ccl::fault::write_file;

// Bounds of the loop and of the recovery (the trials' victims die well inside them).
constexpr int kMaxPasses = 20000;
constexpr int kMaxRounds = 4;          // revoke + shrink + allgather, again after a death in it
constexpr int kMaxShrinkAttempts = 4;  // cclCommShrink again after a death during the shrink

struct Victim {
  int rank = -1;
  std::string phase;
  long ms = 0;
};

bool known_phase(const std::string& p) {
  return p == "init" || p == "collective" || p == "group" || p == "stream" || p == "shrink";
}

// Parses CHAOS_VICTIMS; exits 3 on a malformed item (a typo must not make a trial without deaths).
std::vector<Victim> parse_victims(const char* text) {
  std::vector<Victim> out;
  if (text == nullptr) return out;
  std::string s(text);
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(start, end - start);
    Victim v;
    char phase[32] = {};
    int used = 0;
    if (sscanf(item.c_str(), "%d:%31[a-z]:%ld%n", &v.rank, phase, &v.ms, &used) != 3 ||
        used != static_cast<int>(item.size()) || !known_phase(phase) || v.ms < 0) {
      printf("BAD: CHAOS_VICTIMS item '%s' is not RANK:PHASE:MS\n", item.c_str());
      fflush(stdout);
      _exit(3);
    }
    v.phase = phase;
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

std::string dir() {
  const char* d = getenv("CHAOS_DIR");
  return d != nullptr ? d : "/tmp";
}

// How a victim's process ends: by its kill or by the main thread's exit, whichever claims it
// first. Without this a rank whose init failed could exit while its killer thread was stamping:
// the driver saw a stamp (half-written) from a rank that exited instead of dying (seen in CI).
enum Ending : int { kRunning = 0, kKilled = 1, kExiting = 2 };
std::atomic<int> g_ending{kRunning};

// Dies MS from now, from a helper thread: the main thread is inside whatever it does then. If
// the main thread is already on its way out, the victim did not die and writes no stamp.
void die_in(long ms, int rank) {
  std::thread([ms, rank] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    int running = kRunning;
    if (!g_ending.compare_exchange_strong(running, kKilled)) return;
    write_file(dir() + "/stamp." + std::to_string(rank), std::to_string(now_ms()) + "\n");
    raise(SIGKILL);
  }).detach();
}

// Every exit of main goes through here. When the killer thread has claimed the ending, it is
// stamping and about to raise SIGKILL: wait for it (bounded; the kill takes microseconds).
[[noreturn]] void end_process(int status) {
  int running = kRunning;
  if (!g_ending.compare_exchange_strong(running, kExiting)) {
    for (int i = 0; i < 200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fflush(stdout);
  _exit(status);
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// The state of one survivor: its communicator, and the world ranks its ranks stand for.
struct Member {
  cclComm_t comm = nullptr;
  std::vector<int> world;  // world rank of each rank of comm
  int rank = 0;            // in comm
  cclStream_t stream = nullptr;
};

// One verified pass in `phase`'s style. Returns the failing result (cclSuccess if none); exits 5
// on a wrong result.
cclResult_t pass(Member& m, const std::string& phase, int iter, std::mt19937& rng, int world_rank) {
  const int n = static_cast<int>(m.world.size());
  const size_t counts[] = {1, 7, 1000, 65536, 262147};
  const size_t count = counts[rng() % 5];
  std::vector<float> in(count), out(count);
  // Every rank's value is its world rank + 1 + iter % 7: sums are exact in float at these sizes.
  const float mine = static_cast<float>(m.world[m.rank] + 1 + iter % 7);
  std::fill(in.begin(), in.end(), mine);
  float want = 0;
  for (int w : m.world) want += static_cast<float>(w + 1 + iter % 7);
  cclResult_t r = cclSuccess;
  if (phase == "group") {
    const int next = (m.rank + 1) % n, prev = (m.rank + n - 1) % n;
    if ((r = cclGroupStart()) != cclSuccess) return r;
    const cclResult_t s = cclSend(in.data(), count, cclFloat, next, m.comm, nullptr);
    const cclResult_t v = cclRecv(out.data(), count, cclFloat, prev, m.comm, nullptr);
    r = cclGroupEnd();
    if (r == cclSuccess) r = s != cclSuccess ? s : v;
    want = static_cast<float>(m.world[prev] + 1 + iter % 7);
  } else if (phase == "stream") {
    r = cclAllReduce(in.data(), out.data(), count, cclFloat, cclSum, m.comm, m.stream);
    if (r == cclSuccess) r = cclStreamSynchronize(m.stream);
  } else {
    r = cclAllReduce(in.data(), out.data(), count, cclFloat, cclSum, m.comm, nullptr);
  }
  if (r != cclSuccess) return r;
  for (size_t i = 0; i < count; ++i) {
    if (out[i] != want) {
      printf("CORRUPT rank %d iter %d phase %s count %zu index %zu got %g want %g members %s\n",
             world_rank, iter, phase.c_str(), count, i, out[i], want, join(m.world).c_str());
      fflush(stdout);
      _exit(5);
    }
  }
  return cclSuccess;
}

const char* result_name(cclResult_t r) {
  static const char* const names[] = {
      "cclSuccess",       "cclUnhandledCudaError", "cclSystemError",
      "cclInternalError", "cclInvalidArgument",    "cclInvalidUsage",
      "cclRemoteError",   "cclInProgress",         "cclTimeout"};
  const int i = static_cast<int>(r);
  return i >= 0 && i < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[i] : "unknown";
}

[[noreturn]] void failed(int rank, cclResult_t r, const char* step, cclComm_t comm) {
  printf("FAILED rank %d result %s at %s: %s\n", rank, result_name(r), step, cclGetLastError(comm));
  end_process(r == cclRemoteError || r == cclTimeout ? 0 : 3);
}

// Recovers m after a failed call: revoke, shrink (again while ranks die during it), then learn
// the members with an allgather on the new communicator; a failure of that allgather is one more
// death, and the whole round runs again. Exits through failed() when it cannot recover.
void recover(Member& m, const std::string& phase, const Victim* me, int world_rank, int& shrinks,
             int64_t failed_call_ms) {
  static bool shrink_death_armed = false;
  cclResult_t last = cclRemoteError;
  // Where the time goes, over all rounds (ms): revoke, shrink, destroying the old communicator
  // (and its stream), the allgather on the new one.
  int64_t revoke_ms = 0, shrink_ms = 0, destroy_ms = 0, check_ms = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    // The other survivors stop now, wherever they are.
    int64_t t = now_ms();
    cclCommRevoke(m.comm, 0);
    revoke_ms += now_ms() - t;
    if (me != nullptr && me->phase == "shrink" && !shrink_death_armed) {
      shrink_death_armed = true;
      die_in(me->ms, world_rank);
    }
    cclComm_t next = nullptr;
    cclResult_t s = cclRemoteError;
    t = now_ms();
    for (int attempt = 0; attempt < kMaxShrinkAttempts && s != cclSuccess; ++attempt) {
      s = cclCommShrink(m.comm, nullptr, 0, &next, nullptr, CCL_SHRINK_ABORT);
      if (s != cclSuccess && s != cclRemoteError) break;
    }
    shrink_ms += now_ms() - t;
    if (s != cclSuccess) failed(world_rank, s, "shrink", m.comm);
    ++shrinks;
    t = now_ms();
    if (m.stream != nullptr) cclStreamDestroy(m.stream), m.stream = nullptr;
    cclCommDestroy(m.comm);
    destroy_ms += now_ms() - t;
    m.comm = next;
    cclCommUserRank(m.comm, &m.rank);
    int size = 0;
    cclCommCount(m.comm, &size);
    if (phase == "stream" && cclStreamCreate(&m.stream) != cclSuccess) {
      printf("BAD rank %d: cclStreamCreate failed after the shrink\n", world_rank);
      fflush(stdout);
      _exit(3);
    }
    // Who is left, asked of the new communicator itself (the driver compares it with the world
    // less the victims).
    std::vector<int> members(static_cast<size_t>(size), -1);
    const int mine = world_rank;
    t = now_ms();
    last = cclAllGather(&mine, members.data(), 1, cclInt32, m.comm, nullptr);
    check_ms += now_ms() - t;
    if (last != cclSuccess) {
      if (last != cclRemoteError && last != cclTimeout) break;
      continue;  // a rank died after the shrink: recover again
    }
    if (members[static_cast<size_t>(m.rank)] != world_rank ||
        !std::is_sorted(members.begin(), members.end()) ||
        std::adjacent_find(members.begin(), members.end()) != members.end()) {
      printf("BAD rank %d: the new communicator's ranks are world ranks %s (this is its rank %d)\n",
             world_rank, join(members).c_str(), m.rank);
      fflush(stdout);
      _exit(3);
    }
    m.world = members;
    printf(
        "RECOVERED rank %d new_rank %d size %d members %s at_ms %lld failed_call_ms %lld "
        "shrinks %d revoke_ms %lld shrink_ms %lld destroy_ms %lld check_ms %lld\n",
        world_rank, m.rank, size, join(m.world).c_str(), static_cast<long long>(now_ms()),
        static_cast<long long>(failed_call_ms), shrinks, static_cast<long long>(revoke_ms),
        static_cast<long long>(shrink_ms), static_cast<long long>(destroy_ms),
        static_cast<long long>(check_ms));
    fflush(stdout);
    return;
  }
  failed(world_rank, last, "the allgather after the shrink", m.comm);
}

}  // namespace

int main() {
  const int world_rank = atoi(getenv("CCL_RANK") != nullptr ? getenv("CCL_RANK") : "-1");
  write_file(dir() + "/pid." + std::to_string(world_rank), std::to_string(getpid()) + "\n");
  const std::vector<Victim> victims = parse_victims(getenv("CHAOS_VICTIMS"));
  const int passes_after = getenv("CHAOS_PASSES") ? atoi(getenv("CHAOS_PASSES")) : 20;
  std::string phase = "collective";
  const Victim* me = nullptr;
  for (const Victim& v : victims) {
    if (v.phase != "init" && v.phase != "shrink") phase = v.phase;
    if (v.rank == world_rank) me = &v;
  }
  // The same choices on every rank (sizes must match); after each recovery every survivor starts
  // over from the same state, wherever the failure caught it.
  std::mt19937 rng(17);
  if (me != nullptr && me->phase == "init") die_in(me->ms, world_rank);

  Member m;
  cclResult_t r = cclCommInitFromEnv(&m.comm);
  if (r != cclSuccess) failed(world_rank, r, "init", nullptr);
  int world = 0;
  cclCommCount(m.comm, &world);
  cclCommUserRank(m.comm, &m.rank);
  for (int i = 0; i < world; ++i) m.world.push_back(i);
  if (phase == "stream" && cclStreamCreate(&m.stream) != cclSuccess) _exit(3);
  if (me != nullptr && me->phase != "init" && me->phase != "shrink") die_in(me->ms, world_rank);

  auto victims_left = [&] {
    for (const Victim& v : victims) {
      if (std::find(m.world.begin(), m.world.end(), v.rank) != m.world.end()) return true;
    }
    return false;
  };
  int shrinks = 0, after = 0;
  for (int iter = 0, total = 0; total < kMaxPasses; ++iter, ++total) {
    r = pass(m, phase, iter, rng, world_rank);
    if (r == cclSuccess) {
      if (++after >= passes_after && !victims_left()) break;
      continue;
    }
    if (r != cclRemoteError && r != cclTimeout) failed(world_rank, r, "a pass", m.comm);
    recover(m, phase, me, world_rank, shrinks, now_ms());
    rng.seed(17 + static_cast<unsigned>(shrinks));
    iter = -1;
    after = 0;
  }
  printf("DONE rank %d members %s passes %d at_ms %lld\n", world_rank, join(m.world).c_str(), after,
         static_cast<long long>(now_ms()));
  fflush(stdout);
  if (m.stream != nullptr) cclStreamDestroy(m.stream);
  cclCommDestroy(m.comm);
  end_process(0);
}
