// What the engine's tests share: a network of ports timed by hand, and programs written as rounds.
#pragma once

#include <string>
#include <vector>

#include "network.h"
#include "program.h"

namespace ccl::sim {

// Every rank has a send port and a receive port of `gbps`, and a core of `reduce` GB/s; every
// pair has latency `alpha`. `memory`: every resource is a CPU copying through memory
// (Resource::memory), slowed by SimOptions::memory_scale.
class PortNetwork : public Network {
 public:
  PortNetwork(int n, double alpha, double gbps, double reduce, double overhead = 0,
              bool memory = false)
      : n_(n), alpha_(alpha), reduce_(reduce), overhead_(overhead) {
    for (int r = 0; r < n; ++r) {
      const std::string rank = "rank " + std::to_string(r);
      res_.push_back({rank + " tx", gbps, memory});
      res_.push_back({rank + " rx", gbps, memory});
      res_.push_back({rank + " core", reduce, memory});
    }
  }
  int nranks() const override { return n_; }
  const std::vector<Resource>& resources() const override { return res_; }
  Route route(int from, int to) const override {
    Route r;
    r.alpha_us = alpha_;
    r.send_us = send_us_;
    r.add(uint32_t(3 * from));
    r.add(uint32_t(3 * to + 1));
    r.link = "test";
    return r;
  }
  uint32_t core_of(int rank) const override { return uint32_t(3 * rank + 2); }
  double copy_gbps() const override { return reduce_ * 2; }
  double reduce_gbps() const override { return reduce_; }
  double call_overhead_us() const override { return overhead_; }
  // The part of alpha each sender spends per message (Route::send_us).
  void set_send_us(double us) { send_us_ = us; }

 private:
  int n_;
  double alpha_, reduce_, overhead_;
  double send_us_ = 0;
  std::vector<Resource> res_;
};

inline Program program(std::vector<std::vector<Op>> rounds) {
  Program p;
  for (const auto& round : rounds) {
    for (const Op& op : round) p.ops.push_back(op);
    p.round_end.push_back(uint32_t(p.ops.size()));
  }
  return p;
}

}  // namespace ccl::sim
