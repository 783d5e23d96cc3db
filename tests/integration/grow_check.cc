// Growing back after a failure, end to end (issue 30): one rank of a job started with
// `cclrun -np N --restart-failed` dies, the survivors shrink and go on, cclrun starts a
// replacement, and everyone grows back to N ranks.
//
//   1. Every rank makes the world communicator (cclCommInitFromEnv) and runs GROW_KILL_AFTER
//      verified allreduces; then the victim (world rank GROW_VICTIM) stamps the time and
//      SIGKILLs itself.
//   2. The survivors' next allreduce fails; they revoke the world communicator, shrink it
//      (CCL_SHRINK_ABORT, no list: the ranks still alive) and run GROW_PASSES verified
//      allreduces on the shrunk communicator.
//   3. Rank 0 of the shrunk communicator makes a unique id (cclGetUniqueId), writes it with the
//      sizes and the failed world ranks to GROW_DIR/grow.id (a temporary name, then rename, so
//      a reader never sees half a file) and broadcasts the id over the shrunk communicator.
//   4. cclrun starts the victim's replacement (CCL_REPLACEMENT=1, the victim's CCL_RANK). It
//      waits for GROW_DIR/grow.id (bounded by GROW_WAIT_S), and calls cclCommGrow with comm NULL
//      and its rank; the survivors call cclCommGrow on the shrunk communicator with rank -1 at
//      once, and wait there for it (bounded by CCL_TIMEOUT). A trainer would rather train on and
//      grow at a step boundary once the newcomer has announced itself
//      (docs/recovery-launchers.md; examples/elastic_ddp).
//   5. Verified allreduces on the grown communicator; rank g contributes 2^g times a pattern, so
//      the sums prove that all N ranks took part, each once.
//
// Ranks in the grown communicator: the survivors keep their *shrunk* ranks 0..S-1 (S = N minus
// the dead), in world order; the newcomers take S..N-1 in the order of the world ranks they stand
// in for. So the newcomer's rank is generally not the dead rank's world rank: with N = 4 and
// world rank 1 dead, the grown ranks 0, 1, 2, 3 are world ranks 0, 2, 3 and the newcomer (for 1).
// A program that keys data by rank (a shard, a pipeline stage) must map it through this table;
// this one prints it ("grown rank -> world rank").
//
// Environment: GROW_DIR (required; world rank 0 creates it, mode 0700, and removes a previous
// run's files from it; keep it private to the job: the id file holds a rendezvous secret),
// GROW_VICTIM (default 1), GROW_KILL_AFTER (default 5), GROW_PASSES (default 5), GROW_WAIT_S
// (default 60). Grown rank 0 prints the times (CLOCK_MONOTONIC, one host) from the kill to the
// first successful collective of the grown communicator, and from the replacement's start to it,
// then "grow_check: grown to N ranks ok" (the ctest's pass pattern). Anything wrong prints
// "FAIL grow_check ..." and exits 1.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ccl/ccl.h"

namespace {

int world_rank = -1;

int64_t now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

[[noreturn]] void fail(const std::string& what, cclComm_t comm) {
  printf("FAIL grow_check world rank %d%s: %s (%s)\n", world_rank,
         getenv("CCL_REPLACEMENT") != nullptr ? " (replacement)" : "", what.c_str(),
         cclGetLastError(comm));
  fflush(stdout);
  _exit(1);
}

int env_int(const char* name, int fallback) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long value = strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1000000) {
    fail(std::string(name) + "='" + text + "' is not a count", nullptr);
  }
  return static_cast<int>(value);
}

struct Settings {
  std::string dir;
  int world_size = 0;
  int victim = 1;
  int kill_after = 5;
  int passes = 5;
  int wait_s = 60;
  bool replacement = false;
};

Settings read_settings() {
  Settings s;
  world_rank = env_int("CCL_RANK", -1);
  s.world_size = env_int("CCL_WORLD_SIZE", 0);
  if (world_rank < 0 || s.world_size < 2)
    fail("run me under cclrun with at least 2 ranks", nullptr);
  if (s.world_size > 62) fail("at most 62 ranks (contributions are powers of two)", nullptr);
  const char* dir = getenv("GROW_DIR");
  if (dir == nullptr || *dir == '\0') fail("set GROW_DIR to a directory every rank sees", nullptr);
  s.dir = dir;
  s.victim = env_int("GROW_VICTIM", 1);
  s.kill_after = env_int("GROW_KILL_AFTER", 5);
  s.passes = std::max(1, env_int("GROW_PASSES", 5));
  s.wait_s = env_int("GROW_WAIT_S", 60);
  s.replacement = getenv("CCL_REPLACEMENT") != nullptr;
  if (s.victim >= s.world_size) fail("GROW_VICTIM is not a world rank", nullptr);
  return s;
}

// One verified allreduce: rank r contributes (2^r) * (1 + (i + iter) % 5) at index i, so every
// sum is (2^n - 1) * (1 + (i + iter) % 5) exactly when each of the n ranks took part once.
cclResult_t verified_allreduce(cclComm_t comm, int iter, const char* where) {
  int rank = -1, n = 0;
  cclCommUserRank(comm, &rank);
  cclCommCount(comm, &n);
  static const size_t kCounts[] = {1, 1000, 65539};
  const size_t count = kCounts[iter % 3];
  std::vector<int64_t> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = (int64_t{1} << rank) * (1 + (i + iter) % 5);
  const cclResult_t r =
      cclAllReduce(buf.data(), buf.data(), count, cclInt64, cclSum, comm, nullptr);
  if (r != cclSuccess) return r;
  const int64_t all = (int64_t{1} << n) - 1;
  for (size_t i = 0; i < count; ++i) {
    const int64_t want = all * static_cast<int64_t>(1 + (i + iter) % 5);
    if (buf[i] != want) {
      fail(std::string(where) + ": allreduce " + std::to_string(iter) + " index " +
               std::to_string(i) + " got " + std::to_string(buf[i]) + ", want " +
               std::to_string(want),
           comm);
    }
  }
  return cclSuccess;
}

void run_passes(cclComm_t comm, int passes, const char* where) {
  for (int i = 0; i < passes; ++i) {
    if (verified_allreduce(comm, i, where) != cclSuccess) {
      fail(std::string(where) + ": allreduce " + std::to_string(i), comm);
    }
  }
}

// Writes `text` to dir/name so that a reader sees all of it or nothing.
void publish(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string tmp = dir + "/." + name + "." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create " + tmp + ": " + strerror(errno), nullptr);
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok || rename(tmp.c_str(), (dir + "/" + name).c_str()) != 0) {
    fail("cannot write " + dir + "/" + name + ": " + strerror(errno), nullptr);
  }
}

// What the newcomers need to grow: the id, the grown size, how many members the shrunk
// communicator has (the newcomers' ranks start there) and which world ranks died (in order).
struct GrowInvitation {
  cclUniqueId id{};
  int nranks = 0;
  int members = 0;
  std::vector<int> failed;
};

std::string encode(const GrowInvitation& g) {
  std::ostringstream out;
  out << "nranks " << g.nranks << "\nmembers " << g.members << "\nfailed";
  for (int f : g.failed) out << ' ' << f;
  out << "\nid ";
  static const char kHex[] = "0123456789abcdef";
  for (char c : g.id.internal) {
    const auto b = static_cast<unsigned char>(c);
    out << kHex[b >> 4] << kHex[b & 15];
  }
  out << "\nend\n";
  return out.str();
}

bool decode(const std::string& text, GrowInvitation* g) {
  std::istringstream in(text);
  std::string word, hex, failed_line;
  if (!(in >> word >> g->nranks) || word != "nranks") return false;
  if (!(in >> word >> g->members) || word != "members") return false;
  if (!(in >> word) || word != "failed" || !std::getline(in, failed_line)) return false;
  std::istringstream failed(failed_line);
  for (int f; failed >> f;) g->failed.push_back(f);
  if (!(in >> word >> hex) || word != "id" || hex.size() != 2 * sizeof(g->id.internal))
    return false;
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  for (size_t i = 0; i < sizeof(g->id.internal); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    g->id.internal[i] = static_cast<char>(hi * 16 + lo);
  }
  return (in >> word) && word == "end";
}

// The newcomer's wait for the invitation: bounded, polling (the survivors may still be shrinking
// when cclrun starts the replacement).
GrowInvitation await_invitation(const Settings& s) {
  const std::string path = s.dir + "/grow.id";
  const int64_t until = now_us() + int64_t{s.wait_s} * 1000000;
  while (now_us() < until) {
    std::ifstream f(path);
    if (f) {
      std::stringstream text;
      text << f.rdbuf();
      GrowInvitation g;
      if (!decode(text.str(), &g)) fail(path + " is not a grow invitation", nullptr);
      return g;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  fail("no " + path + " after " + std::to_string(s.wait_s) + " s (GROW_WAIT_S)", nullptr);
}

int64_t read_stamp(const std::string& path) {
  std::ifstream f(path);
  long long t = 0;
  if (!(f >> t)) fail("cannot read the kill stamp " + path, nullptr);
  return t;
}

// When each step happened: the latest over the ranks that know it (0 where a rank does not).
enum Stamp { kKill, kReplacementStart, kInvitationRead, kFailedCall, kShrunk, kGrowCalled, kGrown };
constexpr int kStamps = 7;

double ms(int64_t from, int64_t to) { return static_cast<double>(to - from) / 1000.0; }

}  // namespace

int main() {
  int64_t stamps[kStamps] = {};
  stamps[kReplacementStart] = now_us();
  const Settings s = read_settings();
  const int n = s.world_size;
  cclComm_t shrunk = nullptr, grown = nullptr;
  GrowInvitation invitation;
  int grow_rank = -1;

  if (s.replacement) {
    // A newcomer: nothing to rejoin (the world's rendezvous is over); wait to be invited.
    invitation = await_invitation(s);
    stamps[kInvitationRead] = now_us();
    const auto it = std::find(invitation.failed.begin(), invitation.failed.end(), world_rank);
    if (it == invitation.failed.end() || invitation.nranks != n) {
      fail("the invitation is not for world rank " + std::to_string(world_rank) + " of " +
               std::to_string(n),
           nullptr);
    }
    grow_rank = invitation.members + static_cast<int>(it - invitation.failed.begin());
  } else {
    stamps[kReplacementStart] = 0;
    if (world_rank == 0) {
      // Before the world exists, so no replacement can read a previous run's file.
      if (mkdir(s.dir.c_str(), 0700) != 0 && errno != EEXIST) {
        fail("cannot create GROW_DIR " + s.dir + ": " + strerror(errno), nullptr);
      }
      unlink((s.dir + "/grow.id").c_str());
      unlink((s.dir + "/kill.stamp").c_str());
    }
    cclComm_t world = nullptr;
    if (cclCommInitFromEnv(&world) != cclSuccess) fail("cclCommInitFromEnv", nullptr);
    run_passes(world, s.kill_after, "world");
    if (world_rank == s.victim) {
      publish(s.dir, "kill.stamp", std::to_string(now_us()) + "\n");
      raise(SIGKILL);
    }
    // The victim is gone: this allreduce cannot complete.
    const cclResult_t r = verified_allreduce(world, s.kill_after, "world");
    if (r != cclRemoteError && r != cclTimeout) {
      fail(std::string("the allreduce after the kill gave ") + cclGetErrorString(r), world);
    }
    stamps[kFailedCall] = now_us();
    cclCommRevoke(world, 0);  // the other survivors stop at once, wherever they are
    cclResult_t sr = cclRemoteError;
    for (int attempt = 0; attempt < 3 && sr == cclRemoteError; ++attempt) {
      sr = cclCommShrink(world, nullptr, 0, &shrunk, nullptr, CCL_SHRINK_ABORT);
    }
    if (sr != cclSuccess) fail("cclCommShrink", world);
    stamps[kShrunk] = now_us();
    int failed[64], nfailed = 0;
    if (cclCommGetFailedRanks(world, failed, 64, &nfailed) != cclSuccess || nfailed != 1 ||
        failed[0] != s.victim) {
      fail("the world's failed ranks are not the victim alone", world);
    }
    cclCommDestroy(world);
    int members = 0, shrunk_rank = -1;
    cclCommCount(shrunk, &members);
    cclCommUserRank(shrunk, &shrunk_rank);
    if (members != n - 1) fail("the shrunk communicator has " + std::to_string(members), shrunk);
    run_passes(shrunk, s.passes, "shrunk");  // the job goes on, one rank short

    // Invite the replacement: the id through the file, and to the other survivors over the
    // shrunk communicator itself.
    if (shrunk_rank == 0) {
      if (cclGetUniqueId(&invitation.id) != cclSuccess) fail("cclGetUniqueId", nullptr);
      invitation.nranks = n;
      invitation.members = members;
      invitation.failed.assign(failed, failed + nfailed);
      publish(s.dir, "grow.id", encode(invitation));
    }
    if (cclBroadcast(invitation.id.internal, invitation.id.internal, sizeof(invitation.id.internal),
                     cclUint8, 0, shrunk, nullptr) != cclSuccess) {
      fail("the broadcast of the unique id", shrunk);
    }
    stamps[kGrowCalled] = now_us();
  }

  // Members keep their ranks (-1); a newcomer names its own.
  const cclResult_t gr =
      cclCommGrow(shrunk, n, &invitation.id, shrunk != nullptr ? -1 : grow_rank, &grown, nullptr);
  if (gr != cclSuccess) fail("cclCommGrow", shrunk);
  int size = 0, rank = -1;
  cclCommCount(grown, &size);
  cclCommUserRank(grown, &rank);
  if (size != n) fail("the grown communicator has " + std::to_string(size) + " ranks", grown);
  if (shrunk != nullptr) {
    int shrunk_rank = -1;
    cclCommUserRank(shrunk, &shrunk_rank);
    if (rank != shrunk_rank) fail("a member did not keep its rank", grown);
  } else if (rank != grow_rank) {
    fail("the newcomer is not rank " + std::to_string(grow_rank), grown);
  }
  if (verified_allreduce(grown, 0, "grown") != cclSuccess) fail("the first grown allreduce", grown);
  stamps[kGrown] = now_us();

  // Who is who now: the world rank each grown rank stands for (a newcomer: the one it replaces).
  std::vector<int32_t> world_of(static_cast<size_t>(n));
  const int32_t mine = world_rank;
  if (cclAllGather(&mine, world_of.data(), 1, cclInt32, grown, nullptr) != cclSuccess) {
    fail("the allgather of world ranks", grown);
  }
  if (rank == 0) {
    if (!std::is_sorted(world_of.begin(), world_of.end() - 1) || world_of[n - 1] != s.victim) {
      fail("the grown ranks are not the survivors in order, then the newcomer", grown);
    }
    stamps[kKill] = read_stamp(s.dir + "/kill.stamp");
    // Both files are spent: the newcomer is in, and the id names a rendezvous that is over.
    unlink((s.dir + "/grow.id").c_str());
    unlink((s.dir + "/kill.stamp").c_str());
  }
  if (cclAllReduce(stamps, stamps, kStamps, cclInt64, cclMax, grown, nullptr) != cclSuccess) {
    fail("the allreduce of the times", grown);
  }
  run_passes(grown, s.passes, "grown");
  if (rank == 0) {
    std::string table;
    for (int g = 0; g < n; ++g) {
      table += " " + std::to_string(g) + "->" + std::to_string(world_of[g]);
    }
    const char* transport = "?";
    cclCommPeerTransport(grown, n - 1, &transport);
    printf(
        "grow_check: grown rank -> world rank:%s (rank %d is the newcomer, for world rank %d; "
        "reached over %s)\n",
        table.c_str(), n - 1, s.victim, transport);
    const int64_t kill = stamps[kKill];
    printf(
        "grow_check: kill -> failure seen %.1f ms -> shrunk %.1f ms -> grow called %.1f ms -> "
        "first grown collective %.1f ms (target 5000 ms)\n",
        ms(kill, stamps[kFailedCall]), ms(kill, stamps[kShrunk]), ms(kill, stamps[kGrowCalled]),
        ms(kill, stamps[kGrown]));
    printf(
        "grow_check: the grow itself: replacement start -> first grown collective %.1f ms "
        "(it started %.1f ms after the kill and read the invitation %.1f ms after its start)\n",
        ms(stamps[kReplacementStart], stamps[kGrown]), ms(kill, stamps[kReplacementStart]),
        ms(stamps[kReplacementStart], stamps[kInvitationRead]));
    printf("grow_check: grown to %d ranks ok\n", n);
  }
  fflush(stdout);
  cclCommDestroy(grown);
  if (shrunk != nullptr) cclCommDestroy(shrunk);
  return 0;
}
