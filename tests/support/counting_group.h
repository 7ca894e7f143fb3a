// CountingProcessGroup: a ProcessGroup that forwards to another and counts the collectives it issues.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>

namespace ddp::test {

class CountingProcessGroup : public c10d::ProcessGroup {
 public:
  explicit CountingProcessGroup(c10::intrusive_ptr<c10d::ProcessGroup> inner)
      : c10d::ProcessGroup(inner->getRank(), inner->getSize()), inner_(std::move(inner)) {}

  // Not "gloo": c10d::Logger static_casts groups that call themselves gloo to ProcessGroupGloo.
  const std::string getBackendName() const override { return "counting"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    ++broadcasts;
    return inner_->broadcast(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    ++allreduces;
    return inner_->allreduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& t,
                                                     const c10d::AllreduceCoalescedOptions& o) override {
    ++allreduces;
    return inner_->allreduce_coalesced(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    ++others;
    return inner_->allgather(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    ++others;
    return inner_->_allgather_base(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    ++others;
    return inner_->barrier(o);
  }

  std::atomic<int64_t> allreduces{0}, broadcasts{0}, others{0};

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> inner_;
};

}  // namespace ddp::test
