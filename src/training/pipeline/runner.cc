// Runs one rank's pipeline schedule: each action's input is received before it runs, its output
// sent after, and the sends of one step share a ccl group with the receives of the next, as
// Megatron-LM's send_forward_recv_backward and friends do. A step is one action, but for the
// interleaved schedule's steady state, where it is a forward and the backward after it
// (Megatron's send_forward_backward_recv_forward_backward): with one group per action there, two
// ranks can each sit in a group whose send the other receives only in its next group, which
// deadlocks once messages outgrow the transport's buffering.
#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ccl/training/pipeline.hpp"

namespace ccl::training {

namespace {

// A transfer between virtual stages, named by the action that consumes it.
struct Transfer {
  PipelineAction::Kind kind;  // of the consuming action
  int microbatch;
  int virtual_stage;  // of the consuming action
  friend auto operator<=>(const Transfer&, const Transfer&) = default;
};

struct Endpoint {
  bool exists = false;
  int peer = 0;       // the rank at the other end
  Transfer transfer;  // what travels: named by its consumer
};

class Runner {
 public:
  Runner(ccl::Communicator& comm, const PipelineStage& stage, int virtual_stages)
      : comm_(comm),
        stage_(stage),
        rank_(comm.rank()),
        stages_(comm.size()),
        last_(stages_ * virtual_stages - 1) {}

  void run(PipelineKind kind, const std::vector<PipelineAction>& actions) {
    std::vector<Outgoing> sends;  // of the previous step, posted with this step's receives
    for (const std::vector<PipelineAction>& step : steps(kind, actions)) {
      std::vector<std::vector<float>> inputs(step.size());
      std::vector<Incoming> receives;
      for (size_t i = 0; i < step.size(); ++i) {
        const Endpoint in = input_of(step[i]);
        if (in.exists && in.peer != rank_) receives.push_back({in.peer, &inputs[i]});
      }
      exchange(sends, receives);
      sends.clear();
      for (size_t i = 0; i < step.size(); ++i) execute(step[i], inputs[i], sends);
    }
    exchange(sends, {});
  }

 private:
  struct Outgoing {
    int peer;
    std::vector<float> data;
  };
  struct Incoming {
    int peer;
    std::vector<float>* data;
  };

  // The actions grouped into steps. A rank whose schedule is all forwards, then all backwards
  // (GPipe, or interleaved with as many micro-batches as stages) has no steady state.
  static std::vector<std::vector<PipelineAction>> steps(
      PipelineKind kind, const std::vector<PipelineAction>& actions) {
    const auto first_backward =
        std::find_if(actions.begin(), actions.end(),
                     [](const PipelineAction& a) { return a.kind == PipelineAction::Backward; });
    const bool steady_state =
        std::any_of(first_backward, actions.end(),
                    [](const PipelineAction& a) { return a.kind == PipelineAction::Forward; });
    const bool pairs = kind == PipelineKind::Interleaved && steady_state;
    std::vector<std::vector<PipelineAction>> steps;
    for (size_t i = 0; i < actions.size(); ++i) {
      const bool joins = pairs && i > 0 && actions[i].kind == PipelineAction::Backward &&
                         actions[i - 1].kind == PipelineAction::Forward;
      if (joins) {
        steps.back().push_back(actions[i]);
      } else {
        steps.push_back({actions[i]});
      }
    }
    return steps;
  }

  int virtual_stage(const PipelineAction& a) const { return a.chunk * stages_ + rank_; }
  int rank_of(int vs) const { return vs % stages_; }

  // Where an action's input comes from: the previous virtual stage's activations for a forward,
  // the next virtual stage's gradient for a backward; none at the ends of the pipeline.
  Endpoint input_of(const PipelineAction& a) const {
    const int vs = virtual_stage(a);
    const int from = a.kind == PipelineAction::Forward ? vs - 1 : vs + 1;
    if (from < 0 || from > last_) return {};
    return {true, rank_of(from), {a.kind, a.microbatch, vs}};
  }

  // Where an action's output goes, and under which name its consumer expects it.
  Endpoint output_of(const PipelineAction& a) const {
    const int vs = virtual_stage(a);
    const int to = a.kind == PipelineAction::Forward ? vs + 1 : vs - 1;
    if (to < 0 || to > last_) return {};
    return {true, rank_of(to), {a.kind, a.microbatch, to}};
  }

  // Posts `sends` and `receives` as one group (sends first; order matters only between messages
  // in the same direction, which ccl matches in the order they were posted).
  void exchange(std::vector<Outgoing>& sends, const std::vector<Incoming>& receives) {
    if (stage_.activation_count == 0) return;  // nothing travels: every input stays empty
    if (sends.empty() && receives.empty()) return;
    ccl::Group group;
    for (Outgoing& s : sends) comm_.send(s.data, s.peer);
    for (const Incoming& r : receives) {
      r.data->assign(stage_.activation_count, 0.0f);
      comm_.recv(*r.data, r.peer);
    }
    group.end();
    wait_for_background_work();
  }

  // A non-blocking communicator returns from the group at once: the buffers must outlive the
  // transfers, so wait for them (each is bounded by the communicator's timeout).
  void wait_for_background_work() {
    cclResult_t state = comm_.async_error();
    while (state == cclInProgress) {
      std::this_thread::yield();
      state = comm_.async_error();
    }
    if (state != cclSuccess) {
      throw ccl::Error(state, std::string("ccl::training::run_pipeline: ") +
                                  cclGetErrorString(state) + ": " + comm_.last_error());
    }
  }

  // Runs one action: its input was received by the step's group, or is taken here from this
  // rank's own output (one rank holding several chunks); its output is queued for sending.
  void execute(const PipelineAction& a, std::vector<float>& input, std::vector<Outgoing>& sends) {
    const size_t count = stage_.activation_count;
    const Endpoint in = input_of(a);
    if (in.exists && in.peer == rank_ && count > 0) {
      auto local = local_.find(in.transfer);
      if (local == local_.end()) {
        throw std::logic_error("ccl::training::run_pipeline: an input on this rank was not made");
      }
      input = std::move(local->second);
      local_.erase(local);
    }
    const Endpoint out = output_of(a);
    std::vector<float> output(out.exists ? count : 0);
    if (a.kind == PipelineAction::Forward) {
      stage_.forward(a.chunk, a.microbatch, input, output);
    } else {
      stage_.backward(a.chunk, a.microbatch, input, output);
    }
    if (!out.exists || count == 0) return;
    if (out.peer == rank_) {
      local_[out.transfer] = std::move(output);
    } else {
      sends.push_back({out.peer, std::move(output)});
    }
  }

  ccl::Communicator& comm_;
  const PipelineStage& stage_;
  const int rank_;
  const int stages_;
  const int last_;                                // the last virtual stage
  std::map<Transfer, std::vector<float>> local_;  // outputs consumed on this rank
};

}  // namespace

void run_pipeline(ccl::Communicator& comm, PipelineKind kind, int microbatches,
                  const PipelineStage& stage, int virtual_stages) {
  if (!stage.forward || !stage.backward) {
    throw std::invalid_argument(std::string("ccl::training::run_pipeline: the stage's ") +
                                (!stage.forward ? "forward" : "backward") + " function is empty");
  }
  const auto actions =
      pipeline_schedule(kind, comm.size(), microbatches, comm.rank(), virtual_stages);
  Runner(comm, stage, virtual_stages).run(kind, actions);
}

}  // namespace ccl::training
