#include "config/paths.h"

#include <gtest/gtest.h>

#include "tests/config/test_util.h"

namespace accel::config {
namespace {

TEST(PathsTest, HfHomeWins) {
  PathEnv env{"/data/hf", "/xdg", "/home/u"};
  EXPECT_EQ(defaultConfigPath(env), "/data/hf/accelerate/default_config.yaml");
}

TEST(PathsTest, XdgCacheHomeNext) {
  PathEnv env{std::nullopt, "/xdg", "/home/u"};
  EXPECT_EQ(defaultConfigPath(env), "/xdg/huggingface/accelerate/default_config.yaml");
}

TEST(PathsTest, HomeCacheLast) {
  PathEnv env{std::nullopt, std::nullopt, "/home/u"};
  EXPECT_EQ(defaultConfigPath(env), "/home/u/.cache/huggingface/accelerate/default_config.yaml");
}

TEST(PathsTest, TildeInHfHomeIsExpanded) {
  PathEnv env{"~/hf", std::nullopt, "/home/u"};
  EXPECT_EQ(defaultConfigPath(env), "/home/u/hf/accelerate/default_config.yaml");
  EXPECT_EQ(expandUser("~", env), "/home/u");
  EXPECT_EQ(expandUser("~other/x", env), "~other/x");
  EXPECT_EQ(expandUser("/abs/~", env), "/abs/~");
}

TEST(PathsTest, ExplicitMissingFileIsAnErrorNamingIt) {
  PathEnv env{"/nonexistent-hf", std::nullopt, "/home/u"};
  auto r = resolveConfigPath(std::string("/nonexistent/cfg.yaml"), env);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "--config_file: '/nonexistent/cfg.yaml' does not exist");
}

TEST(PathsTest, MissingDefaultMeansNoFile) {
  PathEnv env{"/nonexistent-hf", std::nullopt, "/home/u"};
  auto r = resolveConfigPath(std::nullopt, env);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(PathsTest, ExistingDefaultIsUsed) {
  testing::ScratchDir dir;
  PathEnv env{dir.path(), std::nullopt, "/home/u"};
  ASSERT_TRUE(makeDirectories(dir.file("accelerate")).ok());
  testing::writeFile(dir.file("accelerate/default_config.yaml"), "distributed_type: 'NO'\n");
  auto r = resolveConfigPath(std::nullopt, env);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->value(), dir.file("accelerate/default_config.yaml"));
}

TEST(PathsTest, ParentDirectory) {
  EXPECT_EQ(parentDirectory("a/b/c.yaml"), "a/b");
  EXPECT_EQ(parentDirectory("c.yaml"), ".");
  EXPECT_EQ(parentDirectory("/c.yaml"), "/");
}

}  // namespace
}  // namespace accel::config
