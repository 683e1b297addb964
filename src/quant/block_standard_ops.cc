// Quark's BFPQuantizeDequantize / MXQuantizeDequantize in standard ONNX ops. Each rewrite repeats
// the kernel's float operations one for one (engine/kernels/quantize_block.cc says why each is
// what it is), so that every value, down to the sign of a zero, is the kernel's:
//   - the exponent of a block's largest finite magnitude is found without bit access: an estimate
//     floor(Log(v) / ln 2), corrected by comparing v with exact powers of two looked up (Gather) in
//     a table, then clamped as the kernel's biased exponent is (subnormal and zero: -127);
//   - powers of two come from that table too (Pow's accuracy is a runtime's choice);
//   - divisions by a power of two are Div (one rounding, as the kernel's product by the inverse);
//   - the kernel's rounding functions are built from Floor / Round with its signs of zero; the
//     sign of a zero is read as the sign of 1 / y;
//   - to_bfp_prime's products are in double, as in the kernel.
#include "quant/block_standard_ops.h"

#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/block_quantizer.h"
#include "onnxptq/error.h"
#include "passes/pipeline.h"
#include "passes/rewrite.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;
using ir::Value;

// The exponents the tables of powers of two hold: block exponents lie in [-127, 127]; the
// lookups add their offsets (down to -149 for a float step, -404 for to_bfp_prime's double unit)
// and floor_log2's corrections look one above.
constexpr int kFloatTableMin = -150, kFloatTableMax = 129;
constexpr int kDoubleTableMin = -410, kDoubleTableMax = 130;

// What the rewrite reads of a node, with the kernel's defaults.
struct BlockOp {
  bool mx = false;
  int64_t axis = 1, block_size = 8;
  int rounding = 0;  // 0 half away from zero, 1 half up, 2 half to even
  // BFPQuantizeDequantize
  bool prime = false, to_bfloat16_first = false, compiler_version = false;
  int m = 7;  // magnitude bits: bit_width - 9
  int64_t sub_block_size = 2;
  int max_shift = 1;
  // MXQuantizeDequantize
  engine::MxElementFormat element{0, 8, 0, 127.0f};
  bool min_error_scale = false;
  double int8_min = -128;
};

BlockOp read_block_op(const ir::Node& node) {
  const std::string where = "node '" + node.name + "' (" + node.op_type + ")";
  try {
    engine::BlockQuantizer check(node);  // the kernel's refusals of attribute values
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  BlockOp op;
  op.mx = node.op_type == "MXQuantizeDequantize";
  op.axis = node.attr_int("axis", 1);
  op.rounding = static_cast<int>(node.attr_int("rounding_mode", 0));
  if (op.mx) {
    op.block_size = node.attr_int("block_size", 32);
    op.element = engine::mx_element_format(node.attr_string("element_dtype", "int8"));
    op.min_error_scale = node.attr_int("min_error_scale", 0) != 0;
    op.int8_min = node.attr_int("symmetric_int8", 0) != 0 ? -127 : -128;
    return op;
  }
  op.compiler_version = node.attr_int("use_compiler_version_cpu_kernel", 0) != 0;
  const std::string method = node.attr_string("bfp_method", "to_bfp");
  op.prime = method != "to_bfp";
  op.m = static_cast<int>(node.attr_int("bit_width", 16) - 9);
  op.block_size = node.attr_int("block_size", 8);
  op.sub_block_size = op.prime ? node.attr_int("sub_block_size", 2) : op.block_size;
  op.max_shift = op.prime ? (1 << node.attr_int("sub_block_shift_bits", 1)) - 1 : 0;
  op.to_bfloat16_first = node.attr_int("convert_to_bfloat_before_bfp", 0) != 0;
  return op;
}

// Constants shared by every rewritten node of the model: scalars and the power-of-two tables.
class Constants {
 public:
  explicit Constants(ir::Model& model) : model_(model) {}

  Value* scalar(DataType type, double value) {
    const auto key = std::tuple{static_cast<int>(type), std::bit_cast<uint64_t>(value)};
    if (Value* v = scalars_[key]) return v;
    ir::Tensor t = type == DataType::Int64    ? ir::Tensor::from_values<int64_t>({}, {static_cast<int64_t>(value)})
                   : type == DataType::Double ? ir::Tensor::from_values<double>({}, {value})
                                              : ir::Tensor::from_values<float>({}, {static_cast<float>(value)});
    return scalars_[key] = add("block_const", std::move(t));
  }
  // float NaN with every payload bit set: what to_bfp_prime writes for a block holding Inf or NaN.
  Value* nan() {
    if (!nan_) nan_ = add("block_nan", ir::Tensor::from_values<float>({}, {std::bit_cast<float>(0x7FFFFFFFu)}));
    return nan_;
  }
  Value* int64s(const std::vector<int64_t>& values) {
    Value*& v = vectors_[values];
    if (!v) v = add("block_shape", ir::Tensor::from_values<int64_t>({static_cast<int64_t>(values.size())}, values));
    return v;
  }
  // 2^k at index k - min (float: 0 below its subnormals, inf above its range).
  Value* pow2_table(DataType type) {
    Value*& table = type == DataType::Double ? double_table_ : float_table_;
    if (table) return table;
    if (type == DataType::Double) {
      std::vector<double> p;
      for (int k = kDoubleTableMin; k <= kDoubleTableMax; ++k) p.push_back(std::ldexp(1.0, k));
      table = add("block_pow2_double", ir::Tensor::from_values<double>({static_cast<int64_t>(p.size())}, p));
    } else {
      std::vector<float> p;
      for (int k = kFloatTableMin; k <= kFloatTableMax; ++k) p.push_back(std::ldexp(1.0f, k));
      table = add("block_pow2_float", ir::Tensor::from_values<float>({static_cast<int64_t>(p.size())}, p));
    }
    return table;
  }

 private:
  Value* add(std::string_view base, ir::Tensor t) {
    return passes::add_initializer(model_, *model_.graph, base, std::move(t));
  }
  ir::Model& model_;
  std::map<std::tuple<int, uint64_t>, Value*> scalars_;
  std::map<std::vector<int64_t>, Value*> vectors_;
  Value* nan_ = nullptr;
  Value* float_table_ = nullptr;
  Value* double_table_ = nullptr;
};

// The nodes replacing one block node, named "<node>/<op>".
class Rewriter {
 public:
  Rewriter(ir::Graph& graph, Constants& constants, std::string prefix, int64_t opset)
      : graph_(graph), c_(constants), prefix_(std::move(prefix)), opset_(opset) {}

  // The op's one output (of element type `type`), or `out` when given.
  Value* op(const std::string& op_type, std::vector<Value*> inputs, DataType type,
            std::optional<ir::Attribute> attribute = std::nullopt, Value* out = nullptr) {
    if (!out) {
      out = graph_.add_unique_value(prefix_ + "/" + op_type);
      out->type = ir::ValueType::tensor(type);
    }
    ir::Node* n = graph_.add_node(op_type, std::move(inputs), {out}, graph_.fresh_name(prefix_ + "/" + op_type));
    if (attribute) n->set_attribute(std::move(*attribute));
    return out;
  }
  Value* f32(double v) { return c_.scalar(DataType::Float, v); }
  Value* f64(double v) { return c_.scalar(DataType::Double, v); }
  Value* i64(int64_t v) { return c_.scalar(DataType::Int64, static_cast<double>(v)); }

  Value* unary(const std::string& op_type, Value* x, DataType type = DataType::Float) { return op(op_type, {x}, type); }
  Value* binary(const std::string& op_type, Value* a, Value* b, DataType type = DataType::Float) {
    return op(op_type, {a, b}, type);
  }
  Value* compare(const std::string& op_type, Value* a, Value* b) { return op(op_type, {a, b}, DataType::Bool); }
  // ONNX Runtime's Where (1.30, CPU) returns +0 where it picks a -0 of `a` (it merges the two
  // selections by "a != 0 ? a : b"): a zero whose sign matters goes in `b`, and no Not computes
  // the condition of a Where.
  Value* where(Value* condition, Value* a, Value* b, DataType type = DataType::Float) {
    return op("Where", {condition, a, b}, type);
  }
  Value* cast(Value* x, DataType to) {
    return op("Cast", {x}, to, ir::Attribute::of_int("to", static_cast<int64_t>(to)));
  }
  Value* at_least(Value* x, Value* bound) { return compare("GreaterOrEqual", x, bound); }
  Value* clamp(Value* x, double lo, double hi, DataType type = DataType::Float) {
    Value* lo_v = type == DataType::Double ? f64(lo) : f32(lo);
    Value* hi_v = type == DataType::Double ? f64(hi) : f32(hi);
    return binary("Max", binary("Min", x, hi_v, type), lo_v, type);  // the kernel's clamp_value, in its order
  }
  Value* reduce_max(Value* x, std::vector<int64_t> axes) {
    if (opset_ >= 18) return op("ReduceMax", {x, c_.int64s(axes)}, DataType::Float);
    return op("ReduceMax", {x}, DataType::Float, ir::Attribute::of_ints("axes", std::move(axes)));
  }
  Value* not_finite(Value* x) {
    return op("Or", {unary("IsInf", x, DataType::Bool), unary("IsNaN", x, DataType::Bool)}, DataType::Bool);
  }
  // Whether y's sign bit is set (true for -0) or clear: 1 / y is -inf or +inf at zeros, and never 0
  // for a finite y (1 / FLT_MAX is subnormal; a runtime flushing subnormals to zero is not ONNX's). (Not a Not of the
  // other: ONNX Runtime's NotWhereFusion would swap a Where's inputs, and a zero's sign with them.)
  Value* sign_bit(Value* y) { return compare("Less", binary("Div", f32(1), y), f32(0)); }
  Value* sign_clear(Value* y) { return compare("Greater", binary("Div", f32(1), y), f32(0)); }

  // 2^(e + offset) for float exponents e (integers), from the table of `type`.
  Value* pow2(Value* e, int offset, DataType type = DataType::Float) {
    const int min = type == DataType::Double ? kDoubleTableMin : kFloatTableMin;
    Value* index = cast(binary("Add", e, f32(offset - min)), DataType::Int64);
    return op("Gather", {c_.pow2_table(type), index}, type);
  }

  // floor(log2 v) for v >= 0, clamped to [lo, hi] (v = 0 gives lo), as a float.
  Value* floor_log2(Value* v, int lo, int hi) {
    Value* estimate = unary("Floor", binary("Mul", unary("Log", v), f32(1.0 / std::log(2.0))));
    Value* e = clamp(estimate, lo, hi);  // Log(0) = -inf becomes lo
    e = binary("Sub", e, cast(compare("Less", v, pow2(e, 0)), DataType::Float));
    e = binary("Add", e, cast(at_least(v, pow2(e, 1)), DataType::Float));
    return clamp(e, lo, hi);
  }

  // The kernel's round_to_integer<R>(y), signs of zero included.
  Value* round_to_integer(Value* y, int rounding) {
    if (rounding == 2) {  // to even; zeros are +0 unless y is itself a zero
      Value* r = unary("Round", y);
      Value* zero_from_nonzero =
          op("And", {compare("Equal", r, f32(0)), op("Not", {compare("Equal", y, f32(0))}, DataType::Bool)},
             DataType::Bool);
      return where(zero_from_nonzero, f32(0), r);
    }
    Value* magnitude;
    if (rounding == 0) {  // |trunc(y)| + (|y - trunc(y)| >= 0.5)
      Value* a = unary("Abs", y);
      Value* f = unary("Floor", a);
      magnitude = binary("Add", f, cast(at_least(binary("Sub", a, f), f32(0.5)), DataType::Float));
    } else {  // floor(y) + 1 when y - floor(y) >= 0.5
      Value* f = unary("Floor", y);
      magnitude = unary("Abs", where(at_least(binary("Sub", y, f), f32(0.5)), binary("Add", f, f32(1)), f));
    }
    return where(sign_clear(y), magnitude, unary("Neg", magnitude));  // copysign(r, y)
  }

  // Blocks [-1, block_size] -> their to_bfp values.
  Value* bfp(Value* x, const BlockOp& b) {
    Value* bad = not_finite(x);
    Value* e = floor_log2(reduce_max(where(bad, f32(0), unary("Abs", x)), {1}), -127, 127);
    Value* step = pow2(e, 1 - b.m);
    Value *lo, *hi;
    if (b.compiler_version) {
      // The exponent goes up by one when a value of the block's largest exponent (any finite
      // value when that is the subnormals') rounds to 128 steps or more, or below -128.
      Value* threshold = binary("Mul", pow2(e, 0), cast(compare("Greater", e, f32(-127)), DataType::Float));
      Value* at_max_exponent =
          op("And", {op("Not", {bad}, DataType::Bool), at_least(unary("Abs", x), threshold)}, DataType::Bool);
      Value* r = round_to_integer(binary("Div", x, step), b.rounding);
      Value* outside = op("Or", {at_least(r, f32(128)), compare("Less", r, f32(-128))}, DataType::Bool);
      Value* up = reduce_max(cast(op("And", {at_max_exponent, outside}, DataType::Bool), DataType::Float), {1});
      e = binary("Add", e, up);
      step = binary("Mul", step, binary("Add", up, f32(1)));
      Value* scale = pow2(e, 0);
      hi = binary("Mul", scale, f32(std::ldexp(1.0, b.m) - 1));  // 2^e (2^m - 1) and -2^e 2^m
      lo = unary("Neg", binary("Mul", scale, f32(std::ldexp(1.0, b.m))));
    } else {
      hi = binary("Mul", step, f32(std::ldexp(1.0, b.m) - 1));  // 2^(e+1) - step, exactly
      lo = unary("Neg", hi);
    }
    Value* q = binary("Mul", round_to_integer(binary("Div", x, step), b.rounding), step);
    q = binary("Max", binary("Min", q, hi), lo);
    return where(bad, x, q);
  }

  // Blocks [-1, block_size / sub_block_size, sub_block_size] -> their to_bfp_prime values.
  Value* bfp_prime(Value* x, const BlockOp& b) {
    Value* bad = not_finite(x);
    Value* bad_block = compare("Greater", reduce_max(cast(bad, DataType::Float), {1, 2}), f32(0));
    Value* a = where(bad, f32(0), unary("Abs", x));
    Value* e_block = floor_log2(reduce_max(a, {1, 2}), -127, 127);
    Value* e_sub = floor_log2(reduce_max(a, {2}), -127, 127);
    Value* shift = binary("Min", binary("Sub", e_block, e_sub), f32(b.max_shift));
    Value* unit = pow2(binary("Sub", e_block, shift), 1 - b.m, DataType::Double);
    // Subnormal values count as zero; |x| / unit is exact in double.
    Value* a_normal = where(compare("Less", a, f32(std::ldexp(1.0, -126))), f32(0), a);
    Value* y = binary("Div", cast(a_normal, DataType::Double), unit, DataType::Double);
    Value* negative = sign_bit(x);
    Value* q;
    if (b.rounding == 2) {
      q = unary("Round", y, DataType::Double);
    } else {  // ties up in magnitude; half up takes a negative value's ties down
      Value* f = unary("Floor", y, DataType::Double);
      Value* rest = binary("Sub", y, f, DataType::Double);
      Value* up = at_least(rest, f64(0.5));
      if (b.rounding == 1)  // a tie of a negative value stays (ONNX Runtime has no Where of bools)
        up = op("Or",
                {compare("Greater", rest, f64(0.5)),
                 op("And", {compare("Equal", rest, f64(0.5)), op("Not", {negative}, DataType::Bool)}, DataType::Bool)},
                DataType::Bool);
      q = binary("Add", f, cast(up, DataType::Double), DataType::Double);
    }
    Value* signed_unit = where(negative, unary("Neg", unit, DataType::Double), unit, DataType::Double);
    Value* value = cast(binary("Mul", signed_unit, q, DataType::Double), DataType::Float);
    return where(bad_block, c_.nan(), value);
  }

  // Blocks [-1, block_size] (`bad`: where not finite) -> their MX values with the scale 2^scale_exponent.
  Value* mx_values(Value* x, Value* bad, Value* scale_exponent, const BlockOp& b) {
    const engine::MxElementFormat& f = b.element;
    Value* scale = pow2(scale_exponent, 0);
    Value* w = binary("Div", x, scale);
    Value* q;
    if (f.ebits == 0) {  // int8: steps of 2^-6 in [-128 (or -127), 127]
      q = binary("Mul", clamp(round_to_integer(binary("Mul", w, f32(64)), b.rounding), b.int8_min, 127), f32(0.015625));
    } else {  // to nearest even on the element's grid (subnormals included), saturated; zeros +0
      const int bias = (1 << (f.ebits - 1)) - 1;
      Value* a = where(bad, f32(0), unary("Abs", w));  // no Log of Inf or NaN: they pass anyway
      Value* quantum = pow2(floor_log2(a, 1 - bias, f.emax), -f.mbits);
      Value* magnitude =
          binary("Min", binary("Mul", unary("Round", binary("Div", a, quantum)), quantum), f32(f.max_norm));
      Value* negative = op("And", {compare("Less", w, f32(0)), compare("Greater", magnitude, f32(0))}, DataType::Bool);
      q = where(negative, unary("Neg", magnitude), magnitude);
    }
    return where(bad, x, binary("Mul", scale, q));
  }

  // The kernel's squared_error of blocks [-1, block_size]: squares of the finite differences in
  // double, padded with zeros to a power of two, then halves added until one column is left.
  Value* squared_error(Value* x, Value* bad, Value* y, int64_t block_size) {
    Value* d = binary("Sub", cast(x, DataType::Double), cast(y, DataType::Double), DataType::Double);
    Value* s = binary("Mul", d, d, DataType::Double);
    s = where(bad, f64(0), s, DataType::Double);
    const auto width = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(block_size)));
    if (width > block_size) s = op("Pad", {s, c_.int64s({0, 0, 0, width - block_size})}, DataType::Double);
    for (int64_t half = width / 2; half >= 1; half /= 2) {
      Value* low = op("Slice", {s, c_.int64s({0}), c_.int64s({half}), c_.int64s({1})}, DataType::Double);
      Value* high = op("Slice", {s, c_.int64s({half}), c_.int64s({2 * half}), c_.int64s({1})}, DataType::Double);
      s = binary("Add", low, high, DataType::Double);
    }
    return s;
  }

  // Blocks [-1, block_size] -> their MX values: the scale 2^(E - emax) from the block's largest
  // exponent E, or with min_error_scale twice that when its squared error is smaller (the scale
  // is chosen, then the values computed once more with it: no Where on values that may be -0).
  Value* mx(Value* x, const BlockOp& b) {
    Value* bad = not_finite(x);
    Value* e = floor_log2(reduce_max(where(bad, f32(0), unary("Abs", x)), {1}), -127, 127);
    e = binary("Sub", e, f32(b.element.emax));
    if (b.min_error_scale) {
      Value* coarser = binary("Add", e, f32(1));
      Value* smaller = compare("Less", squared_error(x, bad, mx_values(x, bad, coarser, b), b.block_size),
                               squared_error(x, bad, mx_values(x, bad, e, b), b.block_size));
      e = binary("Add", e, cast(smaller, DataType::Float));
    }
    return mx_values(x, bad, e, b);
  }

  // The standard ops computing the block node x -> out (its type and shape: x's).
  void rewrite(Value* x, Value* out, const BlockOp& b) {
    const ir::ValueType& t = x->type;
    const DataType type = t.elem_type;
    const auto rank = static_cast<int64_t>(t.shape.size());
    int64_t known = 1;
    bool all_known = true;
    for (const ir::Dim& d : t.shape) {
      if (d.has_value)
        known *= d.value;
      else
        all_known = false;
    }
    Value* xf = type == DataType::Float16 ? cast(x, DataType::Float) : x;
    // What the kernel returns for a tensor of one element: x, rounded to bfloat16 if it rounds first.
    Value* single_value = x;
    if (!b.mx && b.to_bfloat16_first) {
      xf = cast(cast(xf, DataType::BFloat16), DataType::Float);
      single_value = type == DataType::Float16 ? cast(xf, DataType::Float16) : xf;
    }
    if (all_known && known <= 1) {
      op("Identity", {single_value}, type, std::nullopt, out);
      return;
    }

    const int64_t axis = rank == 1 ? 0 : (b.axis < 0 ? b.axis + rank : b.axis);
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis) perm.push_back(d);
    perm.push_back(axis);
    const bool moved = axis != rank - 1;
    Value* xt = moved ? op("Transpose", {xf}, DataType::Float, ir::Attribute::of_ints("perm", perm)) : xf;

    // Padded with zeros to whole blocks (zeros never raise a block's exponent).
    const ir::Dim& length = t.shape[static_cast<size_t>(axis)];
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    Value* xp = xt;
    Value* end = nullptr;  // where the padding starts, when there is some
    if (length.has_value) {
      const int64_t pad = (b.block_size - length.value % b.block_size) % b.block_size;
      if (pad > 0) {
        pads.back() = pad;
        xp = op("Pad", {xt, c_.int64s(pads)}, DataType::Float);
        end = c_.int64s({length.value});
      }
    } else {
      end = op("Slice",
               {op("Shape", {xt}, DataType::Int64), c_.int64s({-1}), c_.int64s({std::numeric_limits<int64_t>::max()})},
               DataType::Int64);
      Value* size = i64(b.block_size);
      Value* pad = binary("Mod", binary("Sub", size, binary("Mod", end, size, DataType::Int64), DataType::Int64), size,
                          DataType::Int64);
      pads.pop_back();
      Value* all_pads = op("Concat", {c_.int64s(pads), pad}, DataType::Int64, ir::Attribute::of_int("axis", 0));
      xp = op("Pad", {xt, all_pads}, DataType::Float);
    }

    const std::vector<int64_t> block_shape =
        b.prime ? std::vector<int64_t>{-1, b.block_size / b.sub_block_size, b.sub_block_size}
                : std::vector<int64_t>{-1, b.block_size};
    Value* padded_shape = op("Shape", {xp}, DataType::Int64);
    Value* shape = c_.int64s(block_shape);
    if (!all_known) {
      // ONNX Runtime's allocation planner (1.30) compares every tensor of known rank it plans with
      // every freed one (FindReusableTensor); thousands of tensors of known rank and sizes known
      // only at run time made a session of the PP-OCR detector take two minutes to create. The
      // blocks' shape is given so that shape inference cannot tell its length (a Slice ending at a
      // value computed at run time): the block arithmetic then has no inferred shape, and the
      // planner passes over it.
      Value* length_of_shape =
          binary("Add",
                 binary("Mul", op("Slice", {padded_shape, c_.int64s({0}), c_.int64s({1})}, DataType::Int64), i64(0),
                        DataType::Int64),
                 i64(static_cast<int64_t>(block_shape.size())), DataType::Int64);
      shape = op("Slice", {shape, c_.int64s({0}), length_of_shape}, DataType::Int64);
    }
    Value* blocks = op("Reshape", {xp, shape}, DataType::Float);
    Value* y = b.mx ? mx(blocks, b) : b.prime ? bfp_prime(blocks, b) : bfp(blocks, b);
    y = op("Reshape", {y, padded_shape}, DataType::Float);
    if (end) y = op("Slice", {y, c_.int64s({0}), end, c_.int64s({-1})}, DataType::Float);
    if (moved) {
      std::vector<int64_t> inverse(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      y = op("Transpose", {y}, DataType::Float, ir::Attribute::of_ints("perm", inverse));
    }
    if (type == DataType::Float16) y = cast(y, DataType::Float16);
    if (known > 1) {
      op("Identity", {y}, type, std::nullopt, out);
      return;
    }
    // Dimensions known only at run time may make a tensor of one element, which stays as is (a
    // -0 of it leaves ONNX Runtime's Where as +0).
    Value* single = compare("Less", op("Size", {x}, DataType::Int64), i64(2));
    op("Where", {single, single_value, y}, type, std::nullopt, out);
  }

 private:
  ir::Graph& graph_;
  Constants& c_;
  std::string prefix_;
  int64_t opset_;
};

// The form below needs the rank of each block node's input. A model that was not prepared (no
// value_info) gets the ranks it lacks from shape inference on a copy: ONNX's, then the engine's
// run of one sample (passes/pipeline.h), which leaves the dims of dynamic inputs unknown.
void type_block_inputs(ir::Model& model, const std::vector<ir::Node*>& targets) {
  std::vector<Value*> unknown;
  for (ir::Node* n : targets) {
    Value* x = n->input(0);
    const Value* y = n->output(0);
    if (x && !x->type.has_shape && !(y && y->type.has_shape) && !passes::constant_of(x)) unknown.push_back(x);
  }
  if (unknown.empty()) return;
  ir::Model copy = ir::clone_model(model);
  passes::PassContext context;
  passes::infer_shapes(copy, context);
  for (Value* v : unknown)
    if (const Value* typed = copy.graph->find_value(v->name()); typed && typed->type.has_shape) v->type = typed->type;
}

}  // namespace

size_t write_block_nodes_in_standard_ops(ir::Model& model) {
  ir::Graph& graph = *model.graph;
  std::vector<ir::Node*> targets;
  for (const auto& n : graph.nodes())
    if (engine::is_block_quantize_node(*n)) targets.push_back(n.get());
  if (targets.empty()) return 0;
  type_block_inputs(model, targets);
  const int64_t opset = model.opset("");
  Constants constants(model);
  std::set<Value*> replaced_constants;
  for (ir::Node* node : targets) {
    const std::string name = node->name.empty() ? node->output(0)->name() : node->name;
    const BlockOp op = read_block_op(*node);
    Value* x = node->input(0);
    Value* y = node->output(0);
    if (!x || !y) throw Error("node '" + name + "' (" + node->op_type + ") has no input x or no output y");
    if (const ir::Tensor* weight = passes::constant_of(x)) {  // stored fake-quantized
      ir::Tensor values = engine::BlockQuantizer(*node)(*weight, 0);
      graph.remove_node(node);
      if (x->has_initializer()) replaced_constants.insert(x);
      y->type = ir::ValueType::tensor(values.dtype(), values.dims());
      graph.set_initializer(y, std::move(values));
      continue;
    }
    if (opset < 13)
      throw Error("node '" + name + "' (" + node->op_type +
                  "): the standard-ops form needs opset 13 or later; the model "
                  "has opset " +
                  std::to_string(opset) + " (upgrade it first)");
    // The op's output has its input's type and shape: either may be the one known.
    if (!x->type.has_shape && y->type.has_shape) x->type = y->type;
    const ir::ValueType& t = x->type;
    if (!t.is_tensor() || !t.has_shape)
      throw Error("node '" + name + "' (" + node->op_type + "): the rank of its input '" + x->name() +
                  "' is unknown, and the standard-ops form moves the blocks' axis last");
    if (t.elem_type != DataType::Float && t.elem_type != DataType::Float16)
      throw Error("node '" + name + "' (" + node->op_type + "): its input '" + x->name() + "' is " + t.to_string() +
                  ", expected float or float16");
    const auto rank = static_cast<int64_t>(t.shape.size());
    if (rank > 1 && (op.axis < -rank || op.axis >= rank))
      throw Error("node '" + name + "' (" + node->op_type + "): axis " + std::to_string(op.axis) +
                  " is out of range for its input of rank " + std::to_string(rank));
    graph.remove_node(node);
    Rewriter(graph, constants, name, opset).rewrite(x, y, op);
  }
  for (Value* v : replaced_constants)  // float originals no other node reads
    if (v->uses().empty() && v->has_initializer() && !graph.is_output(v) && !graph.is_input(v)) graph.remove_value(v);
  graph.sort_nodes();
  return targets.size();
}

}  // namespace onnxptq::quant
