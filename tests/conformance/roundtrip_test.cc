// Every model of the ONNX backend test suite (Debian's libonnx-testdata) is loaded, saved,
// loaded again, and compared field by field with the original protobuf.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>

#include "ir/model.h"
#include "support/proto_compare.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;
using testing::kBackendData;

TEST(BackendRoundTrip, EveryTestModelSurvivesLoadSaveLoad) {
  ASSERT_TRUE(fs::is_directory(kBackendData)) << "libonnx-testdata is not installed";
  fs::path out_dir = fs::temp_directory_path() / ("onnxptq_roundtrip_" + std::to_string(getpid()));
  fs::create_directories(out_dir);
  std::vector<fs::path> models;
  for (const auto& entry : fs::recursive_directory_iterator(kBackendData))
    if (entry.path().filename() == "model.onnx") models.push_back(entry.path());
  std::sort(models.begin(), models.end());

  std::vector<std::string> failures;
  for (const fs::path& path : models) {
    std::string label = path.parent_path().filename().string();
    try {
      ir::Model model = ir::load_model(path);
      fs::path saved = out_dir / "model.onnx";
      ir::save_model(model, saved);
      ir::Model again = ir::load_model(saved);
      std::string bytes = ir::serialize_model(again);
      onnx::ModelProto reloaded;
      reloaded.ParseFromString(bytes);
      std::string diff = testing::model_difference(testing::read_model_proto(path), reloaded);
      if (!diff.empty()) failures.push_back(label + ": " + diff.substr(0, 400));
      // Saving is deterministic: the second save gives the same bytes as the first.
      if (bytes != ir::serialize_model(model)) failures.push_back(label + ": two saves differ");
      // A clone is the same model.
      if (ir::serialize_model(ir::clone_model(model)) != bytes) failures.push_back(label + ": the clone differs");
    } catch (const std::exception& e) {
      failures.push_back(label + ": " + e.what());
    }
  }
  fs::remove_all(out_dir);
  std::cout << models.size() << " backend test models round-tripped, " << failures.size() << " failed\n";
  EXPECT_GE(models.size(), 1000u);
  for (size_t i = 0; i < failures.size() && i < 30; ++i) ADD_FAILURE() << failures[i];
}

}  // namespace
}  // namespace onnxptq
