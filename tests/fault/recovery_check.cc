// One rank of a recovery trial (README.md; recovery_trials.sh starts it through cclrun). Every
// rank runs a loop of verified operations; the victims (CHAOS_VICTIMS) die by SIGKILL at a chosen
// moment of a chosen phase, and every survivor recovers as a trainer would: on a failed call it
// revokes the communicator, shrinks it with CCL_SHRINK_ABORT (again if a rank dies during the
// shrink), checks who is left, and goes on with the loop on the new communicator.
//
//   CHAOS_VICTIMS   "RANK:PHASE:MS[,RANK:PHASE:MS]": PHASE is
//                     init        dies MS after it starts, while the ranks make the communicator
//                     collective  dies MS into the loop (allreduce/broadcast/allgather, NULL
//                     stream) group       the same, in a loop of grouped send/recv rings stream the
//                     same, with every operation queued on a cclStream_t shrink      dies MS after
//                     it enters its first shrink
//   CHAOS_DIR       where the victims write their stamps (DIR/stamp.RANK: CLOCK_REALTIME ms)
//   CHAOS_PASSES    loop passes after the recovery (default 20)
//
// A survivor prints, on success:
//   RECOVERED rank R (world rank) new_rank N size S members a,b,c at_ms T failed_call_ms F shrinks
//   K DONE rank R members a,b,c passes P
// where T is when the first collective on the new communicator (the allgather of the members'
// world ranks) succeeded and F when the call that failed returned (CLOCK_REALTIME ms), or
//   FAILED rank R result NAME at STEP: last error
// when it could not go on (a death during init leaves nothing to shrink), and exits 0; a wrong
// result prints CORRUPT and exits 5, anything unexpected BAD and exits 3.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

int64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

struct Victim {
  int rank = -1;
  std::string phase;
  long ms = 0;
};

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
    if (sscanf(item.c_str(), "%d:%31[a-z]:%ld", &v.rank, phase, &v.ms) == 3) {
      v.phase = phase;
      out.push_back(v);
    }
    start = end + 1;
  }
  return out;
}

std::string dir() {
  const char* d = getenv("CHAOS_DIR");
  return d != nullptr ? d : "/tmp";
}

// Dies MS from now, from a helper thread: the main thread is inside whatever it does then.
void die_in(long ms, int rank) {
  std::thread([ms, rank] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    const std::string path = dir() + "/stamp." + std::to_string(rank);
    if (FILE* f = fopen(path.c_str(), "w")) {
      fprintf(f, "%lld\n", static_cast<long long>(now_ms()));
      fclose(f);
    }
    raise(SIGKILL);
  }).detach();
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
  // Every rank's value is its world rank + 1 + iter: sums are exact in float at these sizes.
  const float mine = static_cast<float>(m.world[m.rank] + 1 + iter % 7);
  std::fill(in.begin(), in.end(), mine);
  float want = 0;
  for (int w : m.world) want += static_cast<float>(w + 1 + iter % 7);
  cclResult_t r = cclSuccess;
  if (phase == "group") {
    const int next = (m.rank + 1) % n, prev = (m.rank + n - 1) % n;
    if ((r = cclGroupStart()) != cclSuccess) return r;
    cclSend(in.data(), count, cclFloat, next, m.comm, nullptr);
    cclRecv(out.data(), count, cclFloat, prev, m.comm, nullptr);
    r = cclGroupEnd();
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

[[noreturn]] void failed(int rank, cclResult_t r, const char* step, cclComm_t comm) {
  printf("FAILED rank %d result %s at %s: %s\n", rank, cclGetErrorString(r), step,
         cclGetLastError(comm));
  fflush(stdout);
  if (r != cclRemoteError && r != cclTimeout) _exit(3);
  _exit(0);
}

}  // namespace

int main() {
  const int world_rank = atoi(getenv("CCL_RANK") != nullptr ? getenv("CCL_RANK") : "-1");
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

  int shrinks = 0, after = 0;
  int64_t failed_call_ms = 0;
  int total = 0;
  for (int iter = 0; ++total < 100000; ++iter) {
    r = pass(m, phase, iter, rng, world_rank);
    if (r == cclSuccess) {
      if (shrinks > 0 && ++after >= passes_after) break;
      if (shrinks == 0 && total > 20000) break;  // no victim reached us: end anyway
      continue;
    }
    if (r != cclRemoteError && r != cclTimeout) failed(world_rank, r, "a pass", m.comm);
    failed_call_ms = now_ms();
    // Recover: revoke (the other survivors stop now), then shrink to the ranks still alive.
    cclCommRevoke(m.comm, 0);
    if (me != nullptr && me->phase == "shrink") die_in(me->ms, world_rank);
    cclComm_t next = nullptr;
    cclResult_t s = cclRemoteError;
    for (int attempt = 0; attempt < 4 && s != cclSuccess; ++attempt) {
      s = cclCommShrink(m.comm, nullptr, 0, &next, nullptr, CCL_SHRINK_ABORT);
      if (s != cclSuccess && s != cclRemoteError) break;
    }
    if (s != cclSuccess) failed(world_rank, s, "shrink", m.comm);
    ++shrinks;
    if (m.stream != nullptr) cclStreamDestroy(m.stream), m.stream = nullptr;
    cclCommDestroy(m.comm);
    m.comm = next;
    cclCommUserRank(m.comm, &m.rank);
    int size = 0;
    cclCommCount(m.comm, &size);
    // Who is left, asked of the new communicator itself (the driver compares it with the world
    // less the victims). A failure here is one more death: recover again.
    std::vector<int> members(static_cast<size_t>(size));
    const int mine = world_rank;
    r = cclAllGather(&mine, members.data(), 1, cclInt32, m.comm, nullptr);
    if (r != cclSuccess) {
      m.world.assign(static_cast<size_t>(size), -1);
      continue;  // the next pass fails at once (revoked or failed) and recovers again
    }
    if (members[static_cast<size_t>(m.rank)] != world_rank ||
        !std::is_sorted(members.begin(), members.end())) {
      printf("BAD rank %d: the new communicator's ranks are world ranks %s (this is its rank %d)\n",
             world_rank, join(members).c_str(), m.rank);
      fflush(stdout);
      _exit(3);
    }
    m.world = members;
    rng.seed(17 + static_cast<unsigned>(shrinks));
    iter = -1;
    printf(
        "RECOVERED rank %d new_rank %d size %d members %s at_ms %lld failed_call_ms %lld "
        "shrinks %d\n",
        world_rank, m.rank, size, join(m.world).c_str(), static_cast<long long>(now_ms()),
        static_cast<long long>(failed_call_ms), shrinks);
    fflush(stdout);
    if (phase == "stream" && cclStreamCreate(&m.stream) != cclSuccess) _exit(3);
    after = 0;
  }
  printf("DONE rank %d members %s passes %d\n", world_rank, join(m.world).c_str(), after);
  fflush(stdout);
  if (m.stream != nullptr) cclStreamDestroy(m.stream);
  cclCommDestroy(m.comm);
  return 0;
}
