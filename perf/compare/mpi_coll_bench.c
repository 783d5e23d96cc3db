/*
 * mpi_coll_bench: the *_perf sweeps through MPI (MPI_Allreduce, MPI_Bcast, MPI_Allgather,
 * MPI_Reduce_scatter_block, MPI_Alltoall), for perf/compare. Built once per MPI implementation
 * (Open MPI, MPICH): the source is plain MPI.
 *
 * Same flags (-b -e -i -f -n -w -a, -r root), the same timing (a barrier, `iters` back-to-back
 * calls with nccl-tests' buffer rotation, the per-call time combined across ranks as -a says), the
 * same sizes, units, bus bandwidth factors and table layout as the matching *_perf binary, so one
 * parser reads them all. -k (--collective) selects the collective: allreduce (float sum, the
 * default), broadcast (float, from rank -r, default 0), allgather, reducescatter (float sum) or
 * alltoall (float); not -C, which is nccl-tests' report_cputime. As in all_gather_perf,
 * reduce_scatter_perf and alltoall_perf, a size is the whole buffer (the gathered one, the one
 * scattered, the one exchanged): nranks pieces of size / nranks, rounded down to 16 bytes. Run it
 * under any MPI launcher, e.g. `mpirun -np 2 mpi_coll_bench --collective broadcast -b 8 -e 64M`.
 *
 * Built with -DCOLL_BENCH_ONECCL and oneccl_calls.cc, the timed calls are Intel oneCCL's instead
 * (MPI starts the ranks, carries oneCCL's rendezvous and times): oneccl_coll_bench.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ALLREDUCE, BROADCAST, ALLGATHER, REDUCESCATTER, ALLTOALL };
static const char* const kNames[] = {"allreduce", "broadcast", "allgather", "reducescatter",
                                     "alltoall"};
#ifdef COLL_BENCH_ONECCL
static const char* const kCalls[] = {"ccl::allreduce float sum", "ccl::broadcast float",
                                     "ccl::allgather float", "ccl::reduce_scatter float sum",
                                     "ccl::alltoall float"};
/* oneccl_calls.cc */
int oneccl_setup(int rank, int nranks, char* name, size_t name_size);
void oneccl_run(int collective, char* send, char* recv, size_t count, int root, int rank,
                int in_place);
void oneccl_teardown(void);
static char oneccl_name[256];
#else
static const char* const kCalls[] = {"MPI_Allreduce float sum", "MPI_Bcast float",
                                     "MPI_Allgather float", "MPI_Reduce_scatter_block float sum",
                                     "MPI_Alltoall float"};
#endif

typedef struct {
  size_t min_bytes, max_bytes, step_bytes, step_factor;
  int iters, warmup_iters, average, collective, root;
} Options;

/* nccl-tests' size syntax: a number with an optional K/M/G suffix (binary units). */
static double parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  double unit = 1;
  if (end == s || v < 0) return -1;
  while (*end == ' ') ++end;
  if (*end) {
    switch (*end) {
      case 'G':
      case 'g':
        unit = 1024.0 * 1024 * 1024;
        break;
      case 'M':
      case 'm':
        unit = 1024.0 * 1024;
        break;
      case 'K':
      case 'k':
        unit = 1024.0;
        break;
      default:
        return -1;
    }
    if (end[1]) return -1;
  }
  return v * unit;
}

static int parse_int(const char* s, long lo, long hi, int* out) {
  char* end = NULL;
  long v = strtol(s, &end, 0);
  if (end == s || *end || v < lo || v > hi) return 0;
  *out = (int)v;
  return 1;
}

static void usage(const char* prog) {
  printf(
      "USAGE: %s [-b minbytes] [-e maxbytes] [-i stepbytes] [-f stepfactor] [-n iters]\n"
      "       [-w warmup_iters] [-a 0/1/2/3 (rank0/avg/min/max time)]\n"
      "       [-k,--collective allreduce|broadcast|allgather|reducescatter|alltoall]\n"
      "       [-r root (broadcast)] [-h]\n",
      prog);
}

static int parse_args(int argc, char** argv, Options* o) {
  int i, v;
  double d;
  for (i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "-h") == 0) return 0;
    if (strcmp(a, "--collective") == 0) a = "-k";
    if (a[0] != '-' || a[1] == '\0' || a[2] != '\0' || i + 1 >= argc) goto bad;
    const char* val = argv[++i];
    switch (a[1]) {
      case 'b':
        if ((d = parse_size(val)) < 0) goto bad;
        o->min_bytes = (size_t)d;
        break;
      case 'e':
        if ((d = parse_size(val)) < 0) goto bad;
        o->max_bytes = (size_t)d;
        break;
      case 'i':
        if ((d = parse_size(val)) < 0) goto bad;
        o->step_bytes = (size_t)d;
        break;
      case 'f':
        if (!parse_int(val, 0, 1 << 30, &v)) goto bad;
        o->step_factor = (size_t)v;
        break;
      case 'n':
        if (!parse_int(val, 1, 1 << 30, &o->iters)) goto bad;
        break;
      case 'w':
        if (!parse_int(val, 0, 1 << 30, &o->warmup_iters)) goto bad;
        break;
      case 'a':
        if (!parse_int(val, 0, 3, &o->average)) goto bad;
        break;
      case 'k':
        for (v = 0; v < (int)(sizeof kNames / sizeof kNames[0]); ++v) {
          if (strcmp(val, kNames[v]) == 0) break;
        }
        if (v == (int)(sizeof kNames / sizeof kNames[0])) goto bad;
        o->collective = v;
        break;
      case 'r':
        if (!parse_int(val, 0, 1 << 30, &o->root)) goto bad;
        break;
      default:
        goto bad;
    }
  }
  if (o->min_bytes > o->max_bytes || (o->step_factor > 1 && o->min_bytes == 0)) goto bad;
  return 1;
bad:
  fprintf(stderr, "%s: invalid arguments\n", argv[0]);
  return -1;
}

/* As the perf binaries print numbers: 2 decimals while they fit in `width`, then fewer. */
static void format_number(char* out, size_t n, double value, int width) {
  int digits = 0;
  double limit = 1;
  if (isfinite(value)) {
    for (; value >= limit && digits < 40; limit *= 10) ++digits;
  } else if (value > 0) {
    digits = 40;
  }
  if (digits < width - 2)
    snprintf(out, n, "%*.2f", width, value);
  else if (digits < width - 1)
    snprintf(out, n, "%*.1f", width, value);
  else if (digits < width + 1)
    snprintf(out, n, "%*.0f", width, value);
  else if (width >= 7)
    snprintf(out, n, "%*.1e", width, value);
  else
    snprintf(out, n, "%*.0e", width, value);
}

static int rank, nranks;
static Options opt = {32 << 20, 32 << 20, 1 << 20, 1, 20, 1, 1, ALLREDUCE, 0};
static char *sendbuf, *recvbuf;

/* The gather and scatter collectives move nranks pieces of one count each. */
static int has_pieces(void) { return opt.collective >= ALLGATHER; }

/* The count argument for a requested size, as the *_perf binaries compute it: size / nranks
 * floats rounded down to 16 bytes for the collectives with pieces, size floats for the others. */
static size_t param_count(size_t size) {
  size_t count = size / sizeof(float);
  return has_pieces() ? count / (size_t)nranks / 4 * 4 : count;
}

/* Elements in the largest buffer of one call: the size column, and what algbw counts. */
static size_t total_count(size_t count) { return has_pieces() ? count * (size_t)nranks : count; }

static void run(size_t count, int in_place, int iter) {
  size_t total = total_count(count) * sizeof(float);
  size_t steps = total ? opt.max_bytes / total : 1;
  size_t shift = total * ((size_t)iter % (steps ? steps : 1));
  void* recv = recvbuf + shift;
#ifdef COLL_BENCH_ONECCL
  oneccl_run(opt.collective, sendbuf + shift, recvbuf + shift, count, opt.root, rank, in_place);
  return;
#endif
  /* In place, MPI takes the input from the receive buffer (allgather: this rank's piece). */
  const void* send = in_place ? MPI_IN_PLACE : (const void*)(sendbuf + shift);
  switch (opt.collective) {
    case BROADCAST:
      /* MPI_Bcast has one buffer, so there is no out-of-place form: both columns broadcast the
       * receive buffer (the root's holds the data). A library with separate send and receive
       * buffers may also copy them at the root out of place; MPI never pays that here. */
      MPI_Bcast(recv, (int)count, MPI_FLOAT, opt.root, MPI_COMM_WORLD);
      return;
    case ALLGATHER:
      MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
      return;
    case REDUCESCATTER:
      MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return;
    case ALLTOALL:
      MPI_Alltoall(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
      return;
    default:
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
}

/* nccl-tests' factors: a broadcast moves every byte once per link, an allreduce 2(n-1)/n of it,
 * the gather and scatter collectives (n-1)/n of the whole buffer. */
static double bus_factor(void) {
  if (opt.collective == BROADCAST) return 1.0;
  if (opt.collective == ALLREDUCE) return 2.0 * (nranks - 1) / nranks;
  return (double)(nranks - 1) / nranks;
}

static double bench(size_t count, int in_place, double* busbw_sum, int* bw_count) {
  int iter;
  double t0, sec, algbw, busbw;
  char tbuf[32], abuf[32], bbuf[32];
  run(count, in_place, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  for (iter = 0; iter < opt.iters; ++iter) run(count, in_place, iter);
  sec = (MPI_Wtime() - t0) / opt.iters;
  if (opt.average != 0) {
    MPI_Op op = opt.average == 2 ? MPI_MIN : opt.average == 3 ? MPI_MAX : MPI_SUM;
    MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    if (opt.average == 1) sec /= nranks;
  }
  algbw = (double)(total_count(count) * sizeof(float)) / 1.0e9 / sec;
  busbw = algbw * bus_factor();
  *busbw_sum += busbw;
  ++*bw_count;
  format_number(tbuf, sizeof tbuf, sec * 1e6, 7);
  format_number(abuf, sizeof abuf, algbw, 6);
  format_number(bbuf, sizeof bbuf, busbw, 6);
  if (rank == 0) printf("  %7s  %6s  %6s  %5s", tbuf, abuf, bbuf, "N/A");
  MPI_Barrier(MPI_COMM_WORLD);
  return busbw;
}

int main(int argc, char** argv) {
  size_t size, bytes;
  int w, bw_count = 0, pr;
  double busbw_sum = 0;
  char host[256] = "";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  setvbuf(stdout, NULL, _IOLBF, 0);
  pr = parse_args(argc, argv, &opt);
  if (pr > 0 && opt.root >= nranks) {
    if (rank == 0)
      fprintf(stderr, "%s: root %d out of range (%d ranks)\n", argv[0], opt.root, nranks);
    pr = -1;
  }
  if (pr <= 0) {
    if (rank == 0) usage(argv[0]);
    MPI_Finalize();
    return pr == 0 ? 0 : 1;
  }
#ifdef COLL_BENCH_ONECCL
  if (oneccl_setup(rank, nranks, oneccl_name, sizeof oneccl_name) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  gethostname(host, sizeof host - 1);
  bytes = opt.max_bytes > 0 ? opt.max_bytes : 1;
  sendbuf = calloc(bytes, 1);
  recvbuf = calloc(bytes, 1);
  if (!sendbuf || !recvbuf) {
    fprintf(stderr, "out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sendbuf, 0, bytes); /* touch the pages outside the timed loop */
  memset(recvbuf, 0, bytes);
  if (rank == 0) {
    int version, subversion, len = 0, i;
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    MPI_Get_version(&version, &subversion);
    MPI_Get_library_version(library, &len);
    /* The library string can span lines (MPICH's does): keep its first, to name the build. */
    library[strcspn(library, "\n\r")] = '\0';
    for (i = 0; library[i]; ++i) {
      if (library[i] == '\t') library[i] = ' '; /* MPICH's "Version:\t4.0.2" */
    }
#ifdef COLL_BENCH_ONECCL
    printf("# oneccl_coll_bench: %s, over %s, %d ranks, host %s\n# library: %s\n",
           kCalls[opt.collective], library, nranks, host, oneccl_name);
#else
    printf("# mpi_coll_bench: %s, MPI %d.%d, %d ranks, host %s\n# library: %s\n",
           kCalls[opt.collective], version, subversion, nranks, host, library);
#endif
    printf(
        "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
        "iters: %d agg iters: 1 validation: 0 graph: 0\n#\n",
        opt.min_bytes, opt.max_bytes, opt.step_factor > 1 ? opt.step_factor : opt.step_bytes,
        opt.step_factor > 1 ? "factor" : "bytes", opt.warmup_iters, opt.iters);
    printf(
        "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
        "          \n",
        "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
  }
  for (size = opt.min_bytes ? opt.min_bytes : 1; size <= opt.max_bytes; size *= 2) {
    for (w = 0; w < opt.warmup_iters; ++w) {
      if (param_count(size)) run(param_count(size), 0, w);
    }
    if (size > opt.max_bytes / 2) break;
  }
  for (size = opt.min_bytes; size <= opt.max_bytes;) {
    size_t count = param_count(size);
    size_t next = opt.step_factor > 1 ? size * opt.step_factor : size + opt.step_bytes;
    if (count > 0) {
      int reduces = opt.collective == ALLREDUCE || opt.collective == REDUCESCATTER;
      if (rank == 0)
        printf("%12zu  %12zu  %8s  %6s  %6i", total_count(count) * sizeof(float), count, "float",
               reduces ? "sum" : "none", opt.collective == BROADCAST ? opt.root : -1);
      bench(count, 0, &busbw_sum, &bw_count);
      bench(count, 1, &busbw_sum, &bw_count);
      if (rank == 0) printf("\n");
    }
    if (next <= size) break;
    size = next;
  }
  if (rank == 0) {
    printf("# %-20s : %d %s\n", "Out of bounds values", 0, "OK");
    printf("# %-20s : %g \n#\n", "Avg bus bandwidth", bw_count ? busbw_sum / bw_count : 0.0);
  }
  free(sendbuf);
  free(recvbuf);
#ifdef COLL_BENCH_ONECCL
  oneccl_teardown();
#endif
  MPI_Finalize();
  return 0;
}
