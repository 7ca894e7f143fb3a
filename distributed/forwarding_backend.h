// ForwardingBackend: a c10d::Backend that hands every collective to the backend it wraps; subclasses override the
// ones they change (the shared-memory all-reduce, the tests' collective counter).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>
#include <utility>
#include <vector>

namespace ddp {

class ForwardingBackend : public c10d::Backend {
 public:
  explicit ForwardingBackend(c10::intrusive_ptr<c10d::Backend> inner)
      : c10d::Backend(inner->getRank(), inner->getSize()), inner_(std::move(inner)) {}

  // Subclasses name themselves, never "gloo": c10d code that sees that name casts the backend to ProcessGroupGloo.
  const std::string getBackendName() const override = 0;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    return inner_->broadcast(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    return inner_->allreduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& t,
                                                  const c10d::AllreduceOptions& o) override {
    return inner_->allreduce_sparse(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& t,
                                                     const c10d::AllreduceCoalescedOptions& o) override {
    return inner_->allreduce_coalesced(t, o);
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override {
    return inner_->reduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    return inner_->allgather(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    return inner_->_allgather_base(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& out,
                                                     std::vector<at::Tensor>& in,
                                                     const c10d::AllgatherOptions& o) override {
    return inner_->allgather_coalesced(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& out,
                                                                 std::vector<at::Tensor>& in,
                                                                 const c10d::AllgatherOptions& o) override {
    return inner_->allgather_into_tensor_coalesced(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                        const c10d::GatherOptions& o) override {
    return inner_->gather(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                                         const c10d::ScatterOptions& o) override {
    return inner_->scatter(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out, std::vector<std::vector<at::Tensor>>& in,
                                                const c10d::ReduceScatterOptions& o) override {
    return inner_->reduce_scatter(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                      const c10d::ReduceScatterOptions& o) override {
    return inner_->_reduce_scatter_base(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& out,
                                                                 std::vector<at::Tensor>& in,
                                                                 const c10d::ReduceScatterOptions& o) override {
    return inner_->reduce_scatter_tensor_coalesced(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& o) override {
    return inner_->alltoall_base(out, in, out_splits, in_splits, o);
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                          const c10d::AllToAllOptions& o) override {
    return inner_->alltoall(out, in, o);
  }
  void monitoredBarrier(const c10d::BarrierOptions& o, bool wait_all_ranks) override {
    inner_->monitoredBarrier(o, wait_all_ranks);
  }
  void setSequenceNumberForGroup() override { inner_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return inner_->getSequenceNumberForGroup(); }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& t, int dst, int tag) override {
    return inner_->send(t, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& t, int src, int tag) override {
    return inner_->recv(t, src, tag);
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& t, int tag) override {
    return inner_->recvAnysource(t, tag);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override { return inner_->barrier(o); }
  void setTimeout(std::chrono::milliseconds timeout) override { inner_->setTimeout(timeout); }
  void abort() override { inner_->abort(); }
  void shutdown() override { inner_->shutdown(); }

 protected:
  c10::intrusive_ptr<c10d::Backend> inner_;
};

}  // namespace ddp
