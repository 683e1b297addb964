#include "tools/random_inputs.h"

#include "onnxptq/error.h"

namespace onnxptq::tools {
namespace {

class Mulberry32 {
 public:
  explicit Mulberry32(uint32_t seed) : state_(seed) {}
  uint32_t next() {
    state_ += 0x6d2b79f5u;
    uint32_t z = state_;
    z = (z ^ (z >> 15)) * (z | 1u);
    z ^= z + (z ^ (z >> 7)) * (z | 61u);
    return z ^ (z >> 14);
  }

 private:
  uint32_t state_;
};

}  // namespace

std::vector<int64_t> parse_dims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t x = text.find('x', pos);
    std::string item = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 12)
      throw Error(what + ": '" + text + "' is not a shape like 1x3x224x224");
    dims.push_back(std::stoll(item));
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return dims;
}

std::map<std::string, ir::Tensor> random_inputs(const std::vector<const ir::Value*>& inputs, uint32_t seed,
                                                const std::map<std::string, std::vector<int64_t>>& shapes) {
  for (const auto& [name, dims] : shapes) {
    bool known = false;
    for (const ir::Value* v : inputs) known = known || v->name() == name;
    if (!known) throw Error("--shape names '" + name + "', which is not an input of the model");
  }
  Mulberry32 rng(seed);
  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : inputs) {
    const ir::ValueType& type = v->type;
    if (!type.is_tensor() || type.elem_type != ir::DataType::Float)
      throw Error("input '" + v->name() + "' is " + type.to_string() + ": random inputs are float32 only");
    std::vector<int64_t> dims;
    auto given = shapes.find(v->name());
    if (given != shapes.end()) {
      dims = given->second;
      bool fits = type.has_shape && dims.size() == type.shape.size();
      for (size_t i = 0; fits && i < dims.size(); ++i)
        fits = !type.shape[i].has_value || type.shape[i].value == dims[i];
      if (!fits)
        throw Error("--shape " + v->name() + "=" + ir::dims_to_string(dims) + " does not fit the model's " + type.to_string());
    } else if (auto fixed = type.static_shape()) {
      dims = *fixed;
    } else {
      throw Error("input '" + v->name() + "' has the dynamic shape " + type.to_string() + ": give --shape " + v->name() +
                  "=AxBx...");
    }
    ir::Tensor t = ir::Tensor::uninitialized(ir::DataType::Float, dims);
    for (float& x : t.mutable_values<float>()) x = static_cast<float>(rng.next() >> 8) / 16777216.0f;
    feeds[v->name()] = std::move(t);
  }
  return feeds;
}

}  // namespace onnxptq::tools
