// The seeds' model tools over the IR (onnxptq/convert.h is the public API over them): each takes a
// model and returns a new one, the input never changed. One source file per tool.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/model.h"
#include "onnxptq/convert.h"
#include "quant/qdq_nodes.h"

namespace onnxptq::tools {

using onnxptq::Bf16Format;
// The Q/DQ nodes of a written model, as the quantizer writes them.
using onnxptq::ConvertResult;
using onnxptq::Fp16Options;
using quant::constant_tensor;
using quant::dequantize_producer;
using quant::describe_node;
using quant::is_dequantize_node;
using quant::is_quantize_node;
using quant::qdq_params;
using quant::QdqParams;
using quant::remove_unused_initializers;
using quant::single_dequantize_reader;

// remove_qdq.cc
ir::Model remove_qdq(const ir::Model& model, ConvertResult& result);
// block_to_standard_ops.cc
ir::Model block_to_standard_ops(const ir::Model& model, ConvertResult& result);
// qdq_to_qop.cc
ir::Model qdq_to_qop(const ir::Model& model, ConvertResult& result);
// fix_shapes is a pass (passes/model_format.h): the quantizer's FixShapes runs it too.
// a8w8_npu_to_cpu.cc
ir::Model a8w8_npu_to_cpu(const ir::Model& model, ConvertResult& result);
// u16u8_to_u8u8.cc
ir::Model u16u8_to_u8u8(const ir::Model& model, ConvertResult& result);
// bias_int32_to_int16.cc
ir::Model bias_int32_to_int16(const ir::Model& model, ConvertResult& result);
// lstm_to_customlstm.cc
ir::Model lstm_to_customlstm(const ir::Model& model, ConvertResult& result);
// fp32_to_fp16.cc
ir::Model fp32_to_fp16(const ir::Model& model, const Fp16Options& options, ConvertResult& result);
// to_bfloat16.cc
// A float32 model (a float16 one with `from_float16`) quantized with the BF16 preset in `format`.
ir::Model to_bfloat16(const ir::Model& model, Bf16Format format, bool from_float16, ConvertResult& result);

}  // namespace onnxptq::tools
