#include "support/export_models.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>

#include "calib/calibrate.h"
#include "calib/data_reader.h"
#include "ir/file_io.h"
#include "ir/float16.h"
#include "ir/npy.h"
#include "onnxptq/error.h"

namespace onnxptq::testing {

namespace {

ir::Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (float& e : v) e = u(rng);
  return ir::Tensor::from_values<float>(std::move(dims), v);
}

}  // namespace

ir::Model export_test_model(int64_t opset) {
  ir::Model m;
  m.set_opset("", opset);
  ir::Graph& g = *m.graph;
  g.name = "export_test";
  std::mt19937 rng(42);
  auto value = [&](const std::string& name) { return g.add_value(name); };
  auto init = [&](const std::string& name, ir::Tensor t) {
    ir::Value* v = g.add_value(name);
    g.set_initializer(v, std::move(t));
    return v;
  };
  ir::Value* x = value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {1, 3, 8, 8});
  g.add_input(x);
  ir::Value* w = init("w", random_tensor({8, 3, 3, 3}, rng, -0.5f, 0.5f));
  ir::Value* b = init("b", random_tensor({8}, rng, -0.2f, 0.2f));
  ir::Node* conv = g.add_node("Conv", {x, w, b}, {value("c")}, "conv");
  conv->set_attribute(ir::Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_node("Relu", {g.find_value("c")}, {value("r")}, "relu");
  ir::Node* pool = g.add_node("MaxPool", {g.find_value("r")}, {value("p")}, "maxpool");
  pool->set_attribute(ir::Attribute::of_ints("kernel_shape", {2, 2}));
  pool->set_attribute(ir::Attribute::of_ints("strides", {2, 2}));
  ir::Value* p = g.find_value("p");
  g.add_node("Sigmoid", {p}, {value("s")}, "sigmoid");
  ir::Node* leaky = g.add_node("LeakyRelu", {p}, {value("l")}, "leaky");
  leaky->set_attribute(ir::Attribute::of_float("alpha", 0.1f));
  g.add_node("Add", {g.find_value("s"), g.find_value("l")}, {value("a")}, "add");
  g.add_node("Mul", {g.find_value("a"), p}, {value("mu")}, "mul");
  ir::Node* concat = g.add_node("Concat", {g.find_value("mu"), p}, {value("cc")}, "concat");
  concat->set_attribute(ir::Attribute::of_int("axis", 1));
  ir::Node* avg = g.add_node("AveragePool", {g.find_value("cc")}, {value("ap")}, "avgpool");
  avg->set_attribute(ir::Attribute::of_ints("kernel_shape", {2, 2}));
  avg->set_attribute(ir::Attribute::of_ints("strides", {2, 2}));
  g.add_node("GlobalAveragePool", {g.find_value("ap")}, {value("gp")}, "gap");
  ir::Value* shape = init("shape", ir::Tensor::from_values<int64_t>({2}, std::vector<int64_t>{1, 16}));
  g.add_node("Reshape", {g.find_value("gp"), shape}, {value("f")}, "reshape");
  ir::Value* f = g.find_value("f");
  ir::Value* w2 = init("w2", random_tensor({16, 5}, rng, -1.0f, 1.0f));
  ir::Value* b2 = init("b2", random_tensor({5}, rng, -0.5f, 0.5f));
  g.add_node("Gemm", {f, w2, b2}, {value("y")}, "gemm");
  ir::Value* mm = init("mm", random_tensor({16, 4}, rng, -1.0f, 1.0f));
  g.add_node("MatMul", {f, mm}, {value("m")}, "matmul");
  for (auto [out, size] : {std::pair{"y", 5}, std::pair{"m", 4}}) {
    ir::Value* v = g.find_value(out);
    v->type = ir::ValueType::tensor(ir::DataType::Float, {1, size});
    g.add_output(v);
  }
  return m;
}

quant::Plan calibrated_plan(const ir::Model& model, const quant::QuantConfig& config, size_t samples) {
  std::map<std::string, ir::DataType> types;
  for (const auto& n : model.graph->nodes())
    for (const ir::Value* v : n->outputs()) types[v->name()] = ir::DataType::Float;
  quant::Plan plan = quant::make_plan(model, config, types);
  calib::RandomReaderOptions ro;
  ro.seed = 1;
  ro.count = samples;
  for (const ir::Value* v : model.graph->fed_inputs()) ro.ranges[v->name()] = {-1.0, 1.0};
  std::unique_ptr<calib::DataReader> reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  calib::CalibOptions co = config.calib;
  co.method = config.calibrate_method;
  co.threads = 2;
  if (config.power_of_two()) co.activation_type = config.activation_type;
  calib::CalibrationResult ranges = calib::calibrate(model, plan.tensors_to_calibrate(), *reader, co);
  quant::assign_parameters(plan, model, config, ranges);
  return plan;
}

quant::QuantizeResult quantize_random(const ir::Model& model, const quant::QuantConfig& config, size_t samples,
                                      uint32_t seed) {
  calib::RandomReaderOptions ro;
  ro.count = samples;
  ro.seed = seed;
  auto reader = calib::make_random_reader(model.graph->fed_inputs(), ro);
  return quant::quantize_static(model, *reader, config);
}

std::map<std::string, ir::Tensor> random_feeds(const ir::Model& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : model.graph->fed_inputs()) {
    std::vector<int64_t> dims;  // an unknown dimension (a dynamic batch) is 1
    for (const ir::Dim& d : v->type.shape) dims.push_back(d.has_value ? d.value : 1);
    feeds[v->name()] = random_tensor(dims, rng, -1.5f, 1.5f);
  }
  return feeds;
}

std::vector<ir::Tensor> ort_run(const std::filesystem::path& path, const ir::Model& model,
                                const std::map<std::string, ir::Tensor>& feeds, const std::filesystem::path& dir,
                                bool literal) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::string command = "node " + (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/oracle/ort_run.js").string() + " " +
                        path.string() + (literal ? " --literal" : "") + " --threads 2 --outputs " + dir.string() +
                        " --inputs";
  for (const auto& [name, t] : feeds) {
    fs::path file = dir / ("input_" + name + ".npy");
    ir::save_npy(t, file);
    command += " " + name + "=" + file.string();
  }
  if (std::system(command.c_str()) != 0) throw Error("ONNX Runtime failed: " + command);
  std::vector<ir::Tensor> out;
  for (const ir::Value* v : model.graph->outputs()) {
    std::string file = v->name();
    std::replace(file.begin(), file.end(), '/', '_');
    std::replace(file.begin(), file.end(), ':', '_');
    out.push_back(ir::load_npy(dir / (file + ".npy")));
  }
  return out;
}

std::vector<ir::Tensor> ort_run_model(const ir::Model& model, const std::map<std::string, ir::Tensor>& feeds,
                                      bool literal) {
  ir::TemporaryFolder dir("onnxptq-ort-run");
  ir::save_model(model, dir.path() / "model.onnx");
  return ort_run(dir.path() / "model.onnx", model, feeds, dir.path(), literal);
}

std::string onnx_check(const std::filesystem::path& path) {
  std::string command =
      "/usr/bin/python3 -c \"import onnx, sys; onnx.checker.check_model(sys.argv[1], full_check=True)\" " +
      path.string() + " 2>&1";
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return "cannot run python3";
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  int status = pclose(pipe);
  return status == 0 ? "" : (out.empty() ? "the checker failed" : out);
}

ir::Model saved_and_loaded(const ir::Model& model, const std::filesystem::path& path) {
  ir::save_model(model, path);
  EXPECT_EQ(onnx_check(path), "") << path;
  return ir::load_model(path);
}

std::filesystem::path fresh_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("onnxptq_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void render_text_image(const std::string& shape, int seed, const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::string hw = shape.substr(shape.find("1x3x") + 4);
  std::string command =
      "/usr/bin/python3 " + (fs::path(ONNXPTQ_SOURCE_DIR) / "tests/models/render_text_input.py").string() + " " +
      hw.substr(0, hw.find('x')) + " " + hw.substr(hw.find('x') + 1) + " " + std::to_string(seed) + " " + file.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

void expect_bit_equal(const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dims(), b[i].dims()) << what;
    auto x = a[i].values<float>(), y = b[i].values<float>();
    size_t differ = 0;
    for (size_t k = 0; k < x.size(); ++k) differ += x[k] != y[k];
    EXPECT_EQ(differ, 0u) << what << ": output " << i << " differs in " << differ << " of " << x.size() << " values";
  }
}

bool ort_int8_may_saturate() {
#if defined(__x86_64__) || defined(__i386__)
  return !(__builtin_cpu_supports("avx512vnni") || __builtin_cpu_supports("avxvnni"));
#else
  return false;
#endif
}

double max_steps(const ir::Tensor& a, const ir::Tensor& b, double step) {
  auto x = a.values<float>(), y = b.values<float>();
  if (x.size() != y.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = std::fabs(static_cast<double>(x[i]) - y[i]);
    worst = std::max(worst, std::isnan(d) ? INFINITY : d);
  }
  return worst / step;
}

std::map<std::string, ir::DataType> all_float(const ir::Model& model) {
  std::map<std::string, ir::DataType> types;
  for (const auto& n : model.graph->nodes())
    for (const ir::Value* v : n->outputs()) types[v->name()] = ir::DataType::Float;
  return types;
}

std::vector<double> values_of(const ir::Tensor& t) {
  std::vector<double> out;
  auto take = [&](auto values) { out.assign(values.begin(), values.end()); };
  switch (t.dtype()) {
    case ir::DataType::Int8:
      take(t.values<int8_t>());
      break;
    case ir::DataType::UInt8:
      take(t.values<uint8_t>());
      break;
    case ir::DataType::Int16:
      take(t.values<int16_t>());
      break;
    case ir::DataType::UInt16:
      take(t.values<uint16_t>());
      break;
    case ir::DataType::Int32:
      take(t.values<int32_t>());
      break;
    case ir::DataType::Float:
      take(t.values<float>());
      break;
    default:
      throw Error("values_of: unexpected type " + std::string(ir::data_type_name(t.dtype())));
  }
  return out;
}

double sixteen_bit_steps(float a, float b, ir::DataType type) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INFINITY;
  auto ordered = [&](float v) {  // the 16-bit values in order: -0 and 0 are one value
    uint16_t h = type == ir::DataType::Float16 ? ir::float_to_half(v) : ir::float_to_bfloat16(v);
    return (h & 0x8000) ? -static_cast<int32_t>(h & 0x7FFF) : static_cast<int32_t>(h);
  };
  return std::abs(ordered(a) - ordered(b));
}

LayerwiseAgreement agree_layer_by_layer(const std::filesystem::path& model_file,
                                        const std::map<std::string, ir::Tensor>& feeds,
                                        const std::filesystem::path& dir, bool from_ort_floats) {
  ir::Model model = ir::load_model(model_file);
  ir::Model exposed = ir::clone_model(model);
  std::set<std::string> quantized;
  std::map<std::string, ir::DataType> cast_back;  // the Cast form's dequantized values -> their 16-bit type
  std::set<std::string> floats;                   // with from_ort_floats: the float values quantized
  auto cast_to = [](const ir::Node* n) {
    const ir::Attribute* to = n && n->op_type == "Cast" ? n->find_attribute("to") : nullptr;
    return to ? static_cast<ir::DataType>(to->i) : ir::DataType::Undefined;
  };
  for (const auto& n : exposed.graph->nodes()) {
    bool quantizes = n->op_type == "QuantizeLinear" || n->op_type.rfind("QLinear", 0) == 0 || n->op_type == "QGemm";
    // A Cast back to float of a Cast to float16 / bfloat16 (ExtendedQuantFormat.QDQ's Cast form): its
    // float output, since ORT's Node binding cannot write bfloat16 arrays.
    ir::DataType sixteen =
        cast_to(n.get()) == ir::DataType::Float ? cast_to(n->input(0)->producer()) : ir::DataType::Undefined;
    if (sixteen == ir::DataType::Float16 || sixteen == ir::DataType::BFloat16) {
      cast_back[n->output(0)->name()] = sixteen;
      quantizes = true;
    }
    if (quantizes && n->output(0)) {
      quantized.insert(n->output(0)->name());
      if (!exposed.graph->is_output(n->output(0))) exposed.graph->add_output(n->output(0));
    }
    // The float value a quantize reads: QuantizeLinear's input, or the start of the Cast form's
    // chain (the Clip, Div and Add named after its Cast to the 16-bit type).
    const ir::Value* read = nullptr;
    if (n->op_type == "QuantizeLinear") read = n->input(0);
    if (cast_to(n.get()) == ir::DataType::Float16 || cast_to(n.get()) == ir::DataType::BFloat16) {
      read = n->input(0);
      while (read->producer() && read->producer()->name.rfind(n->name + "_", 0) == 0) read = read->producer()->input(0);
    }
    if (from_ort_floats && read && !read->has_initializer() && !quantized.count(read->name())) {
      floats.insert(read->name());
      if (!exposed.graph->is_output(read)) exposed.graph->add_output(exposed.graph->find_value(read->name()));
    }
  }
  std::filesystem::create_directories(dir);
  ir::save_model(exposed, dir / "exposed.onnx");
  std::vector<ir::Tensor> ort = ort_run(dir / "exposed.onnx", exposed, feeds, dir / "literal", true);
  std::map<std::string, const ir::Tensor*> from_ort;
  for (size_t i = 0; i < ort.size(); ++i) from_ort[exposed.graph->outputs()[i]->name()] = &ort[i];

  LayerwiseAgreement r;
  r.quantized = quantized.size();
  for (const ir::Value* v : model.graph->outputs()) r.ort_outputs.push_back(*from_ort.at(v->name()));
  engine::TensorTransform force = [&](const std::string& name, ir::Tensor& value) {
    if (floats.count(name)) {  // the engine's float value, then ORT's
      const ir::Tensor& expected = *from_ort.at(name);
      auto e = expected.values<float>(), g = value.values<float>();
      float largest = 0;
      for (float v : e) largest = std::max(largest, std::fabs(v));
      double far = e.size() == g.size() ? 0 : INFINITY;
      for (size_t k = 0; k < std::min(e.size(), g.size()); ++k) far = std::max(far, std::fabs(double{e[k]} - g[k]));
      // In float32 steps at the tensor's largest value.
      double steps = largest > 0 ? far / std::ldexp(1.0, std::ilogb(largest) - 23) : far;
      if (steps > r.floats_worst) r.floats_worst = steps, r.floats_worst_tensor = name;
      ++r.floats;
      value = expected;
      return;
    }
    if (!quantized.count(name)) return;
    const ir::Tensor& expected = *from_ort.at(name);
    std::vector<double> e = values_of(expected), g = values_of(value);
    double far = e.size() == g.size() && expected.dtype() == value.dtype() ? 0 : INFINITY;
    auto type = cast_back.find(name);
    for (size_t k = 0; k < std::min(e.size(), g.size()); ++k)
      far = std::max(far, type == cast_back.end()
                              ? std::fabs(e[k] - g[k])
                              : sixteen_bit_steps(static_cast<float>(e[k]), static_cast<float>(g[k]), type->second));
    if (far > r.worst) r.worst = far, r.worst_tensor = name;
    ++r.compared;
    value = expected;
  };
  run_model(model, feeds, false, {}, &force);
  return r;
}

}  // namespace onnxptq::testing
