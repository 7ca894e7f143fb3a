// StepAllocator: LibTorch's CPU allocator for training; steady-state steps take their large temporaries from one
// planned block.
#include "memory/step_allocator.h"

#include "memory/step_plan.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ddp {
namespace {

constexpr uint64_t kMagic = 0x646470616c6c6f63ULL;
constexpr int64_t kPage = 4096;

enum class Kind : uint64_t { Heap = 1, Mapped = 2 };

// In front of every allocation that is not in a plan's block: how to give it back, and whether it is being recorded.
struct alignas(64) Header {
  uint64_t magic;
  Kind kind;
  void* base;
  size_t length;
  int64_t recorded;    // index in the recording, or -1
  uint64_t recording;  // which recording
};
static_assert(sizeof(Header) == 64, "the header keeps the data 64-byte aligned");

Header* header_of(void* data) { return reinterpret_cast<Header*>(static_cast<char*>(data) - sizeof(Header)); }

void* map_pages(size_t length) {
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(p != MAP_FAILED, "StepAllocator: out of memory mapping ", length, " bytes: ", std::strerror(errno));
  return p;
}

StepAllocator* g_installed = nullptr;

}  // namespace

// A plan's block and which of its allocations are in use.
struct PlannedBlock {
  char* base = nullptr;
  size_t length = 0;
  std::vector<Lifetime> recorded;  // the recorded step's allocations, planned or not
  StepPlan plan;                   // by recorded index; offset -1: not freed within the recorded step
  std::vector<bool> in_use;
  std::unordered_map<int64_t, int32_t> occupant;  // offset -> the allocation using it now
  int64_t live = 0;

  bool contains(const void* p) const { return base != nullptr && p >= base && p < base + length; }
};

struct StepAllocator::State {
  std::mutex mu;
  std::atomic<std::thread::id> training_thread{};
  int64_t steps = 0;
  bool in_step = false;
  // Recording a step.
  bool recording = false, record_next = false;
  uint64_t recording_id = 0;
  int64_t clock = 0;
  std::vector<Lifetime> recorded;
  int64_t plans_made = 0;
  // Replaying the plan.
  std::unique_ptr<PlannedBlock> current;
  std::vector<std::unique_ptr<PlannedBlock>> retired;  // still in use by tensors of earlier steps
  size_t next = 0;
  bool diverged = false, fell_back = false;
  Stats stats;

  // A large allocation on the training thread mapped on its own (counted), recorded when `recorded` >= 0.
  c10::DataPtr mapped(size_t bytes, int64_t recorded_index);

  void retire_current() {
    if (!current) return;
    if (current->live == 0)
      ::munmap(current->base, current->length);
    else
      retired.push_back(std::move(current));
    current.reset();
  }
};

StepAllocator::StepAllocator() : state_(std::make_unique<State>()) {}
StepAllocator::~StepAllocator() = default;

StepAllocator& StepAllocator::start_run() {
  static StepAllocator* allocator = [] {
    auto* a = new StepAllocator();  // never destroyed: tensors it handed out may outlive every run
    c10::SetAllocator(c10::DeviceType::CPU, a, /*priority=*/100);
    g_installed = a;
    return a;
  }();
  State& s = *allocator->state_;
  std::lock_guard<std::mutex> lock(s.mu);
  s.training_thread = std::this_thread::get_id();
  s.steps = 0;
  s.in_step = s.recording = s.record_next = false;
  s.plans_made = 0;
  s.retire_current();
  s.stats = Stats();
  return *allocator;
}

StepAllocator* StepAllocator::installed() { return g_installed; }

void StepAllocator::begin_step() {
  State& s = *state_;
  if (std::this_thread::get_id() != s.training_thread.load()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.steps;
  ++s.stats.steps;
  s.in_step = true;
  s.next = 0;
  s.diverged = s.fell_back = false;
  if ((s.steps == kRecordedStep || s.record_next) && s.plans_made < kMaxPlans) {
    s.retire_current();
    s.recording = true;
    s.record_next = false;
    ++s.recording_id;
    s.recorded.clear();
    s.clock = 0;
  }
}

void StepAllocator::end_step() {
  State& s = *state_;
  if (std::this_thread::get_id() != s.training_thread.load()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.in_step) return;
  s.in_step = false;
  if (s.recording) {
    s.recording = false;
    ++s.plans_made;
    ++s.stats.plans;
    auto block = std::make_unique<PlannedBlock>();
    block->plan = plan_offsets(s.recorded, 64);
    block->in_use.assign(s.recorded.size(), false);
    if (block->plan.total_bytes > 0) {
      block->length = static_cast<size_t>(round_up(block->plan.total_bytes, kPage));
      block->base = static_cast<char*>(map_pages(block->length));
    }
    s.stats.plan_bytes = block->plan.total_bytes;
    block->recorded = std::move(s.recorded);
    s.recorded.clear();
    s.current = std::move(block);
    return;
  }
  if (!s.current) return;
  if (s.diverged || s.fell_back)
    ++s.stats.diverged_steps;
  else
    ++s.stats.planned_steps;
  if (!s.diverged) return;
  if (s.plans_made < kMaxPlans)
    s.record_next = true;
  else
    s.retire_current();  // steps that never repeat: back to LibTorch's allocation, not one mapping each
}

StepAllocator::Stats StepAllocator::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

namespace {

c10::DataPtr on_heap(size_t bytes, c10::DeleterFnPtr release) {
  void* base = c10::alloc_cpu(bytes + sizeof(Header));
  char* data = static_cast<char*>(base) + sizeof(Header);
  *header_of(data) = Header{kMagic, Kind::Heap, base, 0, -1, 0};
  return {data, data, release, c10::Device(c10::DeviceType::CPU)};
}

c10::DataPtr mapped(size_t bytes, int64_t recorded, uint64_t recording, c10::DeleterFnPtr release) {
  const size_t length = static_cast<size_t>(round_up(static_cast<int64_t>(bytes), kPage) + kPage);
  char* base = static_cast<char*>(map_pages(length));
  char* data = base + kPage;
  *header_of(data) = Header{kMagic, Kind::Mapped, base, length, recorded, recording};
  return {data, data, release, c10::Device(c10::DeviceType::CPU)};
}

}  // namespace

c10::DataPtr StepAllocator::State::mapped(size_t bytes, int64_t recorded_index) {
  ++stats.mapped_allocations;
  return ::ddp::mapped(bytes, recorded_index, recorded_index >= 0 ? recording_id : 0, &StepAllocator::release);
}

c10::DataPtr StepAllocator::allocate(size_t bytes) {
  if (bytes == 0) return {nullptr, nullptr, &release, c10::Device(c10::DeviceType::CPU)};
  State& s = *state_;
  if (static_cast<int64_t>(bytes) < kMinBytes || std::this_thread::get_id() != s.training_thread.load())
    return on_heap(bytes, &release);
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.in_step) return s.steps == 0 ? s.mapped(bytes, -1) : on_heap(bytes, &release);
  if (s.recording) {
    s.recorded.push_back(Lifetime{static_cast<int64_t>(bytes), s.clock++, -1});
    return s.mapped(bytes, static_cast<int64_t>(s.recorded.size()) - 1);
  }
  PlannedBlock* p = s.current.get();
  if (!p) return s.plans_made < kMaxPlans ? s.mapped(bytes, -1) : on_heap(bytes, &release);
  const size_t i = s.next++;
  if (s.diverged || i >= p->recorded.size() || p->recorded[i].bytes != static_cast<int64_t>(bytes)) {
    s.diverged = true;
    return s.mapped(bytes, -1);
  }
  if (p->plan.offsets[i] < 0) return s.mapped(bytes, -1);  // not freed within the recorded step
  bool free = !p->in_use[i];
  for (int32_t other : p->plan.shares_memory_with[i]) free = free && !p->in_use[other];
  if (!free) {
    s.fell_back = true;
    return s.mapped(bytes, -1);
  }
  p->in_use[i] = true;
  ++p->live;
  p->occupant[p->plan.offsets[i]] = static_cast<int32_t>(i);
  ++s.stats.planned_allocations;
  char* data = p->base + p->plan.offsets[i];
  return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr StepAllocator::raw_deleter() const { return &release; }

void StepAllocator::release(void* data) {
  if (data == nullptr) return;
  if (g_installed != nullptr && release_planned(*g_installed->state_, data)) return;
  Header h = *header_of(data);
  TORCH_INTERNAL_ASSERT(h.magic == kMagic, "StepAllocator: freeing memory it did not allocate");
  if (h.recorded >= 0 && g_installed != nullptr) {
    State& s = *g_installed->state_;
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.recording && h.recording == s.recording_id) s.recorded[static_cast<size_t>(h.recorded)].freed_at = s.clock++;
  }
  if (h.kind == Kind::Mapped)
    ::munmap(h.base, h.length);
  else
    c10::free_cpu(h.base);
}

bool StepAllocator::release_planned(State& s, void* data) {
  std::lock_guard<std::mutex> lock(s.mu);
  auto give_back = [&](PlannedBlock& p) {
    const int64_t offset = static_cast<char*>(data) - p.base;
    auto it = p.occupant.find(offset);
    TORCH_INTERNAL_ASSERT(it != p.occupant.end() && p.in_use[static_cast<size_t>(it->second)],
                          "StepAllocator: freeing planned memory not in use");
    p.in_use[static_cast<size_t>(it->second)] = false;
    p.occupant.erase(it);
    --p.live;
  };
  if (s.current && s.current->contains(data)) {
    give_back(*s.current);
    return true;
  }
  for (auto it = s.retired.begin(); it != s.retired.end(); ++it) {
    if (!(*it)->contains(data)) continue;
    give_back(**it);
    if ((*it)->live == 0) {
      ::munmap((*it)->base, (*it)->length);
      s.retired.erase(it);
    }
    return true;
  }
  return false;
}

}  // namespace ddp
