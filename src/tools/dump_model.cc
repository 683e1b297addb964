// dump_model (Quark's, quark.onnx.dump_model): the integers each quantized tensor holds on one
// sample, written per tensor as raw .bin and text .txt, and with dump_float every float node
// output (Quark's _float files). Quark reads FixNeuron models only; the dequantize nodes of the
// QDQ formats are read here too, their integers taken from the model's run, not recomputed.
#include "tools/dump_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "engine/session.h"
#include "ir/file_io.h"
#include "onnxptq/error.h"
#include "quant/qdq_nodes.h"

namespace onnxptq::tools {

using quant::describe_node;
using quant::is_dequantize_node;

namespace {

std::string file_stem(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (c == '/') c = '_';
  return s;
}

template <class T>
void append_integers(const ir::Tensor& t, std::string& text) {
  for (T v : t.values<T>()) text += std::to_string(static_cast<int64_t>(v)) + "\n";
}

std::string integer_text(const ir::Tensor& t) {
  std::string text;
  switch (t.dtype()) {
    case ir::DataType::Int8:
      append_integers<int8_t>(t, text);
      break;
    case ir::DataType::UInt8:
      append_integers<uint8_t>(t, text);
      break;
    case ir::DataType::Int16:
      append_integers<int16_t>(t, text);
      break;
    case ir::DataType::UInt16:
      append_integers<uint16_t>(t, text);
      break;
    case ir::DataType::Int32:
      append_integers<int32_t>(t, text);
      break;
    case ir::DataType::UInt32:
      append_integers<uint32_t>(t, text);
      break;
    default:
      throw Error("dump_model: internal: no integer text for " + std::string(ir::data_type_name(t.dtype())));
  }
  return text;
}

// Each float as the shortest text that reads back to it (numpy's str of a float32).
std::string float_text(const ir::Tensor& t) {
  std::string text;
  char buf[32];
  for (float v : t.values<float>()) {
    if (std::isnan(v)) {
      text += "nan\n";
      continue;
    }
    if (std::isinf(v)) {
      text += v > 0 ? "inf\n" : "-inf\n";
      continue;
    }
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    text.append(buf, end);
    text += '\n';
  }
  return text;
}

void write_file(const std::filesystem::path& path, const void* data, size_t size) {
  ir::AtomicFile file(path);
  file.write(data, size);
  file.commit();
}

bool integer_type(ir::DataType t) {
  return t == ir::DataType::Int8 || t == ir::DataType::UInt8 || t == ir::DataType::Int16 || t == ir::DataType::UInt16 ||
         t == ir::DataType::Int32 || t == ir::DataType::UInt32;
}

int fix_neuron_pos(const ir::Node& n) {
  const ir::Attribute* a = n.find_attribute("pos");
  if (!a) throw Error("dump_model: " + describe_node(n) + " has no pos attribute");
  if (a->type == ir::AttrType::Int) return static_cast<int>(a->i);
  try {
    size_t used = 0;
    int pos = std::stoi(a->s, &used);
    if (used == a->s.size()) return pos;
  } catch (const std::exception&) {
  }
  throw Error("dump_model: " + describe_node(n) + " has pos '" + a->s + "', not an integer");
}

}  // namespace

DumpResult dump_model(const ir::Model& model, DataReader& reader, const DumpOptions& options) {
  const ir::Graph& g = *model.graph;
  // The dump's name -> the value whose integers it is (a dequantize node's input 0).
  std::map<std::string, const ir::Value*> quantized;
  std::map<std::string, int> fix_neurons;  // FixNeuron output -> pos
  std::set<std::string> floats;            // node outputs, with dump_float
  for (const auto& node : g.nodes()) {
    if (is_dequantize_node(*node) && node->output(0) && !node->output(0)->name().empty())
      quantized[node->output(0)->name()] = node->input(0);
    if (node->op_type == "FixNeuron" && node->output(0)) fix_neurons[node->output(0)->name()] = fix_neuron_pos(*node);
    if (options.dump_float)
      for (const ir::Value* v : node->outputs())
        if (v && !v->name().empty()) floats.insert(v->name());
  }
  DumpResult result;
  if (quantized.empty() && fix_neurons.empty()) {
    const char* what = "the model has no DequantizeLinear or FixNeuron node, so no quantized tensor to dump";
    if (!options.dump_float)
      throw Error(std::string(what) + " (quantize the model first, or ask for the float values with dump_float)");
    result.warnings.push_back(std::string(what) + "; only the float values are written");
  }
  std::optional<Feed> feed = reader.next();
  if (!feed) throw Error(reader.describe() + " gave no sample");

  engine::SessionOptions so;
  so.threads = options.threads;
  so.optimize = false;  // every node output as ONNX defines it
  std::set<std::string> wanted = floats;
  for (const auto& [name, source] : quantized) wanted.insert(source->name());
  for (const auto& [name, pos] : fix_neurons) wanted.insert(name);
  std::map<std::string, ir::Tensor> seen;
  // A copy: the engine may write a later value into the same buffer (in-place kernels).
  auto record = [&](const std::string& name, const ir::Tensor& t) {
    if (wanted.count(name))
      seen[name] = ir::Tensor(t.dtype(), t.dims(), Bytes::copy_of(t.bytes().data(), t.byte_size()));
  };
  so.constant_transform = [&](const std::string& name, ir::Tensor& t) { record(name, t); };
  engine::Session session(model, so);
  engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) { record(name, t); };
  try {
    session.run_for_hooks(*feed, {&observe});
  } catch (const Error& e) {
    throw Error("dump_model: the first sample of " + reader.describe() + ": " + e.what());
  }

  std::filesystem::create_directories(options.output_dir);
  const std::filesystem::path& dir = options.output_dir;
  for (const auto& [name, source] : quantized) {
    const ir::Tensor* t = source->has_initializer() ? &source->initializer() : nullptr;
    if (!t) {
      auto it = seen.find(source->name());
      if (it == seen.end()) continue;  // not computed (a branch not taken)
      t = &it->second;
    }
    if (!integer_type(t->dtype())) continue;  // float16/bfloat16 Q/DQ: no integers to compare
    std::string stem = file_stem(name);
    write_file(dir / (stem + ".bin"), t->bytes().data(), t->byte_size());
    write_text_file(dir / (stem + ".txt"), integer_text(*t));
    ++result.quantized;
  }
  for (const auto& [name, pos] : fix_neurons) {
    auto it = seen.find(name);
    if (it == seen.end() || it->second.dtype() != ir::DataType::Float) continue;
    std::vector<int8_t> q;
    const float step = std::ldexp(1.0f, pos);
    for (float v : it->second.values<float>())
      q.push_back(std::isnan(v) ? int8_t{0}
                                : static_cast<int8_t>(std::clamp(std::nearbyint(v * step), -128.0f, 127.0f)));
    ir::Tensor t = ir::Tensor::from_values<int8_t>(it->second.dims(), q);
    std::string stem = file_stem(name);
    write_file(dir / (stem + ".bin"), t.bytes().data(), t.byte_size());
    write_text_file(dir / (stem + ".txt"), integer_text(t));
    ++result.quantized;
  }
  for (const std::string& name : floats) {
    auto it = seen.find(name);
    if (it == seen.end() || it->second.dtype() != ir::DataType::Float) continue;
    std::string stem = file_stem(name) + "_float";
    write_file(dir / (stem + ".bin"), it->second.bytes().data(), it->second.byte_size());
    write_text_file(dir / (stem + ".txt"), float_text(it->second));
    ++result.float_tensors;
  }
  return result;
}

}  // namespace onnxptq::tools
