// Private to the ops that cut tensors into parts along an axis and join parts again
// (sequence.cc: SplitToSequence, ConcatFromSequence; loop_scan.cc: Loop's and Scan's outputs,
// Scan's inputs). Every element type moves as bytes, strings as strings.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "engine/kernel.h"

namespace onnxptq::engine::sequence {

// Elements [begin, end) of `t` along `axis` (0 <= axis < rank), a copy; `drop_axis` removes the
// axis (end - begin must then be 1).
Tensor slice_axis(const Tensor& t, int64_t axis, int64_t begin, int64_t end, bool drop_axis);

// Tensors of one element type joined along `axis`: all dims equal but that one, or, with
// `new_axis`, all dims equal and a new axis inserted at `axis` (0 <= axis <= rank). Error naming
// `op` for parts that differ in type or shape, or an empty list.
Tensor concat_axis(std::span<const Tensor* const> parts, int64_t axis, bool new_axis, std::string_view op);

// A position argument (SequenceAt, SequenceInsert, SequenceErase): one int32 or int64 value, in
// [-size, last] (negative counts from the back), returned in [0, last]. Error naming the range.
int64_t read_position(const Tensor& t, int64_t size, int64_t last);

}  // namespace onnxptq::engine::sequence
