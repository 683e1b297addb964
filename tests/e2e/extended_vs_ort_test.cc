// Quark's A8W8 and A16W8 recipes (its DefaultConfigMapping: ExtendedQuantFormat.QDQ, MinMax,
// symmetric activations, FoldRelu, AlignConcat, AlignSlice off; A16W8 with AlignEltwiseQuantType)
// on a real model nobody here wrote (torchvision's mobilenet_v2). ONNX Runtime runs the export (its
// Q/DQ are com.microsoft's) and, every node run literally, computes exactly what it computes for the
// QuantFormat.QDQ export of the same plan: the format adds nothing. How far the engine is from ORT
// is printed, not asserted: with these settings the QDQ export is as far (A8W8: 2 steps, 361 of 1000
// logits; A16W8: 2.0003 steps, see quantize_vs_ort_test.cc on 16-bit grids), a difference of the
// engine's float kernels, not of the format (found, not explained, here: see the report).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "ir/model.h"
#include "ir/npy.h"
#include "quant/export.h"
#include "quant/quantize.h"
#include "quant/simulate.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

struct ExtendedVsOrtCase {
  std::string label;
  ir::DataType activation;
  // Simulation equals the engine's run of the export bit for bit. Not at 16 bits: 322 of 1000
  // logits differ, with the engine's rewrites off too, and as many for the QuantFormat.QDQ export of
  // the same plan (printed): a difference of the 16-bit simulation that predates this format.
  bool exact_simulation = true;
};

quant::QuantConfig recipe(ir::DataType activation) {
  quant::QuantConfig c;
  c.calib.threads = 2;
  quant::apply_config_json(c, {{"quant_format", "ExtendedQuantFormat.QDQ"},
                               {"calibrate_method", "MinMax"},
                               {"activation_type", quant::quant_type_name(activation)},
                               {"weight_type", "QInt8"}});
  nlohmann::json extra = {{"ActivationSymmetric", true},
                          {"ForceQuantizeNoInputCheck", true},
                          {"AlignSlice", false},
                          {"FoldRelu", true},
                          {"AlignConcat", true}};
  if (activation == ir::DataType::Int16) extra["AlignEltwiseQuantType"] = true;
  quant::apply_config_json(c, {{"extra_options", extra}});
  return c;
}

class ExtendedVsOrt : public ::testing::TestWithParam<ExtendedVsOrtCase> {};

TEST_P(ExtendedVsOrt, MobilenetV2RunsInOrtAsTheQdqExportOfItsPlan) {
  const ExtendedVsOrtCase& c = GetParam();
  fs::path model_path = fs::path(ONNXPTQ_MODELS_DIR) / "mobilenet_v2.onnx";
  ASSERT_TRUE(fs::exists(model_path)) << model_path;
  fs::path dir = fs::temp_directory_path() / ("onnxptq_extended_vs_ort_" + std::to_string(getpid()) + "_" + c.label);
  fs::remove_all(dir);
  fs::create_directories(dir);

  ir::Model model = ir::load_model(model_path);
  calib::RandomReaderOptions ro;
  ro.count = 6;
  ro.seed = 3;  // the compared run uses seed 7
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  quant::QuantConfig config = recipe(c.activation);
  std::vector<std::string> log;
  quant::QuantizeResult q =
      quant::quantize_static(model, *reader, config, [&](const std::string& l) { log.push_back(l); });
  fs::path quantized = dir / "q.onnx";
  ir::save_model(q.model, quantized);
  for (const std::string& l : log)
    if (l.rfind("Align", 0) == 0 || l.rfind("Adjust", 0) == 0 || l.find("FoldRelu") != std::string::npos)
      std::cout << c.label << ": " << l << "\n";
  int custom = 0, microsoft = 0;
  for (const auto& n : q.model.graph->nodes()) {
    custom += n->domain == "com.amd.quark";
    microsoft += n->domain == "com.microsoft";
  }
  EXPECT_EQ(custom, 0);  // every Q/DQ of these types is com.microsoft's after Quark's post-pass
  EXPECT_GT(microsoft, 100);

  // The same plan written as QuantFormat.QDQ: ONNX Runtime computes the same numbers for both.
  quant::QuantConfig qdq_config = config;
  qdq_config.format = quant::QuantFormat::QDQ;
  fs::path qdq_path = dir / "qdq.onnx";
  ir::save_model(quant::export_qdq(q.prepared ? *q.prepared : model, q.plan, qdq_config), qdq_path);

  auto ort = [&](const fs::path& file, const std::string& options, const fs::path& out) {
    std::string command = "node " + (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/oracle/ort_run.js").string() + " " +
                          file.string() + " --threads 2 " + options + " --outputs " + out.string();
    return std::system(command.c_str());
  };
  ASSERT_EQ(ort(quantized, "--random 7 --literal", dir), 0);
  ASSERT_EQ(ort(quantized, "--random 7", dir / "optimized"), 0);
  ASSERT_EQ(ort(qdq_path, "--literal --inputs " + (dir / "inputs" / "input.npy").string(), dir / "qdq"), 0);

  ir::Model reloaded = ir::load_model(quantized);
  engine::Session session(reloaded);
  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : session.inputs()) feeds[v->name()] = ir::load_npy(dir / "inputs" / (v->name() + ".npy"));
  std::vector<ir::Tensor> outputs = session.run(feeds);
  engine::SessionOptions plain;
  plain.optimize = false;  // every node as its own kernel, no channels-last convolutions
  std::vector<ir::Tensor> unoptimized = engine::Session(reloaded, plain).run(feeds);
  quant::Simulation simulation(q.prepared ? *q.prepared : model, q.plan, config, 2);
  std::vector<ir::Tensor> simulated = simulation.run(feeds);
  // The same comparison for the QuantFormat.QDQ export of the plan (printed).
  std::vector<ir::Tensor> qdq_ran = engine::Session(ir::load_model(qdq_path), plain).run(feeds);
  std::vector<ir::Tensor> qdq_simulated =
      quant::Simulation(q.prepared ? *q.prepared : model, q.plan, qdq_config, 2).run(feeds);
  ASSERT_EQ(simulated.size(), outputs.size());
  auto count_differ = [](const ir::Tensor& a, const ir::Tensor& b) {
    auto x = a.values<float>(), y = b.values<float>();
    size_t n = 0;
    for (size_t k = 0; k < x.size(); ++k) n += x[k] != y[k];
    return n;
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = session.outputs()[i]->name();
    auto g = outputs[i].values<float>();
    std::string file = name;
    std::replace(file.begin(), file.end(), '/', '_');
    std::replace(file.begin(), file.end(), ':', '_');
    ir::Tensor literal = ir::load_npy(dir / (file + ".npy"));
    EXPECT_EQ(count_differ(literal, ir::load_npy(dir / "qdq" / (file + ".npy"))), 0u)
        << name << ": ONNX Runtime on the ExtendedQuantFormat.QDQ and the QDQ export of one plan";
    size_t sim_optimized = count_differ(simulated[i], outputs[i]),
           sim_plain = count_differ(simulated[i], unoptimized[i]);
    std::cout << c.label << " output " << name << ": QuantFormat.QDQ export of the plan: Simulation vs engine "
              << count_differ(qdq_simulated[i], qdq_ran[i]) << " values differ, engine QDQ vs ExtendedQDQ "
              << count_differ(qdq_ran[i], unoptimized[i]) << "\n";
    std::cout << c.label << " output " << name << ": Simulation vs the engine's run of the export: " << sim_optimized
              << " values differ (" << sim_plain << " with the engine's rewrites off)\n";
    if (c.exact_simulation) {
      EXPECT_EQ(sim_optimized, 0u) << name << ": Simulation vs the engine's run of the export";
    }
    ir::Tensor optimized = ir::load_npy(dir / "optimized" / (file + ".npy"));
    ASSERT_EQ(literal.dims(), outputs[i].dims()) << name;
    double step = q.plan.provider(name).params.at(0).scale;
    auto steps_off = [&](const ir::Tensor& t, size_t& differ) {
      auto e = t.values<float>();
      double worst = 0;
      differ = 0;
      for (size_t k = 0; k < e.size(); ++k) {
        double d = std::fabs(static_cast<double>(e[k]) - g[k]);
        worst = std::max(worst, std::isnan(d) ? INFINITY : d);
        differ += d > step * 0.5;
      }
      return worst / step;
    };
    size_t differ = 0, differ_optimized = 0;
    double worst = steps_off(literal, differ), worst_optimized = steps_off(optimized, differ_optimized);
    std::cout << c.label << " output " << name << ": max |ORT - onnxptq| = " << worst << " steps, " << differ << " of "
              << g.size() << " values differ (ORT optimized: " << worst_optimized << " steps, " << differ_optimized
              << " values)\n";
  }
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(QuarkRecipes, ExtendedVsOrt,
                         ::testing::Values(ExtendedVsOrtCase{"mobilenet_v2_a8w8", ir::DataType::Int8, true},
                                           ExtendedVsOrtCase{"mobilenet_v2_a16w8", ir::DataType::Int16, false}),
                         [](const ::testing::TestParamInfo<ExtendedVsOrtCase>& info) { return info.param.label; });

}  // namespace
}  // namespace onnxptq
