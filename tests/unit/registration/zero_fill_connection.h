// A fake connection for executor tests: every send completes at once, every receive is filled
// with zeros at the next progress() once ready() says so; it notes each request's region and
// each send's data.
#pragma once

#include <cstddef>
#include <vector>

#include "transport/registered_region.h"
#include "transport/transport.h"

namespace ccl::algo {

class ZeroFillConnection : public transport::Connection {
 public:
  explicit ZeroFillConnection(int peer) : Connection(peer) {}
  void post_send(transport::SendRequest* r) override {
    send_regions.push_back(r->region);
    send_data.push_back(r->data);
    r->done_bytes = r->bytes;
    r->complete = true;
  }
  void post_recv(transport::RecvRequest* r) override { recvs_.push_back(r); }
  bool progress() override {
    if (!ready()) return false;
    bool moved = false;
    for (auto* r : recvs_) {
      if (r->complete) continue;
      recv_regions.push_back(r->region);
      std::vector<std::byte> zeros(r->bytes);
      if (r->bytes > 0) r->sink->consume(zeros.data(), 0, r->bytes);
      r->done_bytes = r->bytes;
      r->complete = true;
      moved = true;
    }
    recvs_.clear();
    return moved;
  }
  bool busy() const override { return !recvs_.empty(); }

  std::vector<const transport::RegisteredRegion*> send_regions, recv_regions;
  std::vector<const std::byte*> send_data;

 protected:
  // Whether the receives may complete now (a test's gate).
  virtual bool ready() const { return true; }

 private:
  std::vector<transport::RecvRequest*> recvs_;
};

}  // namespace ccl::algo
