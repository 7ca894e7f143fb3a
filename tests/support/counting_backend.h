// CountingBackend: a c10d::Backend that forwards to another and counts the collectives it issues.
#pragma once

#include "distributed/forwarding_backend.h"

#include <atomic>

namespace ddp::test {

class CountingBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;

  const std::string getBackendName() const override { return "counting"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    ++broadcasts;
    for (const at::Tensor& x : t) broadcast_bytes += static_cast<int64_t>(x.nbytes());
    return ForwardingBackend::broadcast(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    ++allreduces;
    return ForwardingBackend::allreduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& t,
                                                     const c10d::AllreduceCoalescedOptions& o) override {
    ++allreduces;
    return ForwardingBackend::allreduce_coalesced(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    ++others;
    return ForwardingBackend::allgather(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    ++others;
    return ForwardingBackend::_allgather_base(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    ++others;
    return ForwardingBackend::barrier(o);
  }

  std::atomic<int64_t> allreduces{0}, broadcasts{0}, others{0};
  std::atomic<int64_t> broadcast_bytes{0};  // the broadcast tensors' bytes, as this rank passed them
};

}  // namespace ddp::test
