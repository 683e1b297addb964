// Convolution geometry shared by Conv and ConvTranspose (attributes, padding modes, output
// shapes) and their reference loops, which serve double and the shapes oneDNN declines.
#include <cmath>

#include "engine/kernels/linear.h"

namespace onnxptq::engine::linear {

AutoPad parse_auto_pad(const ir::Node& node) {
  std::string s = node.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::NotSet;
  if (s == "SAME_UPPER") return AutoPad::SameUpper;
  if (s == "SAME_LOWER") return AutoPad::SameLower;
  if (s == "VALID") return AutoPad::Valid;
  throw Error("auto_pad '" + s + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
}

namespace {

std::string ints_to_string(const std::vector<int64_t>& v) { return ir::dims_to_string(v); }

void check_at_least(const std::vector<int64_t>& values, int64_t low, const char* name) {
  for (int64_t v : values)
    if (v < low)
      throw Error(std::string(name) + " " + ints_to_string(values) + " must be " + (low == 0 ? "non-negative" : "positive"));
}

// The attribute's values, or `fallback` repeated for each of the `n` spatial axes; Error when
// its length is wrong for the input.
std::vector<int64_t> per_axis(const std::vector<int64_t>& values, size_t n, int64_t fallback, const char* name) {
  if (values.empty()) return std::vector<int64_t>(n, fallback);
  if (values.size() != n)
    throw Error(std::string(name) + " " + ints_to_string(values) + " has " + std::to_string(values.size()) +
                " values, expected " + std::to_string(n) + " for the input's spatial rank");
  return values;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Shared checks of X and W: ranks, kernel_shape, and the per-axis attributes.
void resolve_common(const ConvAttributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                    ConvShape& s) {
  if (x.size() < 3)
    throw Error("X must have a batch, a channel and at least one spatial axis, got shape " + ints_to_string(x));
  if (w.size() != x.size())
    throw Error("W of shape " + ints_to_string(w) + " must have the rank of X " + ints_to_string(x));
  size_t nd = x.size() - 2;
  s.batch = x[0];
  s.in_channels = x[1];
  s.group = a.group;
  s.in.assign(x.begin() + 2, x.end());
  s.kernel.assign(w.begin() + 2, w.end());
  if (!a.kernel_shape.empty() && a.kernel_shape != s.kernel)
    throw Error("kernel_shape " + ints_to_string(a.kernel_shape) + " does not match W of shape " + ints_to_string(w));
  s.strides = per_axis(a.strides, nd, 1, "strides");
  s.dilations = per_axis(a.dilations, nd, 1, "dilations");
  if (s.in_channels % a.group != 0)
    throw Error("X has " + std::to_string(s.in_channels) + " channels, not a multiple of group " + std::to_string(a.group));
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> explicit_pads(const ConvAttributes& a, size_t nd) {
  if (a.pads.empty() || a.auto_pad == AutoPad::Valid) return {std::vector<int64_t>(nd, 0), std::vector<int64_t>(nd, 0)};
  if (a.pads.size() != 2 * nd)
    throw Error("pads " + ints_to_string(a.pads) + " has " + std::to_string(a.pads.size()) + " values, expected " +
                std::to_string(2 * nd));
  return {std::vector<int64_t>(a.pads.begin(), a.pads.begin() + nd), std::vector<int64_t>(a.pads.begin() + nd, a.pads.end())};
}

}  // namespace

ConvAttributes::ConvAttributes(const ir::Node& node, bool transpose)
    : auto_pad(parse_auto_pad(node)),
      group(node.attr_int("group", 1)),
      kernel_shape(node.attr_ints("kernel_shape", {})),
      strides(node.attr_ints("strides", {})),
      dilations(node.attr_ints("dilations", {})),
      pads(node.attr_ints("pads", {})) {
  if (group < 1) throw Error("group " + std::to_string(group) + " must be positive");
  check_at_least(kernel_shape, 1, "kernel_shape");
  check_at_least(strides, 1, "strides");
  check_at_least(dilations, 1, "dilations");
  check_at_least(pads, 0, "pads");
  if (pads.size() % 2 != 0) throw Error("pads " + ints_to_string(pads) + " must have an even number of values");
  if (transpose) {
    output_padding = node.attr_ints("output_padding", {});
    output_shape = node.attr_ints("output_shape", {});
    check_at_least(output_padding, 0, "output_padding");
    check_at_least(output_shape, 0, "output_shape");
  } else if (node.find_attribute("output_padding") || node.find_attribute("output_shape")) {
    throw Error("output_padding and output_shape are attributes of ConvTranspose, not Conv");
  }
}

std::vector<int64_t> ConvShape::out_dims() const {
  std::vector<int64_t> d{batch, out_channels};
  d.insert(d.end(), out.begin(), out.end());
  return d;
}

ConvShape conv_resolve(const ConvAttributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
  ConvShape s;
  resolve_common(a, x, w, s);
  size_t nd = s.in.size();
  s.out_channels = w[0];
  if (w[1] * a.group != s.in_channels)
    throw Error("W of shape " + ints_to_string(w) + " expects " + std::to_string(w[1] * a.group) + " input channels (group " +
                std::to_string(a.group) + "), X has " + std::to_string(s.in_channels));
  if (s.out_channels % a.group != 0)
    throw Error("W has " + std::to_string(s.out_channels) + " output channels, not a multiple of group " + std::to_string(a.group));
  auto [begin, end] = explicit_pads(a, nd);
  s.pads_begin = begin;
  s.pads_end = end;
  s.out.resize(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t extent = (s.kernel[i] - 1) * s.dilations[i] + 1;
    if (a.auto_pad == AutoPad::SameUpper || a.auto_pad == AutoPad::SameLower) {
      s.out[i] = (s.in[i] + s.strides[i] - 1) / s.strides[i];
      int64_t total = std::max<int64_t>(0, (s.out[i] - 1) * s.strides[i] + extent - s.in[i]);
      int64_t small = total / 2;
      s.pads_begin[i] = a.auto_pad == AutoPad::SameUpper ? small : total - small;
      s.pads_end[i] = total - s.pads_begin[i];
      continue;
    }
    int64_t padded = s.in[i] + s.pads_begin[i] + s.pads_end[i];
    if (padded < extent)
      throw Error("the kernel (extent " + std::to_string(extent) + " on spatial axis " + std::to_string(i) +
                  ") is larger than the padded input (" + std::to_string(padded) + ")");
    s.out[i] = (padded - extent) / s.strides[i] + 1;
  }
  return s;
}

ConvShape conv_transpose_resolve(const ConvAttributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
  ConvShape s;
  resolve_common(a, x, w, s);
  size_t nd = s.in.size();
  if (w[0] != s.in_channels)
    throw Error("W of shape " + ints_to_string(w) + " expects " + std::to_string(w[0]) + " input channels, X has " +
                std::to_string(s.in_channels));
  s.out_channels = w[1] * a.group;
  std::vector<int64_t> output_padding = per_axis(a.output_padding, nd, 0, "output_padding");
  std::vector<int64_t> wanted;  // the output's spatial sizes when given or implied
  if (!a.output_shape.empty()) {
    if (a.output_shape.size() == nd) wanted = a.output_shape;
    else if (a.output_shape.size() == nd + 2) wanted.assign(a.output_shape.begin() + 2, a.output_shape.end());
    else
      throw Error("output_shape " + ints_to_string(a.output_shape) + " has " + std::to_string(a.output_shape.size()) +
                  " values, expected " + std::to_string(nd));
  } else if (a.auto_pad == AutoPad::SameUpper || a.auto_pad == AutoPad::SameLower) {
    for (size_t i = 0; i < nd; ++i) wanted.push_back(s.in[i] * s.strides[i]);
  }
  auto [begin, end] = explicit_pads(a, nd);
  s.pads_begin = begin;
  s.pads_end = end;
  s.out.resize(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t full = s.strides[i] * (s.in[i] - 1) + output_padding[i] + (s.kernel[i] - 1) * s.dilations[i] + 1;
    if (!wanted.empty()) {
      // The spec's split of the total padding, with floor division: a negative total (output
      // larger than the full result) pads the end with zeros.
      int64_t total = full - wanted[i];
      int64_t half = floor_div(total, 2);
      s.pads_begin[i] = a.auto_pad == AutoPad::SameUpper ? half : total - half;
      s.pads_end[i] = total - s.pads_begin[i];
      s.out[i] = wanted[i];
    } else {
      s.out[i] = full - s.pads_begin[i] - s.pads_end[i];
      if (s.out[i] < 0)
        throw Error("pads " + ints_to_string(a.pads) + " remove more than the whole output on spatial axis " + std::to_string(i));
    }
    // The end padding of the full result, output_padding included: what oneDNN calls padding_r.
    s.pads_end[i] -= output_padding[i];
  }
  return s;
}

void conv_check_types(const Tensor& x, const Tensor& w, const Tensor* b) {
  if (w.dtype() != x.dtype() || (b && b->dtype() != x.dtype()))
    throw Error("X, W and B must have one element type, got " + std::string(ir::data_type_name(x.dtype())) + ", " +
                std::string(ir::data_type_name(w.dtype())) + (b ? ", " + std::string(ir::data_type_name(b->dtype())) : ""));
}

void conv_check_bias(const Tensor* b, int64_t out_channels) {
  if (b && (b->rank() != 1 || b->dims()[0] != out_channels))
    throw Error("B of shape " + ir::dims_to_string(b->dims()) + " must be [" + std::to_string(out_channels) + "]");
}

// ---- reference convolutions

namespace {

// For each position of `out` (row-major), the kernel taps that land inside `in`: pairs of
// (kernel offset, input offset), in the flat CSR layout (starts, taps). `transposed` maps an
// input position to output positions instead (ConvTranspose), with the roles of in and out
// swapped by the caller.
struct Taps {
  std::vector<int64_t> start;                      // size positions + 1
  std::vector<std::pair<int64_t, int64_t>> taps;  // (kernel index, other index)
};

// Taps of a sliding window: position p of `from` and kernel index k reach
// p * stride - pad + k * dilation in `to` (Conv: from = output, to = input; ConvTranspose:
// from = input, to = output, with pad = pads_begin).
Taps make_taps(const std::vector<int64_t>& from, const std::vector<int64_t>& to, const ConvShape& s) {
  size_t nd = from.size();
  int64_t positions = ir::element_count(from), kernel_size = ir::element_count(s.kernel);
  Taps t;
  t.start.reserve(positions + 1);
  std::vector<int64_t> p(nd, 0), k(nd, 0);
  for (int64_t pos = 0; pos < positions; ++pos) {
    t.start.push_back(static_cast<int64_t>(t.taps.size()));
    std::fill(k.begin(), k.end(), 0);
    for (int64_t kf = 0; kf < kernel_size; ++kf) {
      int64_t offset = 0;
      bool inside = true;
      for (size_t d = 0; d < nd && inside; ++d) {
        int64_t c = p[d] * s.strides[d] - s.pads_begin[d] + k[d] * s.dilations[d];
        inside = c >= 0 && c < to[d];
        offset = offset * to[d] + c;
      }
      if (inside) t.taps.emplace_back(kf, offset);
      for (size_t d = nd; d-- > 0;) {  // next kernel index
        if (++k[d] < s.kernel[d]) break;
        k[d] = 0;
      }
    }
    for (size_t d = nd; d-- > 0;) {  // next position
      if (++p[d] < from[d]) break;
      p[d] = 0;
    }
  }
  t.start.push_back(static_cast<int64_t>(t.taps.size()));
  return t;
}

}  // namespace

template <class T>
void conv_reference(const ConvShape& s, const T* x, const T* w, const T* b, T* y) {
  using A = Accumulator<T>;
  int64_t in_size = ir::element_count(s.in), out_size = ir::element_count(s.out);
  int64_t kernel_size = ir::element_count(s.kernel);
  int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  Taps t = make_taps(s.out, s.in, s);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t m = 0; m < s.out_channels; ++m) {
      int64_t g = m / mg;
      const T* wm = w + m * cg * kernel_size;
      const T* xg = x + (n * s.in_channels + g * cg) * in_size;
      T* ym = y + (n * s.out_channels + m) * out_size;
      for (int64_t o = 0; o < out_size; ++o) {
        A acc = b ? static_cast<A>(b[m]) : A{};
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t i = t.start[o]; i < t.start[o + 1]; ++i)
            acc += static_cast<A>(xg[c * in_size + t.taps[i].second]) * static_cast<A>(wm[c * kernel_size + t.taps[i].first]);
        ym[o] = static_cast<T>(acc);
      }
    }
}

template <class T>
void conv_transpose_reference(const ConvShape& s, const T* x, const T* w, const T* b, T* y) {
  int64_t in_size = ir::element_count(s.in), out_size = ir::element_count(s.out);
  int64_t kernel_size = ir::element_count(s.kernel);
  int64_t cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  Taps t = make_taps(s.in, s.out, s);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t m = 0; m < s.out_channels; ++m) {
      T* ym = y + (n * s.out_channels + m) * out_size;
      std::fill(ym, ym + out_size, b ? b[m] : T{});
    }
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.in_channels; ++c) {
      int64_t g = c / cg;
      const T* xc = x + (n * s.in_channels + c) * in_size;
      for (int64_t m = 0; m < mg; ++m) {
        const T* wcm = w + (c * mg + m) * kernel_size;
        T* ym = y + (n * s.out_channels + g * mg + m) * out_size;
        for (int64_t i = 0; i < in_size; ++i)
          for (int64_t j = t.start[i]; j < t.start[i + 1]; ++j) ym[t.taps[j].second] += xc[i] * wcm[t.taps[j].first];
      }
    }
}

template void conv_reference<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void conv_reference<double>(const ConvShape&, const double*, const double*, const double*, double*);
template void conv_transpose_reference<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void conv_transpose_reference<double>(const ConvShape&, const double*, const double*, const double*, double*);

}  // namespace onnxptq::engine::linear
