// Activity and PhaseScope: the phase a rank is in, restored when a scope ends, and the collectives started by then.
#include "distributed/activity.h"

#include <gtest/gtest.h>

#include <thread>

namespace ddp {
namespace {

TEST(Activity, ScopesEnterAndRestorePhasesAndReadTheCollectiveCountOnEntry) {
  uint64_t started = 5;
  Activity activity([&] { return started; });
  activity.set_step(12);
  EXPECT_EQ(activity.snapshot().phase, Phase::kSetup);
  {
    PhaseScope loop(activity, Phase::kLoop);
    {
      PhaseScope backward(activity, Phase::kBackward, "ddptrain::backward");
      started = 9;
      activity.enter(Phase::kGradientAllReduce);  // as DDP's final callback does
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const Activity::Snapshot s = activity.snapshot();
      EXPECT_EQ(s.phase, Phase::kGradientAllReduce);
      EXPECT_EQ(s.step, 12);
      EXPECT_EQ(s.collectives, 9u);
      EXPECT_GE(s.seconds, 0.019);
      EXPECT_LT(s.seconds, 5.0);
    }
    EXPECT_EQ(activity.snapshot().phase, Phase::kLoop);
    EXPECT_LT(activity.snapshot().seconds, 0.019);  // entered again just now
  }
  EXPECT_EQ(activity.snapshot().phase, Phase::kSetup);
  EXPECT_STREQ(phase_name(Phase::kGradientAllReduce), "gradient all-reduce");
  EXPECT_TRUE(waits_for_peers(Phase::kCollective));
  EXPECT_TRUE(waits_for_peers(Phase::kGradientAllReduce));
  EXPECT_FALSE(waits_for_peers(Phase::kData));
  EXPECT_FALSE(waits_for_peers(Phase::kEval));
}

}  // namespace
}  // namespace ddp
