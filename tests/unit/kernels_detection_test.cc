// The detection family on what the ONNX backend tests leave out. NonMaxSuppression: no boxes,
// center_point_box=1 against the corner format, per-class and per-batch limits, score
// thresholds, ties and NaN scores, bad inputs. RoiAlign: half_pixel against output_half_pixel on
// a linear ramp (bilinear samples of a ramp average to the ramp at their centroid, a closed
// form), the docs' max mode, threads, bad inputs. And a GridSample + RoiAlign model against
// ONNX Runtime.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/export_models.h"
#include "support/kernel_run.h"

namespace onnxptq::engine {
namespace {

using ir::DataType;
using kernel_test::expect_near_all;
using kernel_test::f32;
using kernel_test::i64;
using kernel_test::kNaN;
using kernel_test::Op;
using kernel_test::op_error;
using kernel_test::run_op;

std::vector<int64_t> detection_ints(const Tensor& t) {
  auto v = t.values<int64_t>();
  return {v.begin(), v.end()};
}

bool detection_error_has(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

// ---- NonMaxSuppression

Tensor nms(const Tensor& boxes, const Tensor& scores, int64_t max_boxes, float iou, std::optional<float> score = {},
           int64_t center = 0) {
  std::vector<std::optional<Tensor>> in = {boxes, scores, i64({}, {max_boxes}), f32({}, {iou})};
  if (score) in.push_back(f32({}, {*score}));
  return run_op({"NonMaxSuppression", 11, {{"center_point_box", center}}}, in);
}

TEST(DetectionKernels, NonMaxSuppressionOfNoBoxesIsEmpty) {
  Tensor y = nms(f32({1, 0, 4}, {}), f32({1, 3, 0}, {}), 10, 0.5f);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(y.dtype(), DataType::Int64);
  // No max_output_boxes_per_class: nothing is selected.
  Tensor none = run_op({"NonMaxSuppression", 11}, {f32({1, 1, 4}, {0, 0, 1, 1}), f32({1, 1, 1}, {0.9f})});
  EXPECT_EQ(none.dims(), (std::vector<int64_t>{0, 3}));
}

TEST(DetectionKernels, NonMaxSuppressionCenterPointBoxReadsCentresAndSizes) {
  // As centres: [-1,1]^2 and [0,2]^2 overlap with IoU 1/7; as corners the second lies inside the
  // first, IoU 1/4. At 0.2 the centre format keeps both, the corner format one.
  Tensor boxes = f32({1, 2, 4}, {0, 0, 2, 2, 1, 1, 2, 2});
  Tensor scores = f32({1, 1, 2}, {0.9f, 0.8f});
  EXPECT_EQ(detection_ints(nms(boxes, scores, 5, 0.2f, {}, 1)), (std::vector<int64_t>{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(detection_ints(nms(boxes, scores, 5, 0.2f, {}, 0)), (std::vector<int64_t>{0, 0, 0}));
  // Below 1/7 the centre format suppresses too.
  EXPECT_EQ(detection_ints(nms(boxes, scores, 5, 0.1f, {}, 1)), (std::vector<int64_t>{0, 0, 0}));
}

TEST(DetectionKernels, NonMaxSuppressionLimitsEachBatchAndClass) {
  // Two batches, two classes, three disjoint boxes each: every (batch, class) keeps its own best two.
  Tensor boxes = f32({2, 3, 4}, {0, 0, 1, 1, 0, 2, 1, 3, 0, 4, 1, 5,  //
                                 0, 0, 1, 1, 0, 2, 1, 3, 0, 4, 1, 5});
  Tensor scores = f32({2, 2, 3}, {0.1f, 0.5f, 0.3f, 0.7f, 0.2f, 0.6f,  //
                                  0.9f, 0.8f, 0.7f, 0.05f, 0.4f, 0.3f});
  EXPECT_EQ(detection_ints(nms(boxes, scores, 2, 0.5f)),
            (std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 0, 0, 1, 2, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 2}));
  // A score threshold drops boxes at or below it before selection.
  EXPECT_EQ(detection_ints(nms(boxes, scores, 2, 0.5f, 0.6f)), (std::vector<int64_t>{0, 1, 0, 1, 0, 0, 1, 0, 1}));
}

TEST(DetectionKernels, NonMaxSuppressionTiesTakeTheLowerIndexAndNaNScoresComeLast) {
  Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1});
  EXPECT_EQ(detection_ints(nms(boxes, f32({1, 1, 3}, {0.5f, 0.5f, 0.5f}), 3, 0.5f)), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(detection_ints(nms(boxes, f32({1, 1, 3}, {kNaN, 0.2f, kNaN}), 3, 1.0f)),
            (std::vector<int64_t>{0, 0, 1, 0, 0, 0, 0, 0, 2}));
}

TEST(DetectionKernels, NonMaxSuppressionRefusesBadInputs) {
  Tensor boxes = f32({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1});
  Tensor scores = f32({1, 1, 2}, {0.5f, 0.4f});
  auto error = [&](const Tensor& b, const Tensor& s, float iou, int64_t center = 0) {
    return op_error({"NonMaxSuppression", 11, {{"center_point_box", center}}}, {b, s, i64({}, {3}), f32({}, {iou})});
  };
  EXPECT_TRUE(detection_error_has(error(boxes, scores, 1.5f), "iou_threshold must be in [0, 1]"));
  EXPECT_TRUE(detection_error_has(error(f32({1, 2, 3}, {0, 0, 1, 0, 0, 1}), scores, 0.5f),
                                  "must be [num_batches, spatial_dimension, 4]"));
  EXPECT_TRUE(detection_error_has(error(boxes, f32({1, 1, 3}, {1, 2, 3}), 0.5f), "do not match boxes"));
  EXPECT_TRUE(detection_error_has(error(boxes, scores, 0.5f, 2), "center_point_box must be 0 or 1"));
}

// ---- RoiAlign

// X[c, h, w] = (c + 1) * (2 h + w): bilinear interpolation is exact on it.
Tensor detection_ramp(int64_t channels, int64_t height, int64_t width) {
  std::vector<float> v;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t h = 0; h < height; ++h)
      for (int64_t w = 0; w < width; ++w) v.push_back(static_cast<float>((c + 1) * (2 * h + w)));
  return f32({1, channels, height, width}, v);
}

TEST(DetectionKernels, RoiAlignHalfPixelShiftsSamplesHalfAPixel) {
  // Bins of the roi [x1, y1, x2, y2] = [2, 1, 8, 7] at spatial_scale 0.5, 3x2 bins, 2x2 samples:
  // the samples of a bin average to the ramp at the bin's centre, start + (p + 0.5) * bin, with
  // start = x1 * scale (- 0.5 for half_pixel).
  Tensor x = detection_ramp(2, 8, 9);
  Tensor rois = f32({1, 4}, {2, 1, 8, 7});
  for (const std::string mode : {"half_pixel", "output_half_pixel"}) {
    Op op{"RoiAlign", 16,
          {{"coordinate_transformation_mode", mode}, {"output_height", int64_t{3}}, {"output_width", int64_t{2}},
           {"sampling_ratio", int64_t{2}}, {"spatial_scale", 0.5f}}};
    Tensor y = run_op(op, {x, rois, i64({1}, {0})});
    const double offset = mode == "half_pixel" ? 0.5 : 0.0;
    const double x0 = 1 - offset, y0 = 0.5 - offset, bin_w = 3.0 / 2, bin_h = 3.0 / 3;
    std::vector<double> expected;
    for (int c = 0; c < 2; ++c)
      for (int ph = 0; ph < 3; ++ph)
        for (int pw = 0; pw < 2; ++pw)
          expected.push_back((c + 1) * (2 * (y0 + (ph + 0.5) * bin_h) + (x0 + (pw + 0.5) * bin_w)));
    EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 2, 3, 2}));
    expect_near_all(expected, y, 1e-5, 1e-5);
  }
  // Opset 10 had no coordinate_transformation_mode: output_half_pixel.
  Op old{"RoiAlign", 10, {{"output_height", int64_t{1}}, {"output_width", int64_t{1}}, {"sampling_ratio", int64_t{1}}}};
  expect_near_all({2 * 2.5 + 4}, run_op(old, {detection_ramp(1, 8, 9), f32({1, 4}, {2, 0, 6, 5}), i64({1}, {0})}));
}

TEST(DetectionKernels, RoiAlignMaxTakesTheLargestWeightedTap) {
  // A constant 4: a sample on a pixel centre has one tap of weight 1 (max 4), a sample halfway
  // between four pixels four taps of 1/4 (max 1). half_pixel puts the samples of the roi
  // [0, 0, 4, 4] on pixel centres, output_half_pixel halfway between them.
  Tensor x = f32({1, 1, 6, 6}, std::vector<float>(36, 4.0f));
  for (const std::string mode : {"half_pixel", "output_half_pixel"}) {
    Op op{"RoiAlign", 16,
          {{"mode", std::string("max")}, {"coordinate_transformation_mode", mode}, {"output_height", int64_t{2}},
           {"output_width", int64_t{2}}, {"sampling_ratio", int64_t{2}}}};
    const double expected = mode == "half_pixel" ? 4.0 : 1.0;
    expect_near_all(std::vector<double>(4, expected), run_op(op, {x, f32({1, 4}, {0, 0, 4, 4}), i64({1}, {0})}));
  }
}

TEST(DetectionKernels, RoiAlignGivesTheSameResultOnAnyThreadCount) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-2, 2), coord(0, 20);
  std::vector<float> xv(2 * 37 * 13 * 21);
  for (float& v : xv) v = value(rng);
  std::vector<float> rv;
  for (int r = 0; r < 5; ++r) {
    float a = coord(rng), b = coord(rng), c = coord(rng), d = coord(rng);
    rv.insert(rv.end(), {std::min(a, b), std::min(c, d) / 2, std::max(a, b), std::max(c, d) / 2});
  }
  std::vector<std::optional<Tensor>> in = {f32({2, 37, 13, 21}, xv), f32({5, 4}, rv), i64({5}, {0, 1, 1, 0, 1})};
  for (const std::string mode : {"avg", "max"}) {
    Op op{"RoiAlign", 16, {{"mode", mode}, {"output_height", int64_t{7}}, {"output_width", int64_t{5}}}};
    op.threads = 1;
    Tensor one = run_op(op, in);
    op.threads = 4;
    Tensor four = run_op(op, in);
    ASSERT_EQ(one.dims(), (std::vector<int64_t>{5, 37, 7, 5}));
    EXPECT_EQ(kernel_test::floats(one), kernel_test::floats(four)) << mode;
  }
}

TEST(DetectionKernels, RoiAlignRefusesBadInputs) {
  Tensor x = f32({1, 1, 4, 4}, std::vector<float>(16, 1.0f));
  Op op{"RoiAlign", 16};
  EXPECT_TRUE(detection_error_has(op_error(op, {x, f32({1, 4}, {0, 0, 2, 2}), i64({1}, {3})}),
                                  "batch index 3 is out of range"));
  EXPECT_TRUE(detection_error_has(op_error(op, {x, f32({1, 3}, {0, 0, 2}), i64({1}, {0})}), "must be [num_rois, 4]"));
  EXPECT_TRUE(detection_error_has(op_error(op, {x, f32({2, 4}, {0, 0, 2, 2, 0, 0, 1, 1}), i64({1}, {0})}),
                                  "one index for each of the 2 rois"));
  EXPECT_TRUE(detection_error_has(op_error(op, {x, f32({1, 4}, {0, 0, kNaN, 2}), i64({1}, {0})}), "not finite"));
  EXPECT_TRUE(detection_error_has(op_error({"RoiAlign", 16, {{"mode", std::string("min")}}},
                                           {x, f32({1, 4}, {0, 0, 2, 2}), i64({1}, {0})}),
                                  "mode 'min' is not avg or max"));
  EXPECT_TRUE(detection_error_has(op_error({"RoiAlign", 16, {{"output_height", int64_t{0}}}},
                                           {x, f32({1, 4}, {0, 0, 2, 2}), i64({1}, {0})}),
                                  "must be positive"));
}

// ---- Against ONNX Runtime

TEST(DetectionKernels, GridSampleAndRoiAlignMatchOnnxRuntime) {
  ir::Model m;
  m.set_opset("", 16);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {1, 4, 12, 16});
  ir::Value* grid = g.add_value("grid");
  grid->type = ir::ValueType::tensor(DataType::Float, {1, 6, 9, 2});
  g.add_input(x);
  g.add_input(grid);
  ir::Value* rois = g.add_value("rois");
  g.set_initializer(rois, f32({3, 4}, {0, 0, 8, 5, 1.5f, 0.5f, 6, 4.5f, 3, 2, 3.5f, 2.2f}));
  ir::Value* batch = g.add_value("batch");
  g.set_initializer(batch, i64({3}, {0, 0, 0}));
  auto sample = [&](const std::string& name, const std::string& mode, const std::string& padding, int64_t align) {
    ir::Value* y = g.add_value(name);
    g.add_output(y);
    ir::Node* n = g.add_node("GridSample", {x, grid}, {y}, name);
    n->set_attribute(ir::Attribute::of_string("mode", mode));
    n->set_attribute(ir::Attribute::of_string("padding_mode", padding));
    n->set_attribute(ir::Attribute::of_int("align_corners", align));
    return y;
  };
  ir::Value* bilinear = sample("bilinear_zeros", "bilinear", "zeros", 0);
  sample("bilinear_reflection", "bilinear", "reflection", 1);
  sample("bicubic_border", "bicubic", "border", 0);
  sample("nearest_reflection", "nearest", "reflection", 0);
  for (const std::string mode : {"avg", "max"}) {
    ir::Value* y = g.add_value("roi_" + mode);
    g.add_output(y);
    ir::Node* n = g.add_node("RoiAlign", {bilinear, rois, batch}, {y}, "roi_" + mode);
    n->set_attribute(ir::Attribute::of_string("mode", mode));
    n->set_attribute(ir::Attribute::of_int("output_height", 3));
    n->set_attribute(ir::Attribute::of_int("output_width", 2));
  }

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-1, 1), where(-1.3f, 1.3f);
  Tensor xv(DataType::Float, {1, 4, 12, 16}), gv(DataType::Float, {1, 6, 9, 2});
  for (float& v : xv.mutable_values<float>()) v = value(rng);
  for (float& v : gv.mutable_values<float>()) v = where(rng);
  std::map<std::string, Tensor> feeds = {{"x", xv}, {"grid", gv}};

  std::vector<Tensor> ort = testing::ort_run_model(m, feeds);
  std::vector<Tensor> engine = testing::run_model(m, feeds);
  ASSERT_EQ(ort.size(), engine.size());
  for (size_t o = 0; o < ort.size(); ++o) {
    SCOPED_TRACE(g.outputs()[o]->name());
    ASSERT_EQ(ort[o].dims(), engine[o].dims());
    std::vector<double> expected(ort[o].values<float>().begin(), ort[o].values<float>().end());
    expect_near_all(expected, engine[o], 1e-5, 1e-5);
  }
}

}  // namespace
}  // namespace onnxptq::engine
