// The executables' startup file (src/engine/startup/omp_wait_policy.cc) must leave OpenMP's wait
// policy in the environment libgomp reads when it loads: the user's choice, or a spin of 1000.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

TEST(Startup, OpenMpWaitPolicyIsSetBeforeLibgompLoads) {
  // tests/CMakeLists.txt runs this test once more with both variables removed from the
  // environment, so there the startup file is the only way for one to be set.
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  ASSERT_TRUE(policy || spin) << "neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT was set before main";
  if (const char* expected = std::getenv("ONNXPTQ_EXPECT_GOMP_SPINCOUNT")) {
    ASSERT_TRUE(spin);
    EXPECT_EQ(std::string(spin), expected);
    EXPECT_EQ(policy, nullptr);
  }
}

}  // namespace
