// SHA-256 and hex text against the published test vectors (FIPS 180-2, RFC 1321 through md5_hex).
#include "base/digest.h"
#include "config/config.h"
#include "data/download/md5.h"

#include <gtest/gtest.h>

namespace ddp {
namespace {

TEST(Digest, Sha256AndMd5MatchTheirPublishedVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(config_digest("abc"), sha256_hex("abc"));
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(hex_text(bytes, 4), "000fa5ff");
  EXPECT_EQ(hex_text(bytes, 0), "");
}

TEST(Digest, ConfigDigestChangesWithAnyKeyThatChangesTheWeights) {
  const Config base = parse_config("", "a.toml");
  const Config other = parse_config("[optimizer]\nlr = 0.02\n", "b.toml");
  EXPECT_NE(config_digest(format_resume_config(base)), config_digest(format_resume_config(other)));
  const Config moved = parse_config("[job]\nout_dir = \"elsewhere\"\n", "c.toml");
  EXPECT_EQ(config_digest(format_resume_config(base)), config_digest(format_resume_config(moved)));
}

// A key the model does not read makes no different run: a ResNet config written with model.dropout = 0.5 (every
// config of earlier versions says so) resumes under today's resolved 0; Net's dropout still counts.
TEST(Digest, RegularisationTheModelDoesNotReadLeavesTheResumeConfigAsItIs) {
  const std::string resnet = "[model]\nname = \"resnet18\"\n";
  EXPECT_EQ(format_resume_config(parse_config(resnet + "dropout = 0.5\n", "old.toml")),
            format_resume_config(parse_config(resnet, "new.toml")));
  EXPECT_NE(format_resume_config(parse_config("[model]\ndropout = 0.2\n", "a.toml")),
            format_resume_config(parse_config("", "b.toml")));
}

}  // namespace
}  // namespace ddp
