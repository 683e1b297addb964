// Quark's quantized LSTM custom op, com.amd.quark ExtendedLSTM v1 (the engine's kernel:
// engine/kernels/recurrent_extended.cc; docs/formats.md): an ONNX LSTM node rewritten as one, as
// Quark's tool quark/onnx/tools/convert_lstm_to_customlstm.py writes it: the same inputs, the
// attributes direction, hidden_size and layout, and the uint16 scale and zero point of X, W, R, B
// (those of the DequantizeLinear nodes in front of them) and of Y (its QuantizeLinear's) as the
// attributes x_scale, x_zero_point, ..., y_zero_point.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/model.h"
#include "qmath/params.h"

namespace onnxptq::quant {

struct ExtendedLstmParams {
  qmath::ScaleZeroPoint x, w, r, b, y;
};

// Error naming the node and the attribute or input when Quark's ExtendedLSTM cannot compute what
// `lstm` computes: a direction other than bidirectional, layout 1, input_forget 1, clip,
// activations other than Sigmoid, Tanh, Tanh, peepholes, no B, or Y_h / Y_c read by a node or a
// graph output (the op has output Y only).
void check_extended_lstm_convertible(const ir::Node& lstm);

// Replaces `lstm` (checked as above) by an ExtendedLSTM of the same name, inputs and output Y, with
// the parameters `p` (each a uint16 scale and zero point; Error naming the tensor otherwise). The
// unused outputs Y_h and Y_c are dropped. The model must import com.amd.quark 1 (the caller sets
// it). Returns the new node.
ir::Node* write_extended_lstm(ir::Graph& graph, ir::Node* lstm, const ExtendedLstmParams& p);

// Quark's convert_lstm_to_customlstm on `model`: every LSTM of its main graph whose X, W, R and B
// are read through a DequantizeLinear and whose Y is read by a QuantizeLinear, each of one uint16
// scale and zero point, written as above with those parameters; the model imports com.amd.quark 1.
// A line per LSTM goes to `log`. Returns the LSTMs converted. Error naming the LSTM and the reason
// for one that is not so quantized or that ExtendedLSTM cannot compute, and for a model without
// an LSTM.
// `only` (when given): the names of the LSTMs to convert, the others left as they are.
size_t convert_lstms_to_extended(ir::Model& model, std::vector<std::string>& log,
                                 const std::set<std::string>* only = nullptr);

}  // namespace onnxptq::quant
