# The two commands of the README. Everything else is plain CMake.
#   make run        installs what is missing, builds Release, runs a 2-rank all_reduce_perf sweep
#   make test       installs what is missing, builds, runs ctest
#   make asan       the sanitizer subset (cmake/test_subset.cmake: every test but the label
#                   "exhaustive", a few points of each parameter sweep) but the fault-injection
#                   trials and the netns runs in an ASan+UBSan build (build-asan/)
#   make asan-full  the same without the subset: every test but the fault trials
#   make tsan       the subset's unit tests in a TSan build (build-tsan/), which
#                   leaves out perf/ (its harness is single-threaded); with the CUDA toolkit, so
#                   the fake driver's tests (cuda_test: streams are threads) run under TSan too
#   make tsan-full  the same without the subset, and the integration tests too
#   make fuzz       builds the libFuzzer targets with clang (build-fuzz/, and libccl with them,
#                   without the CUDA toolkit: no parser touches CUDA, and CI so builds ccl both
#                   ways) and runs each for FUZZ_SECONDS
#   make fuzz-ci    the same targets, each for FUZZ_RUNS inputs from the fixed seed FUZZ_SEED
#                   (what .ci/run runs: the same inputs on every machine)
BUILD ?= build
JOBS ?= $(shell nproc)
NP ?= 2

.PHONY: deps build run test asan asan-full asan-build tsan tsan-full tsan-build fuzz fuzz-ci \
        fuzz-build clean format

deps:
	./scripts/install-deps.sh

# CMAKE_ARGS: more -D options for the Release build (.ci/run requires the CUDA toolkit and torch).
CMAKE_ARGS ?=
build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/tools/cclrun -np $(NP) $(BUILD)/perf/all_reduce_perf -b 8 -e 64M -f 2 -c 1

# Each build's tests keep their tuner cache (CCL_TUNER_CACHE) in the build folder they run in:
# not the user's, whose figures a sanitizer build's probe would not fit.
TEST_ENV = CCL_TUNER_CACHE=$$PWD/tuner-cache
test: build
	cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure -j $(JOBS) --timeout 600

# The tests the sanitizer subset leaves out carry this label (cmake/test_subset.cmake).
SUBSET_OUT = exhaustive
ASAN_CTEST = cd build-asan && $(TEST_ENV) ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) \
             --timeout 900
# The symbolic schedule sweeps (Sweep/) are single-threaded pure functions: nothing for TSan.
# The TSan build leaves out the perf harness (perf/, perf.* tests): its code is single-threaded,
# and its runs drive the library through the C API as integration.collectives does.
# UCX_MEM_EVENTS=no: UCX's memory hooks (it patches mmap/munmap to watch its registration cache)
# crash a TSan process at the first UCX context (TSan intercepts the same calls); the transport
# tests register nothing whose unmapping UCX would have to see.
# Unit tests only: they run ranks as threads of one process, where races show; the multi-process
# integration runs (a rank per process) took 250 of its 650 s of test time and run under ASan.
TSAN_LABELS ?= unit
TSAN_CTEST = cd build-tsan && $(TEST_ENV) TSAN_OPTIONS=halt_on_error=1 UCX_MEM_EVENTS=no ctest --output-on-failure -j $(JOBS) \
             --timeout 900 -L '$(TSAN_LABELS)'

asan-build: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCL_SANITIZE=address
	cmake --build build-asan -j $(JOBS)

# Not the netns runs either: the code they drive is what the integration runs drive over tcp
# and ucx between local ranks (they run here), and the Release run has them all. The *_perf runs
# over shm only: over tcp they run the same harness, and integration.* runs tcp here.
asan: asan-build
	$(ASAN_CTEST) -LE 'fault|netns|$(SUBSET_OUT)' -E '^perf\.run\.[a-z_]+\.tcp\.'

asan-full: asan-build
	$(ASAN_CTEST) -LE fault

tsan-build: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCL_SANITIZE=thread \
	      -DCCL_BUILD_PERF=OFF
	cmake --build build-tsan -j $(JOBS)

tsan: tsan-build
	$(TSAN_CTEST) -E '^Sweep/' -LE '$(SUBSET_OUT)'

tsan-full: TSAN_LABELS = unit|integration
tsan-full: tsan-build
	$(TSAN_CTEST) -E '^Sweep/'

FUZZ_SECONDS ?= 30
FUZZ_RUNS ?= 5000
FUZZ_SEED ?= 1
fuzz-build: deps
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCCL_FUZZ=ON \
	      -DCCL_ENABLE_CUDA=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzz_targets

fuzz: fuzz-build
	tests/fuzz/run_all.sh $(FUZZ_SECONDS) build-fuzz

fuzz-ci: fuzz-build
	tests/fuzz/run_all.sh --runs $(FUZZ_RUNS) --seed $(FUZZ_SEED) build-fuzz

format:
	git ls-files '*.cc' '*.h' '*.c' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
