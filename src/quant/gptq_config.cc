// extra_options' GPTQParams (Quark's GPTQConfig: Bits, BlockSize, GroupSize, PercDamp, ActOrder,
// PerChannel, WeightSymmetric, MSE) and the checks of UseGPTQ against the rest of the config.
#include <nlohmann/json.hpp>
#include <string>

#include "onnxptq/error.h"
#include "quant/block_format.h"
#include "quant/config.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {
namespace {

[[noreturn]] void bad(const std::string& key, const std::string& expected, const nlohmann::json& v) {
  throw Error("GPTQParams " + key + ": expected " + expected + ", got " + v.dump());
}

int64_t whole(const std::string& key, const nlohmann::json& v) {
  if (!v.is_number_integer()) bad(key, "an integer", v);
  return v.get<int64_t>();
}

bool boolean(const std::string& key, const nlohmann::json& v) {
  if (!v.is_boolean()) bad(key, "true or false", v);
  return v.get<bool>();
}

int bits_of(ir::DataType t) {
  switch (t) {
    case ir::DataType::Int4:
    case ir::DataType::UInt4:
      return 4;
    case ir::DataType::Int8:
    case ir::DataType::UInt8:
      return 8;
    case ir::DataType::Int16:
    case ir::DataType::UInt16:
      return 16;
    case ir::DataType::Int32:
    case ir::DataType::UInt32:
      return 32;
    default:
      return 0;
  }
}

}  // namespace

void apply_gptq_params(GptqParams& p, const nlohmann::json& value) {
  if (!value.is_object())
    bad("", "an object of Bits, BlockSize, GroupSize, PercDamp, ActOrder, PerChannel, WeightSymmetric, MSE", value);
  p.given = true;
  for (const auto& [key, v] : value.items()) {
    if (key == "Bits") {
      p.bits = whole(key, v);
      if (*p.bits < 2 || *p.bits > 32) bad(key, "a bit width", v);
    } else if (key == "BlockSize") {
      p.block_size = whole(key, v);
      if (p.block_size < 1) bad(key, "a positive integer", v);
    } else if (key == "GroupSize") {
      p.group_size = whole(key, v);
      if (*p.group_size == 0 || *p.group_size < -1) bad(key, "-1 (no groups) or a positive integer", v);
    } else if (key == "PercDamp") {
      if (!v.is_number()) bad(key, "a number", v);
      p.perc_damp = v.get<double>();
      if (!(p.perc_damp >= 0)) bad(key, "a number of at least 0", v);
    } else if (key == "ActOrder") {
      p.act_order = boolean(key, v);
    } else if (key == "PerChannel") {
      p.per_channel = boolean(key, v);
    } else if (key == "WeightSymmetric") {
      p.weight_symmetric = boolean(key, v);
    } else if (key == "MSE") {
      p.mse = boolean(key, v);
    } else {
      throw Error("GPTQParams has no key " + key +
                  " (known: Bits, BlockSize, GroupSize, PercDamp, ActOrder, PerChannel, WeightSymmetric, MSE)");
    }
  }
}

bool has_post_quantization(const QuantConfig& c) {
  return c.include_fast_ft || c.bias_correction || c.use_gptq ||
         (c.use_matmul_nbits && c.matmul_nbits.algorithm == "GPTQ");
}

// UseGPTQ rounds the plan's weights on the plan's grid; MatMulNBits' GPTQ on its groups.
void check_gptq_config(const QuantConfig& c) {
  const GptqParams& g = c.gptq;
  const bool nbits_gptq = c.use_matmul_nbits && c.matmul_nbits.algorithm == "GPTQ";
  if (g.given && !c.use_gptq && !nbits_gptq)
    throw Error(
        "extra option GPTQParams takes effect only with UseGPTQ true (or UseMatMulNBits with "
        "MatMulNBitsParams Algorithm GPTQ)");
  // MSE: Quark's GPTQ searches its own scale; here the scale is the quantizer's.
  auto refuse_mse = [&](const std::string& path) {
    if (g.mse.value_or(false))
      throw unsupported("GPTQParams MSE true with " + path +
                        ": GPTQ rounds on the quantizer's scales, it searches none (leave MSE false)");
  };
  if (nbits_gptq) {
    const MatMulNBitsParams& m = c.matmul_nbits;
    refuse_mse("UseMatMulNBits");
    if (g.bits && *g.bits != m.bits)
      throw Error("GPTQParams Bits " + std::to_string(*g.bits) + " with UseMatMulNBits: MatMulNBitsParams Bits (" +
                  std::to_string(m.bits) + ") sets the width");
    if (g.group_size && *g.group_size != m.group_size)
      throw Error("GPTQParams GroupSize " + std::to_string(*g.group_size) +
                  " with UseMatMulNBits: MatMulNBitsParams GroupSize (" + std::to_string(m.group_size) +
                  ") sets the groups");
    if (g.per_channel.value_or(false))
      throw Error(
          "GPTQParams PerChannel true with UseMatMulNBits: MatMulNBits' weights are group-wise "
          "(MatMulNBitsParams GroupSize)");
    if (g.weight_symmetric && *g.weight_symmetric != m.symmetric)
      throw Error(std::string("GPTQParams WeightSymmetric ") + (*g.weight_symmetric ? "true" : "false") +
                  " with UseMatMulNBits: MatMulNBitsParams Symmetric sets it");
  }
  if (!c.use_gptq) return;
  if (c.use_matmul_nbits)
    throw Error(
        "UseGPTQ with UseMatMulNBits: GPTQ for MatMulNBits is MatMulNBitsParams Algorithm \"GPTQ\"; "
        "UseGPTQ is the Q/DQ path's");
  if (c.use_dynamic_quant)
    throw Error("UseGPTQ with use_dynamic_quant: GPTQ needs calibration data and the static path's weights");
  const std::string weight = std::string("weight_type ") + quant_type_name(c.weight_type);
  if (quant_type_is_block(c.weight_type))
    throw unsupported("UseGPTQ with " + weight +
                      ": block formats share an exponent per block, GPTQ rounds to a grid of fixed scales");
  if (!quant_type_is_integer(c.weight_type))
    throw unsupported("UseGPTQ with " + weight + ": GPTQ rounds weights to integers; " +
                      "float16/bfloat16 weights have no grid to round to");
  refuse_mse("UseGPTQ");
  if (g.group_size && *g.group_size != -1)
    throw unsupported("GPTQParams GroupSize " + std::to_string(*g.group_size) +
                      " with UseGPTQ: the Q/DQ weights are per tensor or per channel (blocked Q/DQ weights are "
                      "not built); group-wise 4-bit weights: UseMatMulNBits with MatMulNBitsParams Algorithm GPTQ");
  if (g.bits && *g.bits != bits_of(c.weight_type))
    throw Error("GPTQParams Bits " + std::to_string(*g.bits) + " with " + weight + " (" +
                std::to_string(bits_of(c.weight_type)) +
                " bits): GPTQ rounds on the plan's weights, whose type "
                "sets the width; set weight_type to match");
  if (g.per_channel && *g.per_channel != c.per_channel)
    throw Error(std::string("GPTQParams PerChannel ") + (*g.per_channel ? "true" : "false") + " with per_channel " +
                (c.per_channel ? "true" : "false") + ": GPTQ rounds on the plan's scales; set per_channel to match");
  if (g.weight_symmetric && *g.weight_symmetric != c.weights_symmetric())
    throw Error(std::string("GPTQParams WeightSymmetric ") + (*g.weight_symmetric ? "true" : "false") + " with " +
                weight + " weights " + (c.weights_symmetric() ? "symmetric" : "asymmetric") +
                ": GPTQ rounds on the plan's zero points; set the extra option WeightSymmetric to match");
}

}  // namespace onnxptq::quant
