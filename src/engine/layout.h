// The channels-last pass: 2-D convolutions run on NHWC tensors (what oneDNN's fast AVX-512
// convolutions read and write), and activations stay NHWC between them. Like fusion, it edits
// the private copy of a graph that a Session runs and keeps every visible tensor as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxptq::engine {

// Transpose perms between the ONNX layout and channels-last, for rank-4 tensors.
inline const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
inline const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

// Every Conv / FusedConv (engine/fusion.h) with 2 spatial axes and constant float32 weights
// becomes Transpose(kToNhwc) -> NhwcConv -> Transpose(kToNchw), the NhwcConv (domain
// kEngineDomain) keeping the node's attributes and reading and writing [N, H, W, C] tensors.
// Returns how many convolutions were rewritten.
int convert_convolutions_to_nhwc(ir::Graph& graph);

// Moves Transposes down: below the layout-agnostic elementwise ops whose tensor inputs all come
// from Transposes of one perm (or are size-1 constants), below Concat (its axis renumbered), and
// from NCHW to NHWC below 2-D MaxPool (without Indices), GlobalAveragePool, GlobalMaxPool and
// nearest Resize, which become the engine's Nhwc* twins. Removes pairs of Transposes that undo
// each other. A visible value (graph output, or `visible` says so) is never bypassed: what reads
// it keeps reading it, so observers and transforms see and act as without the pass.
// `onnx_opset` is the model's default-domain opset (Resize changed its inputs at 11). For each
// Transpose output it removes, `same_elements` (when given) gets the name of the value that holds
// the same elements in another order. Returns how many Transposes were moved or removed.
int eliminate_transposes(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible, int64_t onnx_opset,
                         std::map<std::string, std::string>* same_elements = nullptr);

// NhwcConvs left with a Transpose on each side (an NCHW-only op or a visible value before and
// after) go back to Conv / FusedConv: there the convolution picks its own best layout, and a
// 1x1 convolution on NCHW is one GEMM. Returns how many went back.
int revert_isolated_nhwc_convolutions(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible);

// The whole pass: the three steps above in order. Returns how many NhwcConvs remain.
int run_convolutions_nhwc(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible, int64_t onnx_opset,
                          std::map<std::string, std::string>* same_elements = nullptr);

}  // namespace onnxptq::engine
