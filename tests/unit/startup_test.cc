// The executables' startup file (src/engine/startup/omp_wait_policy.cc) must leave OpenMP's wait
// policy in the environment libgomp reads when it loads: the user's choice, or "passive".
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

TEST(Startup, OpenMpWaitPolicyIsSetBeforeLibgompLoads) {
  // tests/CMakeLists.txt runs this test once more with both variables removed from the
  // environment, so there the startup file is the only way for one to be set.
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  ASSERT_TRUE(policy || spin) << "OMP_WAIT_POLICY was not set before main";
  if (const char* expected = std::getenv("ONNXPTQ_EXPECT_OMP_WAIT_POLICY")) {
    ASSERT_TRUE(policy);
    EXPECT_EQ(std::string(policy), expected);
  }
}

}  // namespace
