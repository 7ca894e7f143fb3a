// DDP's bucket rebuild with gradient views: zeroed gradients not held twice, others kept, training unchanged.
#include "distributed/ddp.h"
#include "optim/gradients.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include "distributed/process_group.h"
#include <torch/torch.h>

#include <algorithm>
#include <atomic>

namespace ddp::test {
namespace {

// Forwards to LibTorch's CPU allocator and tracks the bytes it has handed out and not yet had back.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    auto* held = new Held{inner_->allocate(n), static_cast<int64_t>(n), this};
    const int64_t now = held->owner->live += held->bytes;
    int64_t seen = held->owner->peak.load();
    while (now > seen && !held->owner->peak.compare_exchange_weak(seen, now)) {
    }
    return {held->inner.get(), held, &release, held->inner.device()};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  std::atomic<int64_t> live{0}, peak{0};

 private:
  struct Held {
    c10::DataPtr inner;
    int64_t bytes;
    CountingCpuAllocator* owner;
  };
  static void release(void* ctx) {
    auto* held = static_cast<Held*>(ctx);
    held->owner->live -= held->bytes;
    delete held;
  }
  c10::Allocator* inner_;
};

// Every CPU tensor of the test goes through the counter while this lives. The counter itself outlives the test:
// tensors it handed out may be freed later.
class ScopedCounting {
 public:
  ScopedCounting() : previous_(c10::GetAllocator(c10::DeviceType::CPU)) {
    static CountingCpuAllocator* counter = new CountingCpuAllocator(previous_);
    counter_ = counter;
    c10::SetAllocator(c10::DeviceType::CPU, counter_, kPriority);
  }
  ~ScopedCounting() { c10::SetAllocator(c10::DeviceType::CPU, previous_, kPriority); }
  CountingCpuAllocator& counter() { return *counter_; }

 private:
  static constexpr uint8_t kPriority = 200;  // above LibTorch's own registration
  c10::Allocator* previous_;
  CountingCpuAllocator* counter_;
};

DistContext world_of_one() {
  auto store = c10::make_intrusive<c10d::HashStore>();
  DistContext ctx;
  ctx.backend = "gloo";
  ctx.group = make_process_group(
      store, 0, 1, {{c10::DeviceType::CPU, "gloo", make_gloo_backend(store, 0, 1, std::chrono::seconds(60), {"lo"})}});
  return ctx;
}

// Six 512x512 layers: 6.3 MB of gradients, more than one bucket after the rebuild (the first holds 1 MiB).
std::shared_ptr<torch::nn::SequentialImpl> make_mlp() {
  torch::manual_seed(5);
  auto mlp = std::make_shared<torch::nn::SequentialImpl>();
  for (int i = 0; i < 6; ++i) {
    mlp->push_back(torch::nn::Linear(512, 512));
    mlp->push_back(torch::nn::Tanh());
  }
  return mlp;
}

struct Replica {
  std::shared_ptr<torch::nn::SequentialImpl> model = make_mlp();
  DistContext ctx = world_of_one();
  std::unique_ptr<DistributedDataParallel> ddp;
  torch::optim::SGD sgd{model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9)};
  torch::Tensor x = torch::randn({32, 512}, torch::TensorOptions().dtype(torch::kFloat32));

  explicit Replica(bool bucket_view) {
    DistConfig cfg;
    cfg.gradient_as_bucket_view = bucket_view;
    ddp = std::make_unique<DistributedDataParallel>(model, ctx, cfg);
  }
  void forward_backward() {
    ddp->pre_forward(true);
    torch::Tensor out = model->forward(x);
    ddp->post_forward(true, out);
    out.pow(2).mean().backward();
  }
  int64_t grad_bytes() const {
    int64_t n = 0;
    for (const auto& p : model->parameters()) n += static_cast<int64_t>(p.grad().nbytes());
    return n;
  }
  // The gradient of p is a dense view of one of the Reducer's current buckets.
  bool grad_in_bucket(const torch::Tensor& p) const {
    for (const auto& b : ddp->reducer().get_grad_buckets(/*return_zero_tensors=*/false))
      if (p.grad().is_alias_of(b.getBuffer())) return p.grad().is_non_overlapping_and_dense();
    return false;
  }
};

TEST(DdpRebuild, ZeroedGradientsAreNotHeldTwice) {
  ScopedCounting counting;
  Replica run(/*bucket_view=*/true);
  run.forward_backward();
  ASSERT_FALSE(run.ddp->buckets_rebuilt());
  zero_grad_in_place(run.sgd);
  const int64_t grads = run.grad_bytes();
  auto& c = counting.counter();
  const int64_t before = c.live.load();
  c.peak = before;
  run.ddp->pre_forward(true);  // the rebuild
  const int64_t peak = c.peak.load(), after = c.live.load();
  ASSERT_TRUE(run.ddp->buckets_rebuilt());
  EXPECT_GT(run.ddp->bucket_sizes().size(), 1u);
  // Without the swap the old buckets live until every gradient is copied: peak >= before + grads.
  EXPECT_LT(peak - before, grads / 10) << "gradient bytes " << grads;
  EXPECT_LE(after, before + grads / 10);
  for (const auto& p : run.model->parameters()) {
    EXPECT_TRUE(run.grad_in_bucket(p));
    EXPECT_EQ(p.grad().count_nonzero().item<int64_t>(), 0);
    EXPECT_FALSE(p.grad().signbit().any().item<bool>());
  }
}

TEST(DdpRebuild, GradientsThatAreNotZeroKeepTheirValues) {
  Replica run(/*bucket_view=*/true);
  run.forward_backward();
  std::vector<torch::Tensor> kept;
  for (const auto& p : run.model->parameters()) kept.push_back(p.grad().clone());
  // One gradient exactly zero but for a -0: not all bits zero, so it must be copied, sign included.
  auto params = run.model->parameters();
  {
    torch::NoGradGuard no_grad;
    params[1].grad().zero_();
    params[1].grad()[0] = -0.0;
  }
  kept[1] = params[1].grad().clone();
  run.ddp->pre_forward(true);
  ASSERT_TRUE(run.ddp->buckets_rebuilt());
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(run.grad_in_bucket(params[i])) << i;
    EXPECT_TRUE(torch::equal(params[i].grad(), kept[i])) << i;
  }
  EXPECT_TRUE(params[1].grad()[0].signbit().item<bool>());
}

TEST(DdpRebuild, TrainingEqualsGradientsOutsideTheBuckets) {
  Replica views(/*bucket_view=*/true), plain(/*bucket_view=*/false);
  for (Replica* r : {&views, &plain})
    for (int step = 0; step < 4; ++step) {
      zero_grad_in_place(r->sgd);
      r->forward_backward();
      r->sgd.step();
    }
  ASSERT_TRUE(views.ddp->buckets_rebuilt());
  auto a = views.model->parameters(), b = plain.model->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
}

}  // namespace
}  // namespace ddp::test
