// ZeRO's sharded checkpoint: saved after two steps and loaded into a fresh engine (also of another
// stage), the third step lands exactly where the uninterrupted run does; files that do not fit are
// refused with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "../support/rank_threads.h"
#include "zero_model.h"

namespace {

using namespace zero_test;

std::string temp_prefix(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ccl-zero-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / "ckpt").string();
}

TEST(ZeroCheckpoint, ResumesExactlyAlsoInAnotherStage) {
  const std::string prefix = temp_prefix("resume");
  for (const auto& [saved, loaded] : {std::pair{2, 2}, std::pair{3, 3}, std::pair{2, 3}}) {
    ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
      Zero a(comm, model(), make_optimizer(Opt::Adam), {.stage = saved});
      load_initial(a);
      zero_iteration(a, comm.rank());
      zero_iteration(a, comm.rank());
      a.save(prefix);
      zero_iteration(a, comm.rank());
      const auto uninterrupted = full_params(a);

      Zero b(comm, model(), make_optimizer(Opt::Adam), {.stage = loaded});
      b.load(prefix);
      EXPECT_EQ(b.optimizer().steps(), 2);
      zero_iteration(b, comm.rank());
      EXPECT_EQ(full_params(b), uninterrupted)
          << "saved in stage " << saved << ", loaded in " << loaded;
    });
  }
  std::filesystem::remove_all(std::filesystem::path(prefix).parent_path());
}

TEST(ZeroCheckpoint, RefusesFilesThatDoNotFit) {
  const std::string prefix = temp_prefix("refuse");
  ccl_test::run_ranks(2, [&](ccl::Communicator& comm) {
    Zero a(comm, model(), make_optimizer(Opt::Sgd), {.stage = 2});
    load_initial(a);
    a.save(prefix);
    std::vector<ZeroParam> other = model();
    other[3].count = 121;
    Zero b(comm, other, make_optimizer(Opt::Sgd), {.stage = 2});
    try {
      b.load(prefix);
      ADD_FAILURE() << "loaded";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("parameter 3 has 120 values in unit 1, not 121"),
                std::string::npos)
          << e.what();
    }
    Zero c(comm, model(), make_optimizer(Opt::Adam), {.stage = 2});
    EXPECT_THROW(c.load(prefix), std::invalid_argument);  // an SGD state into Adam
    EXPECT_THROW(c.load(prefix + "-missing"), std::invalid_argument);
  });
  std::filesystem::remove_all(std::filesystem::path(prefix).parent_path());
}

}  // namespace
