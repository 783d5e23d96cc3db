// A live communicator under attack: each rank forks a stranger process (hostile_attacker.h) that
// attacks every TCP socket the rank listens on -- the rendezvous store (rank 0, from the start),
// the tcp transport's listener, and the store servers and listeners that each cclCommSplit opens
// -- with wrong secrets, garbage, half hellos, slow trickles and floods of held connections.
// Meanwhile the ranks run allreduces whose results are checked exactly, and splits. Nothing may
// fail, no result may be wrong, no stranger may get an answer, and no listener may be bound to
// every address. Run by cclrun over tcp (CCL_SHM_DISABLE=1). Usage: hostile_check [SECONDS]
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ccl/ccl.h"
#include "hostile_attacker.h"

namespace {

using Clock = std::chrono::steady_clock;

int g_rank = 0;
long g_failures = 0;

bool check(cclResult_t r, const char* what, cclComm_t comm) {
  if (r == cclSuccess) return true;
  fprintf(stderr, "rank %d: FAIL %s: %s: %s\n", g_rank, what, cclGetErrorString(r),
          cclGetLastError(comm));
  ++g_failures;
  return false;
}

// Input of `rank` at element i of iteration `it`: small integers, so every sum is exact.
int32_t input(int rank, size_t i, int it) {
  return static_cast<int32_t>((rank + 1) * static_cast<int>(i % 13 + 1) + it % 5);
}

// One allreduce of int32 and one of float on `comm`, their results checked element by element.
bool allreduce_round(cclComm_t comm, int rank, int nranks, size_t count, int it) {
  std::vector<int32_t> ints(count);
  std::vector<float> floats(count);
  for (size_t i = 0; i < count; ++i) {
    ints[i] = input(rank, i, it);
    floats[i] = static_cast<float>(input(rank, i, it + 1));
  }
  if (!check(cclAllReduce(ints.data(), ints.data(), count, cclInt32, cclSum, comm, nullptr),
             "allreduce int32", comm) ||
      !check(cclAllReduce(floats.data(), floats.data(), count, cclFloat32, cclSum, comm, nullptr),
             "allreduce float32", comm)) {
    return false;
  }
  long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t want_int = 0, want_float = 0;
    for (int r = 0; r < nranks; ++r) {
      want_int += input(r, i, it);
      want_float += input(r, i, it + 1);
    }
    wrong += ints[i] != want_int;
    wrong += floats[i] != static_cast<float>(want_float);
  }
  if (wrong > 0) {
    fprintf(stderr, "rank %d: FAIL %ld wrong elements of %zu at iteration %d\n", rank, wrong, count,
            it);
    g_failures += wrong;
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 8.0;
  const char* rank_env = getenv("CCL_RANK");
  g_rank = rank_env != nullptr ? atoi(rank_env) : 0;

  // The stranger comes first: rank 0's rendezvous socket (inherited from cclrun) is attacked
  // before and while the ranks join.
  ccl::hostile::Attacker attacker(getpid());
  if (g_rank == 0 && !attacker.wait_first_wave(5000)) {
    fprintf(stderr, "rank 0: FAIL the attacker found no listening socket to attack\n");
    ++g_failures;
  }

  cclComm_t comm = nullptr;
  int nranks = 0;
  const auto init_start = Clock::now();
  if (!check(cclCommInitFromEnv(&comm), "cclCommInitFromEnv", nullptr)) return 1;
  const double init_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - init_start).count();
  cclCommCount(comm, &nranks);
  cclCommUserRank(comm, &g_rank);

  const size_t counts[] = {1, 1000, 65536 + 3, 17};
  const auto start = Clock::now();
  int it = 0, splits = 0;
  for (;;) {
    // The ranks agree on going on (their clocks and failures differ), so that their collectives
    // always match.
    int32_t go =
        g_failures == 0 && std::chrono::duration<double>(Clock::now() - start).count() < seconds;
    if (!check(cclAllReduce(&go, &go, 1, cclInt32, cclMin, comm, nullptr), "allreduce go", comm) ||
        go == 0) {
      break;
    }
    // A failure is counted and ends the loop at the next agreement, on every rank at once.
    allreduce_round(comm, g_rank, nranks, counts[it % 4], it);
    cclComm_t sub = nullptr;
    // A split opens a new rendezvous and new listeners: new targets, attacked during setup.
    if (it % 8 == 7 && check(cclCommSplit(comm, 0, g_rank, &sub, nullptr), "cclCommSplit", comm)) {
      allreduce_round(sub, g_rank, nranks, 4096, it);
      check(cclCommDestroy(sub), "cclCommDestroy(split)", sub);
      ++splits;
    }
    ++it;
  }

  ccl::hostile::AttackReport report = attacker.stop(10000);
  if (!report.ok) {
    fprintf(stderr, "rank %d: FAIL the attacker did not report\n", g_rank);
    ++g_failures;
  }
  // Every rank's transport listens as long as it lives; rank 0 also serves the rendezvous.
  if (report.listeners < (g_rank == 0 ? 2 : 1)) {
    fprintf(stderr, "rank %d: FAIL only %ld listening socket(s) were attacked\n", g_rank,
            report.listeners);
    ++g_failures;
  }
  printf(
      "rank %d: init under attack %.0f ms, %d iterations, %d splits; attacker: %ld connections "
      "to %ld listener(s): %ld dropped, %ld refused, %ld held, %ld answered, %ld wildcard "
      "listener(s)\n",
      g_rank, init_ms, it, splits, report.tried, report.listeners, report.dropped, report.refused,
      report.held, report.answered, report.wildcard);

  // Effects of the strangers: any failure of the ranks, any stranger answered, any listener that
  // is reachable on every address.
  int64_t figures[2] = {report.tried, g_failures + report.answered + report.wildcard};
  if (check(cclAllReduce(figures, figures, 2, cclInt64, cclSum, comm, nullptr),
            "allreduce of the figures", comm)) {
    if (g_rank == 0) {
      printf("hostile connections tried: %lld, effects: %lld\n", static_cast<long long>(figures[0]),
             static_cast<long long>(figures[1]));
    }
  }
  const bool failed = g_failures + report.answered + report.wildcard > 0 || figures[1] > 0;
  check(cclCommDestroy(comm), "cclCommDestroy", nullptr);
  return failed || g_failures > 0 ? 1 : 0;
}
