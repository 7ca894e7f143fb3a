// CountingProcessGroup: a ProcessGroup that forwards to another and counts the collectives it issues.
#pragma once

#include "dist/forwarding_group.h"

#include <atomic>

namespace ddp::test {

class CountingProcessGroup : public ForwardingProcessGroup {
 public:
  using ForwardingProcessGroup::ForwardingProcessGroup;

  const std::string getBackendName() const override { return "counting"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    ++broadcasts;
    return ForwardingProcessGroup::broadcast(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    ++allreduces;
    return ForwardingProcessGroup::allreduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& t,
                                                     const c10d::AllreduceCoalescedOptions& o) override {
    ++allreduces;
    return ForwardingProcessGroup::allreduce_coalesced(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    ++others;
    return ForwardingProcessGroup::allgather(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    ++others;
    return ForwardingProcessGroup::_allgather_base(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    ++others;
    return ForwardingProcessGroup::barrier(o);
  }

  std::atomic<int64_t> allreduces{0}, broadcasts{0}, others{0};
};

}  // namespace ddp::test
