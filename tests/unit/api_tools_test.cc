// The public API of the tools (include/onnxptq/: compare.h, evaluate.h, inspect.h, check_npu.h,
// preprocess.h, random_inputs.h, tensor_files.h, Model::save's options, Session::threads): called
// as a program outside the tree calls them, the test models built with the library's own IR, the
// references from the ONNX backend test data, python3-numpy and closed forms.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "ir/model.h"
#include "onnxptq/onnxptq.h"
#include "support/accuracy_models.h"
#include "support/cli_run.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

using testing::kBackendData;

class PublicTools : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_api_tools_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `model` written to DIR/name and loaded back through the public API.
  Model saved(const ir::Model& model, const std::string& name) {
    ir::save_model(model, dir_ / name);
    return Model::load(dir_ / name);
  }

  fs::path dir_;
};

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no Error";
  return ErrorKind::internal;
}

ir::Value* float_value(ir::Graph& g, const std::string& name, std::vector<int64_t> dims) {
  ir::Value* v = g.add_value(name);
  v->type = ir::ValueType::tensor(DataType::Float, std::move(dims));
  return v;
}

// x -> Relu -> r -> Neg -> y, and the same with r quantized to uint8 with scale 1 and zero point 0
// (QuantizeLinear, DequantizeLinear) before the Neg: integers in [0, 255] go through unchanged.
ir::Model relu_neg(bool quantized) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = float_value(g, "x", {2, 8});
  g.add_input(x);
  ir::Value* r = g.add_value("r");
  g.add_node("Relu", {x}, {r}, "relu");
  ir::Value* into_neg = r;
  if (quantized) {
    ir::Value* scale = g.add_value("r_scale");
    g.set_initializer(scale, Tensor::from_values<float>({}, std::vector<float>{1.0f}));
    ir::Value* zero = g.add_value("r_zero_point");
    g.set_initializer(zero, Tensor::from_values<uint8_t>({}, std::vector<uint8_t>{0}));
    ir::Value* q = g.add_value("r_quantized");
    g.add_node("QuantizeLinear", {r, scale, zero}, {q}, "r_QuantizeLinear");
    into_neg = g.add_value("r_dequantized");
    g.add_node("DequantizeLinear", {q, scale, zero}, {into_neg}, "r_DequantizeLinear");
  }
  ir::Value* y = float_value(g, "y", {2, 8});
  g.add_node("Neg", {into_neg}, {y}, "neg");
  g.add_output(y);
  return m;
}

// Samples of x: 16 values each, from `value(sample, i)`.
CallbackReader samples(size_t count, const std::function<float(size_t, size_t)>& value) {
  auto next = [count, value, n = size_t{0}]() mutable -> std::optional<Feed> {
    if (n == count) return std::nullopt;
    std::vector<float> v(16);
    for (size_t i = 0; i < v.size(); ++i) v[i] = value(n, i);
    ++n;
    return Feed{{"x", Tensor::from_values<float>({2, 8}, v)}};
  };
  return CallbackReader(next, "x samples");
}

// Integers in [0, 255] are exact in uint8 with scale 1: no error, SQNR infinite. Quarters above
// them round to the integer below (round half to even), an error of 0.25 each: the SQNR is the
// closed form's.
TEST_F(PublicTools, CompareModelsMeasuresTheQuantizationError) {
  Model float_model = saved(relu_neg(false), "float.onnx");
  Model quantized_model = saved(relu_neg(true), "quantized.onnx");
  CallbackReader integers = samples(3, [](size_t s, size_t i) { return static_cast<float>((s * 16 + i) * 5 % 256); });
  ModelComparison exact = compare_models(float_model, quantized_model, integers, 1);
  ASSERT_EQ(exact.tensors.size(), 1u);
  const TensorError& e = exact.tensors[0];
  EXPECT_EQ(e.tensor, "r");
  EXPECT_EQ(e.producer, "relu");
  EXPECT_EQ(e.op_type, "Relu");
  EXPECT_EQ(e.sqnr, std::numeric_limits<double>::infinity());
  EXPECT_EQ(e.max_error, 0.0);
  EXPECT_EQ(e.elements, 48u);

  double signal = 0;
  auto quarters = [](size_t s, size_t i) { return static_cast<float>(s * 16 + i) + 0.25f; };
  for (size_t s = 0; s < 2; ++s)
    for (size_t i = 0; i < 16; ++i) signal += std::pow(static_cast<double>(quarters(s, i)), 2);
  CallbackReader off = samples(2, quarters);
  ModelComparison c = compare_models(float_model, quantized_model, off);
  ASSERT_EQ(c.tensors.size(), 1u);
  EXPECT_EQ(c.tensors[0].max_error, 0.25);
  EXPECT_NEAR(c.tensors[0].sqnr, 10 * std::log10(signal / (32 * 0.0625)), 1e-9);

  nlohmann::json j = nlohmann::json::parse(exact.to_json());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_TRUE(j[0]["sqnr"].is_null());  // infinity
  EXPECT_EQ(j[0]["elements"], 48);
  const std::string csv = exact.to_csv();
  EXPECT_EQ(csv.rfind("tensor,producer,op_type,sqnr,cosine,max_error,elements\n\"r\",\"relu\",\"Relu\",inf,", 0), 0u)
      << csv;
  EXPECT_EQ(csv.substr(csv.size() - 6), ",0,48\n") << csv;
  EXPECT_EQ(exact.to_table().substr(0, 6), "tensor");
  // A model without QuantizeLinear/DequantizeLinear pairs is no quantized model.
  CallbackReader again = samples(1, [](size_t, size_t) { return 1.0f; });
  EXPECT_EQ(kind_of([&] { compare_models(float_model, float_model, again); }), ErrorKind::bad_input);
}

// Result folders: an identical file floors the MSE at 1e-10 (Quark's evaluate tool), so its PSNR
// is 20 log10(max) + 100; a different one has the closed-form metrics.
TEST_F(PublicTools, EvaluateFoldersAverageTheFiles) {
  fs::create_directories(dir_ / "base");
  fs::create_directories(dir_ / "quant");
  save_npy(Tensor::from_values<float>({4}, std::vector<float>{1, 2, 3, 4}), dir_ / "base" / "a.npy");
  save_npy(Tensor::from_values<float>({4}, std::vector<float>{1, 2, 3, 4}), dir_ / "quant" / "a.npy");
  save_npy(Tensor::from_values<float>({4}, std::vector<float>{1, 2, 3, 4}), dir_ / "base" / "b.npy");
  save_npy(Tensor::from_values<float>({4}, std::vector<float>{1, 2, 3, 5}), dir_ / "quant" / "b.npy");
  EvaluateReport r = evaluate_folders(dir_ / "base", dir_ / "quant");
  ASSERT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.files[0].file, "a.npy");
  EXPECT_NEAR(r.files[0].metrics.psnr, 20 * std::log10(4.0) + 100, 1e-12);
  EXPECT_EQ(r.files[1].metrics.l2, 1.0);
  EXPECT_NEAR(r.files[1].metrics.cosine, 34.0 / std::sqrt(30.0 * 39.0), 1e-15);
  EXPECT_NEAR(r.average.l2, 0.5, 1e-15);
  nlohmann::json j = nlohmann::json::parse(r.to_json());
  EXPECT_EQ(j["files"][1]["file"], "b.npy");
  EXPECT_EQ(j["average"]["l2"], 0.5);
  EXPECT_EQ(r.to_table().substr(0, 4), "file");
  EXPECT_NE(r.to_table().find("\naverage "), std::string::npos) << r.to_table();
  fs::remove(dir_ / "quant" / "b.npy");
  EXPECT_EQ(kind_of([&] { evaluate_folders(dir_ / "base", dir_ / "quant"); }), ErrorKind::bad_input);
}

// An int16 tensor written and read back; numpy reads the same values; the ONNX backend data's
// TensorProto read as onnx.numpy_helper reads it.
TEST_F(PublicTools, TensorFilesRoundTrip) {
  Tensor t = Tensor::from_values<int16_t>({2, 3}, std::vector<int16_t>{-32768, -1, 0, 1, 300, 32767});
  save_npy(t, dir_ / "t.npy");
  Tensor back = load_npy(dir_ / "t.npy");
  EXPECT_EQ(back.dtype(), DataType::Int16);
  EXPECT_EQ(back.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(std::ranges::equal(back.values<int16_t>(), t.values<int16_t>()));
  cli_test::CliRun numpy = cli_test::run(
      "/usr/bin/python3 -c \"import numpy,sys; a=numpy.load(sys.argv[1]); print(a.dtype, a.shape, "
      "a.ravel().tolist())\" " +
      (dir_ / "t.npy").string());
  EXPECT_EQ(numpy.out, "int16 (2, 3) [-32768, -1, 0, 1, 300, 32767]\n") << numpy.err;

  const fs::path relu = kBackendData / "node/test_relu";
  ASSERT_TRUE(fs::is_directory(relu)) << "libonnx-testdata is not installed";
  Tensor input = load_tensor(relu / "test_data_set_0/input_0.pb");
  Tensor expected = load_tensor(relu / "test_data_set_0/output_0.pb");
  save_npy(input, dir_ / "input.npy");
  cli_test::CliRun same = cli_test::run(
      "/usr/bin/python3 -c \"import numpy,onnx,sys; from onnx import numpy_helper; "
      "a=numpy.load(sys.argv[1]); b=numpy_helper.to_array(onnx.load_tensor(sys.argv[2])); "
      "print(a.dtype == b.dtype and a.shape == b.shape and (a == b).all())\" " +
      (dir_ / "input.npy").string() + " " + (relu / "test_data_set_0/input_0.pb").string());
  EXPECT_EQ(same.out, "True\n") << same.err;
  // The backend test's own expected output, from our Session.
  Session session(Model::load(relu / "model.onnx"), {.threads = 1});
  std::vector<Tensor> out = session.run({{session.input_names()[0], input}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), expected.dims());
  EXPECT_TRUE(std::ranges::equal(out[0].values<float>(), expected.values<float>()));

  EXPECT_EQ(kind_of([&] { load_npy(dir_ / "missing.npy"); }), ErrorKind::bad_input);
  cli_test::run("echo 'not a tensor' > " + (dir_ / "text.pb").string());
  EXPECT_EQ(kind_of([&] { load_tensor(dir_ / "text.pb"); }), ErrorKind::bad_input);
}

TEST_F(PublicTools, SessionSaysItsThreads) {
  Model model = saved(testing::outlier_model(), "outlier.onnx");
  EXPECT_EQ(Session(model, {.threads = 3}).threads(), 3);
  EXPECT_EQ(Session(model).threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(Session(model).output_names(), std::vector<std::string>{"y"});
}

// The generator of tests/oracle/ort_run.js: one seed, one feed; the shape of a dynamic input from
// the caller; what `onnxptq run --random` writes.
TEST_F(PublicTools, RandomInputsAreSeeded) {
  Model model = saved(testing::outlier_model(), "outlier.onnx");
  Feed a = random_inputs(model, 7), b = random_inputs(model, 7), c = random_inputs(model, 8);
  ASSERT_EQ(a.size(), 1u);
  const Tensor& x = a.at("x");
  EXPECT_EQ(x.dims(), (std::vector<int64_t>{1, 2, 6, 6}));
  EXPECT_TRUE(std::ranges::equal(x.values<float>(), b.at("x").values<float>()));
  EXPECT_FALSE(std::ranges::equal(x.values<float>(), c.at("x").values<float>()));
  for (float v : x.values<float>()) EXPECT_TRUE(v >= 0 && v < 1) << v;
  cli_test::CliRun run =
      cli_test::onnxptq("run " + (dir_ / "outlier.onnx").string() + " --random 7 --outputs " + (dir_ / "out").string());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(std::ranges::equal(load_npy(dir_ / "out/inputs/x.npy").values<float>(), x.values<float>()));

  EXPECT_EQ(parse_dims("1x3x224x224", "--shape x"), (std::vector<int64_t>{1, 3, 224, 224}));
  EXPECT_EQ(kind_of([] { parse_dims("1x-3", "--shape x"); }), ErrorKind::bad_input);
  // A dynamic batch: refused without a shape, filled with one; a shape that contradicts the model
  // is refused.
  ir::Model dynamic = testing::outlier_model();
  dynamic.graph->find_value("x")->type.shape[0] = ir::Dim::symbol("batch");
  Model d = saved(dynamic, "dynamic.onnx");
  EXPECT_EQ(kind_of([&] { random_inputs(d, 1); }), ErrorKind::bad_input);
  EXPECT_EQ(random_inputs(d, 1, {{"x", {4, 2, 6, 6}}}).at("x").dims(), (std::vector<int64_t>{4, 2, 6, 6}));
  EXPECT_EQ(kind_of([&] { random_inputs(d, 1, {{"x", {4, 3, 6, 6}}}); }), ErrorKind::bad_input);
}

// The facts of a model built here: its nodes, op types, parameters and the file it came from.
TEST_F(PublicTools, InspectCountsWhatTheModelHolds) {
  Model model = saved(testing::outlier_model(), "outlier.onnx");
  nlohmann::json j = nlohmann::json::parse(inspect_json(model));
  EXPECT_EQ(j["file"], (dir_ / "outlier.onnx").string());
  EXPECT_EQ(j["nodes"], 4);
  EXPECT_EQ(j["op_types"]["Conv"], 3);
  EXPECT_EQ(j["op_types"]["Tanh"], 1);
  EXPECT_EQ(j["initializers"], 3);
  EXPECT_EQ(j["parameters"], 8 + 16 + 8);
  EXPECT_EQ(j["parameter_bytes"], 4 * 32);
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::array({1, 2, 6, 6}));
  std::string text = inspect_text(model);
  EXPECT_EQ(text.rfind("model         " + (dir_ / "outlier.onnx").string() + "\n", 0), 0u) << text;
  EXPECT_NE(text.find("\nop types      Conv 3, Tanh 1\n"), std::string::npos) << text;
}

// x -> Conv -> Relu -> r; Add(r, Mul(r, 500)): the Add's inputs 500 times apart, so that their
// positions are about 9 apart and vai_q_onnx's AdjustShiftRead (at most 7) fails unless the
// quantizer's IPULimitationCheck moved them.
ir::Model far_apart_add() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = float_value(g, "x", {1, 2, 4, 4});
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, Tensor::from_values<float>({2, 2, 1, 1}, std::vector<float>{0.5f, -0.25f, 0.75f, 0.1f}));
  ir::Value* b = g.add_value("b");
  g.set_initializer(b, Tensor::from_values<float>({2}, std::vector<float>{0.05f, -0.02f}));
  ir::Value* k = g.add_value("k");
  g.set_initializer(k, Tensor::from_values<float>({}, std::vector<float>{500.0f}));
  g.add_node("Conv", {x, w, b}, {g.add_value("c")}, "conv");
  g.add_node("Relu", {g.find_value("c")}, {g.add_value("r")}, "relu");
  g.add_node("Mul", {g.find_value("r"), k}, {g.add_value("big")}, "scale");
  ir::Value* y = float_value(g, "y", {1, 2, 4, 4});
  g.add_node("Add", {g.find_value("r"), g.find_value("big")}, {y}, "add");
  g.add_output(y);
  return m;
}

TEST_F(PublicTools, CheckNpuFindsTheShiftTheIpuCheckWouldMend) {
  Model model = saved(far_apart_add(), "add.onnx");
  // vai_q_onnx's NPU configuration: power-of-two scales (enable_dpu), uint8 activations with
  // symmetric ranges, int8 weights.
  Config npu;
  npu.set("calibrate_method", "\"NonOverflow\"")
      .set("activation_type", "\"QUInt8\"")
      .set("weight_type", "\"QInt8\"")
      .set("enable_dpu", "true")
      .set_extra_option("ActivationSymmetric", "true")
      .threads(2);
  auto reader = random_reader(model, {.count = 2, .seed = 3, .ranges = {{"x", {-1.0, 1.0}}}});
  Config unchecked = npu;
  unchecked.set_extra_option("IPULimitationCheck", "false");
  NpuCheck check = check_npu(quantize(model, *reader, unchecked).model);
  ASSERT_EQ(check.violations.size(), 1u) << check.to_text();
  const NpuViolation& v = check.violations[0];
  EXPECT_EQ(v.rule, "AdjustShiftRead");
  EXPECT_EQ(v.node, "add");
  EXPECT_EQ(v.op_type, "Add");
  EXPECT_EQ(v.lo, 0);
  EXPECT_EQ(v.hi, 7);
  EXPECT_GT(v.value, 7);
  EXPECT_EQ(check.to_text().rfind("1 violation (", 0), 0u) << check.to_text();
  EXPECT_NE(check.to_text().find("\nAdjustShiftRead  Add 'add': "), std::string::npos) << check.to_text();
  nlohmann::json j = nlohmann::json::parse(check.to_json());
  EXPECT_EQ(j["positions"], check.positions);
  EXPECT_EQ(j["violations"][0]["allowed"], nlohmann::json::array({0, 7}));

  auto same_samples = random_reader(model, {.count = 2, .seed = 3, .ranges = {{"x", {-1.0, 1.0}}}});
  NpuCheck mended = check_npu(quantize(model, *same_samples, npu).model);
  EXPECT_TRUE(mended.violations.empty()) << mended.to_text();
  EXPECT_EQ(mended.checks, check.checks);  // the same rules on the same nodes
  // A float model has no positions to read.
  EXPECT_EQ(kind_of([&] { check_npu(model); }), ErrorKind::bad_input);
}

// The opset raised to the target and the model marked as quant_pre_process marks it; the input
// model unchanged; the data file's name and threshold as asked.
TEST_F(PublicTools, PreprocessAndSaveWithExternalData) {
  ir::Model old = testing::outlier_model();
  old.set_opset("", 11);
  old.graph->name = "outlier";  // onnx.checker requires one
  Model model = saved(old, "opset11.onnx");
  std::vector<std::string> conversions, passes;
  PreprocessOptions options;
  options.convert_nchw_to_nhwc = true;
  options.conversion_log = [&](const std::string& line) { conversions.push_back(line); };
  options.pass_log = [&](const std::string& line) { passes.push_back(line); };
  Model prepared = preprocess(model, options);
  EXPECT_EQ(prepared.opset(), 13);
  EXPECT_EQ(model.opset(), 11);
  EXPECT_FALSE(passes.empty());
  ASSERT_EQ(conversions.size(), 1u);  // x is [1, 2, 6, 6]: H > C, W > C, so it becomes NHWC
  EXPECT_EQ(conversions[0].rfind("convert_nchw_to_nhwc: NHWC inputs ", 0), 0u) << conversions[0];
  EXPECT_EQ(prepared.inputs()[0].dims, (std::vector<int64_t>{1, 6, 6, 2}));

  SaveOptions save;
  save.external_data = SaveOptions::ExternalData::Always;
  save.external_threshold = 0;
  save.data_file_name = "weights.bin";
  prepared.save(dir_ / "prepared.onnx", save);
  EXPECT_TRUE(fs::is_regular_file(dir_ / "weights.bin"));
  cli_test::CliRun onnx = cli_test::run(
      "/usr/bin/python3 -c \"import onnx,sys; onnx.checker.check_model(sys.argv[1]); "
      "m=onnx.load(sys.argv[1], load_external_data=False); "
      "print({p.key: p.value for p in m.metadata_props}['onnx.quant.pre_process'], "
      "[o.version for o in m.opset_import if o.domain in ('', 'ai.onnx')][0], "
      "sorted({e.value for t in m.graph.initializer for e in t.external_data if e.key == 'location'}))\" " +
      (dir_ / "prepared.onnx").string());
  EXPECT_EQ(onnx.out, "onnxruntime.quant 13 ['weights.bin']\n") << onnx.err;

  save.data_file_name = "../weights.bin";
  EXPECT_EQ(kind_of([&] { prepared.save(dir_ / "again.onnx", save); }), ErrorKind::bad_input);
  EXPECT_FALSE(fs::exists(dir_ / "again.onnx"));
  PreprocessOptions unknown;
  unknown.passes = {"no_such_pass"};
  EXPECT_EQ(kind_of([&] { check_preprocess_options(unknown); }), ErrorKind::bad_input);
}

}  // namespace
}  // namespace onnxptq
