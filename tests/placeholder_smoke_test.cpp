// Smoke test of the build: the config defaults parse.
#include "app/config.h"

#include <gtest/gtest.h>

TEST(Smoke, DefaultsParse) { EXPECT_EQ(ddp::parse_config("", "x.toml").data.batch_size, 64); }
