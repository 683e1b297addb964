// Calibration readers: .npy/.npz folders written by numpy itself, and the random reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "calib/data_reader.h"
#include "onnxptq/error.h"

namespace onnxptq::calib {
namespace {

namespace fs = std::filesystem;

class Readers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_readers_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void python(const std::string& code) {
    std::ofstream(dir_ / "script.py") << "import numpy as np, os\nos.chdir(" << dir_ << ")\n" << code;
    ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir_ / "script.py").string()).c_str()), 0);
  }
  static std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

ir::Value* tensor_input(ir::Graph& g, const std::string& name, ir::DataType type, std::vector<ir::Dim> dims) {
  ir::Value* v = g.add_value(name);
  v->type = ir::ValueType::tensor(type);
  v->type.has_shape = true;
  v->type.shape = std::move(dims);
  return v;
}

TEST_F(Readers, NpzStoredAndCompressedAsNumpyWritesThem) {
  python(R"(
a = np.arange(12, dtype=np.float32).reshape(3, 4)
b = np.array([[1, -2]], dtype=np.int64)
np.savez('plain.npz', image=a, ids=b)
np.savez_compressed('small.npz', image=a * 2, ids=b)
)");
  for (const char* file : {"plain.npz", "small.npz"}) {
    auto arrays = load_npz(dir_ / file);
    ASSERT_EQ(arrays.size(), 2u) << file;
    float factor = std::string(file) == "small.npz" ? 2.0f : 1.0f;
    EXPECT_EQ(arrays["image"].dims(), (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(arrays["image"].values<float>()[11], 11 * factor);
    EXPECT_EQ(arrays["ids"].values<int64_t>()[1], -2);
  }
  std::ofstream(dir_ / "bad.npz") << "not a zip at all, just text that is long enough";
  EXPECT_EQ(error_of([&] { load_npz(dir_ / "bad.npz"); }), (dir_ / "bad.npz").string() + ": not an .npz file (no zip directory)");
}

TEST_F(Readers, NpyFolderInFileNameOrderAndRewinds) {
  fs::create_directories(dir_ / "calib");
  python(R"(
for i in range(3):
    np.save('calib/sample_%d.npy' % i, np.full((1, 2), i, dtype=np.float32))
open('calib/notes.txt', 'w').write('ignored')
)");
  ir::Graph g;
  ir::Value* x = tensor_input(g, "x", ir::DataType::Float, {ir::Dim::of(1), ir::Dim::of(2)});
  auto reader = make_npy_folder_reader(dir_ / "calib", {x});
  EXPECT_EQ(reader->size(), 3u);
  std::vector<float> firsts;
  while (auto feed = reader->next()) firsts.push_back(feed->at("x").values<float>()[0]);
  EXPECT_EQ(firsts, (std::vector<float>{0, 1, 2}));
  ASSERT_TRUE(reader->can_rewind());
  reader->rewind();
  EXPECT_EQ(reader->next()->at("x").values<float>()[0], 0.0f);

  ir::Value* y = tensor_input(g, "y", ir::DataType::Float, {ir::Dim::of(1)});
  auto two_inputs = make_npy_folder_reader(dir_ / "calib", {x, y});
  EXPECT_EQ(error_of([&] { two_inputs->next(); }),
            (dir_ / "calib/sample_0.npy").string() +
                ": an .npy sample can only feed a model with one input; this model has 2 (x, y): use .npz files with one array per input");
  EXPECT_EQ(error_of([&] { make_npy_folder_reader(dir_ / "none", {x}); }), (dir_ / "none").string() + ": no such folder");
  EXPECT_EQ(error_of([&] { make_npy_folder_reader(dir_ / "calib/sample_0.npy", {x}); }),
            (dir_ / "calib/sample_0.npy").string() + ": not a folder");
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(error_of([&] { make_npy_folder_reader(dir_ / "empty", {x}); }),
            (dir_ / "empty").string() + ": no .npy or .npz files in the folder");
}

TEST_F(Readers, RandomReaderShapesRangesAndSeeds) {
  ir::Graph g;
  ir::Value* image = tensor_input(g, "image", ir::DataType::Float,
                                  {ir::Dim::symbol("N"), ir::Dim::symbol("C"), ir::Dim::symbol("H"), ir::Dim::of(7)});
  ir::Value* tokens = tensor_input(g, "tokens", ir::DataType::Int64, {ir::Dim::symbol("B"), ir::Dim::symbol("T")});
  RandomReaderOptions o;
  o.seed = 5;
  o.count = 2;
  auto reader = make_random_reader({image, tokens}, o);
  auto first = reader->next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->at("image").dims(), (std::vector<int64_t>{1, 3, 32, 7}));  // the seeds' stand-ins
  EXPECT_EQ(first->at("tokens").dims(), (std::vector<int64_t>{1, 16}));
  for (float v : first->at("image").values<float>()) ASSERT_TRUE(v >= 0 && v < 1);
  for (int64_t v : first->at("tokens").values<int64_t>()) ASSERT_EQ(v, 0);
  EXPECT_TRUE(reader->next());
  EXPECT_FALSE(reader->next());
  reader->rewind();
  EXPECT_EQ(reader->next()->at("image").values<float>()[5], first->at("image").values<float>()[5]);

  o.shapes["image"] = {2, 1, 4, 7};
  o.ranges["tokens"] = {10, 12};
  o.ranges["image"] = {-3, -2};
  auto ranged = make_random_reader({image, tokens}, o)->next();
  EXPECT_EQ(ranged->at("image").dims(), (std::vector<int64_t>{2, 1, 4, 7}));
  for (float v : ranged->at("image").values<float>()) ASSERT_TRUE(v >= -3 && v <= -2);
  for (int64_t v : ranged->at("tokens").values<int64_t>()) ASSERT_TRUE(v >= 10 && v <= 12);

  // float16 values come from 11 bits: none rounds up to 1 (0x3C00) on the way from float.
  ir::Value* half = tensor_input(g, "half", ir::DataType::Float16, {ir::Dim::of(4096)});
  std::optional<Feed> half_feed = make_random_reader({half}, {})->next();
  auto halves = half_feed->at("half").values<uint16_t>();
  EXPECT_EQ(*std::max_element(halves.begin(), halves.end()), 0x3BFF);  // 1 - 2^-11, the largest below 1
  // Uniform: the mean of 4096 values within four standard errors (1 / sqrt(12 * 4096)) of 0.5.
  ir::Value* wide = tensor_input(g, "wide", ir::DataType::Float, {ir::Dim::of(4096)});
  std::optional<Feed> wide_feed = make_random_reader({wide}, {})->next();
  auto uniform = wide_feed->at("wide").values<float>();
  double mean = std::accumulate(uniform.begin(), uniform.end(), 0.0) / 4096;
  EXPECT_NEAR(mean, 0.5, 4 / std::sqrt(12.0 * 4096));
  RandomReaderOptions narrow;
  narrow.ranges["tokens"] = {10.2, 10.8};
  EXPECT_EQ(error_of([&] {
              make_random_reader({image, tokens}, narrow);
            }),
            "random data range for 'tokens' must hold a whole number and stay within int64");
  ir::Value* bytes = tensor_input(g, "bytes", ir::DataType::Int8, {ir::Dim::of(4)});
  RandomReaderOptions beyond;
  beyond.ranges["bytes"] = {-1, 200};
  EXPECT_EQ(error_of([&] { make_random_reader({bytes}, beyond); }),
            "random data range for 'bytes' must hold a whole number and stay within int8");

  RandomReaderOptions bad;
  bad.shapes["image"] = {1, 3, 32, 8};
  EXPECT_EQ(error_of([&] { make_random_reader({image, tokens}, bad); }),
            "random data shape [1,3,32,8] for 'image' does not fit the model's float[N,C,H,7]");
  RandomReaderOptions unknown;
  unknown.ranges["nope"] = {0, 1};
  EXPECT_EQ(error_of([&] { make_random_reader({image, tokens}, unknown); }),
            "random data: no model input is named 'nope' (inputs: image, tokens)");
}

}  // namespace
}  // namespace onnxptq::calib
