// NonMaxSuppression (opsets 10 and 11) and RoiAlign (10 and 16): the detection family.
//
// NonMaxSuppression is the greedy selection of the ONNX operator docs: per batch and class, the
// boxes above score_threshold in order of falling score (ties: lower index first), each kept
// unless its IoU with a box kept before exceeds iou_threshold, at most max_output_boxes_per_class
// of them. Batch and class pairs run on threads of their own and are listed in order.
//
// RoiAlign is the bilinear pooling of Mask R-CNN (K. He et al., "Mask R-CNN", 2017,
// arXiv:1703.06870) as the ONNX operator docs define it: each output bin averages (or takes the
// max of) sampling_ratio^2 bilinear samples, the taps and weights of a roi computed once and
// shared by its channels.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/kernel.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

std::string dims_of(const Tensor& t) { return ir::dims_to_string(t.dims()); }

bool is_float_type(DataType t) {
  return t == DataType::Float || t == DataType::Double || t == DataType::Float16 || t == DataType::BFloat16;
}

// ---- NonMaxSuppression

// A box as its extent on each axis (x_min may exceed x_max for a center box of negative width;
// such a box overlaps nothing) and its area.
struct NmsBox {
  float y_min, x_min, y_max, x_max, area;
};

NmsBox nms_box(const float* b, bool center_point_box) {
  NmsBox box{};
  if (center_point_box) {  // [x_center, y_center, width, height]
    box.x_min = b[0] - b[2] / 2;
    box.x_max = b[0] + b[2] / 2;
    box.y_min = b[1] - b[3] / 2;
    box.y_max = b[1] + b[3] / 2;
  } else {  // [y1, x1, y2, x2], any two opposite corners
    box.y_min = std::min(b[0], b[2]);
    box.y_max = std::max(b[0], b[2]);
    box.x_min = std::min(b[1], b[3]);
    box.x_max = std::max(b[1], b[3]);
  }
  box.area = (box.x_max - box.x_min) * (box.y_max - box.y_min);
  return box;
}

// Whether IoU(a, b) > threshold; boxes without area or overlap never suppress each other.
bool nms_suppresses(const NmsBox& a, const NmsBox& b, float threshold) {
  const float x_lo = std::max(a.x_min, b.x_min), x_hi = std::min(a.x_max, b.x_max);
  if (!(x_hi > x_lo)) return false;
  const float y_lo = std::max(a.y_min, b.y_min), y_hi = std::min(a.y_max, b.y_max);
  if (!(y_hi > y_lo)) return false;
  const float intersection = (x_hi - x_lo) * (y_hi - y_lo);
  const float union_area = a.area + b.area - intersection;
  if (!(intersection > 0) || !(a.area > 0) || !(b.area > 0) || !(union_area > 0)) return false;
  return intersection / union_area > threshold;
}

class NonMaxSuppressionKernel : public Kernel {
 public:
  explicit NonMaxSuppressionKernel(const KernelInfo& info) : center_(info.node.attr_int("center_point_box", 0)) {
    if (center_ != 0 && center_ != 1) throw Error("center_point_box must be 0 or 1, got " + std::to_string(center_));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    auto given = [&](size_t i) { return i < in.size() && in[i] && in[i]->size() > 0 ? in[i] : nullptr; };
    const Tensor& boxes_in = *in[0];
    const Tensor& scores_in = *in[1];
    if (!is_float_type(boxes_in.dtype()) || !is_float_type(scores_in.dtype()))
      throw Error("boxes and scores must be float tensors");
    if (boxes_in.rank() != 3 || boxes_in.dims()[2] != 4)
      throw Error("boxes " + dims_of(boxes_in) + " must be [num_batches, spatial_dimension, 4]");
    if (scores_in.rank() != 3)
      throw Error("scores " + dims_of(scores_in) + " must be [num_batches, num_classes, spatial_dimension]");
    const int64_t batches = boxes_in.dims()[0], count = boxes_in.dims()[1], classes = scores_in.dims()[1];
    if (scores_in.dims()[0] != batches || scores_in.dims()[2] != count)
      throw Error("scores " + dims_of(scores_in) + " do not match boxes " + dims_of(boxes_in));

    int64_t max_per_class = 0;
    if (const Tensor* t = given(2)) {
      std::vector<int64_t> v = read_int64s(*t, "max_output_boxes_per_class");
      if (v.size() != 1) throw Error("max_output_boxes_per_class must be a scalar, got shape " + dims_of(*t));
      max_per_class = std::max<int64_t>(v[0], 0);
    }
    float iou_threshold = 0;
    if (const Tensor* t = given(3)) {
      if (t->size() != 1) throw Error("iou_threshold must be a scalar, got shape " + dims_of(*t));
      iou_threshold = as_float32(*t).values<float>()[0];
      if (!(iou_threshold >= 0 && iou_threshold <= 1))
        throw Error("iou_threshold must be in [0, 1], got " + std::to_string(iou_threshold));
    }
    const Tensor* score_threshold_in = given(4);
    float score_threshold = 0;
    if (score_threshold_in) {
      if (score_threshold_in->size() != 1)
        throw Error("score_threshold must be a scalar, got shape " + dims_of(*score_threshold_in));
      score_threshold = as_float32(*score_threshold_in).values<float>()[0];
    }
    if (max_per_class == 0 || count == 0 || classes == 0 || batches == 0) {
      out[0] = Tensor(DataType::Int64, {0, 3});
      return;
    }

    Tensor boxes_f = as_float32(boxes_in), scores_f = as_float32(scores_in);
    const float* box_data = boxes_f.values<float>().data();
    const float* score_data = scores_f.values<float>().data();
    std::vector<NmsBox> corners(static_cast<size_t>(batches * count));
    for (size_t i = 0; i < corners.size(); ++i) corners[i] = nms_box(box_data + 4 * i, center_ == 1);

    // The box indices kept for each (batch, class), in order of selection.
    const int64_t pairs = batches * classes;
    std::vector<std::vector<int64_t>> kept(static_cast<size_t>(pairs));
    parallel_for(ctx.threads, pairs, std::max<int64_t>(1, 4096 / count), [&](int64_t first, int64_t last) {
      std::vector<int64_t> order;
      std::vector<const NmsBox*> selected;
      for (int64_t p = first; p < last; ++p) {
        const int64_t batch = p / classes;
        const float* scores = score_data + p * count;
        const NmsBox* batch_boxes = corners.data() + batch * count;
        order.clear();
        for (int64_t i = 0; i < count; ++i)
          if (!score_threshold_in || scores[i] > score_threshold) order.push_back(i);
        // Falling score, NaN last, ties by index: a strict weak order whatever the scores.
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          const float sa = scores[a], sb = scores[b];
          if (std::isnan(sa) || std::isnan(sb)) return !std::isnan(sa) && std::isnan(sb);
          return sa > sb;
        });
        selected.clear();
        std::vector<int64_t>& result = kept[p];
        for (int64_t i : order) {
          if (static_cast<int64_t>(result.size()) >= max_per_class) break;
          const NmsBox& candidate = batch_boxes[i];
          bool suppressed = false;
          for (const NmsBox* s : selected)
            if (nms_suppresses(candidate, *s, iou_threshold)) {
              suppressed = true;
              break;
            }
          if (suppressed) continue;
          selected.push_back(&candidate);
          result.push_back(i);
        }
      }
    });

    int64_t total = 0;
    for (const auto& k : kept) total += static_cast<int64_t>(k.size());
    Tensor y = Tensor::uninitialized(DataType::Int64, {total, 3});
    int64_t* dst = y.mutable_values<int64_t>().data();
    for (int64_t p = 0; p < pairs; ++p)
      for (int64_t i : kept[p]) {
        *dst++ = p / classes;
        *dst++ = p % classes;
        *dst++ = i;
      }
    out[0] = std::move(y);
  }

 private:
  int64_t center_;
};

// ---- RoiAlign

// The four taps of one bilinear sample within a plane, and their weights (all 0 for a sample
// outside the plane).
template <class T>
struct RoiTap {
  int64_t pos[4];
  T w[4];
};

// The largest number of samples one roi may take (output bins times the sampling grid), so an
// adaptive grid over an absurd roi fails instead of running for hours.
constexpr int64_t kMaxRoiSamples = int64_t{1} << 24;

class RoiAlignKernel : public Kernel {
 public:
  explicit RoiAlignKernel(const KernelInfo& info)
      : out_h_(info.node.attr_int("output_height", 1)),
        out_w_(info.node.attr_int("output_width", 1)),
        sampling_ratio_(info.node.attr_int("sampling_ratio", 0)),
        spatial_scale_(info.node.attr_float("spatial_scale", 1.0f)) {
    const std::string mode = info.node.attr_string("mode", "avg");
    if (mode != "avg" && mode != "max") throw Error("mode '" + mode + "' is not avg or max");
    max_ = mode == "max";
    // Opset 10 had no coordinate_transformation_mode; it behaved as output_half_pixel.
    const std::string coord =
        info.node.attr_string("coordinate_transformation_mode", info.opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (coord != "half_pixel" && coord != "output_half_pixel")
      throw Error("coordinate_transformation_mode '" + coord + "' is not half_pixel or output_half_pixel");
    half_pixel_ = coord == "half_pixel";
    if (out_h_ < 1 || out_w_ < 1)
      throw Error("output_height and output_width must be positive, got " + std::to_string(out_h_) + " and " +
                  std::to_string(out_w_));
    if (sampling_ratio_ < 0 || sampling_ratio_ > 4096)
      throw Error("sampling_ratio must be between 0 and 4096, got " + std::to_string(sampling_ratio_));
    if (!std::isfinite(spatial_scale_)) throw Error("spatial_scale must be finite");
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const Tensor& rois = *in[1];
    const Tensor& batch_indices = *in[2];
    if (!is_float_type(x.dtype())) throw Error("X must be a float tensor, got " + std::string(ir::data_type_name(x.dtype())));
    if (x.rank() != 4) throw Error("X " + dims_of(x) + " must be [N, C, H, W]");
    if (rois.rank() != 2 || rois.dims()[1] != 4) throw Error("rois " + dims_of(rois) + " must be [num_rois, 4]");
    if (!is_float_type(rois.dtype())) throw Error("rois must be a float tensor");
    std::vector<int64_t> batch = read_int64s(batch_indices, "batch_indices");
    const int64_t num_rois = rois.dims()[0];
    if (batch_indices.rank() != 1 || static_cast<int64_t>(batch.size()) != num_rois)
      throw Error("batch_indices " + dims_of(batch_indices) + " must hold one index for each of the " +
                  std::to_string(num_rois) + " rois");
    const int64_t n = x.dims()[0], channels = x.dims()[1];
    for (int64_t b : batch)
      if (b < 0 || b >= n) throw Error("batch index " + std::to_string(b) + " is out of range for X " + dims_of(x));
    std::vector<int64_t> out_dims = {num_rois, channels, out_h_, out_w_};
    ir::checked_element_count(out_dims, "RoiAlign output");

    std::vector<double> boxes;
    if (rois.dtype() == DataType::Double) boxes.assign(rois.values<double>().begin(), rois.values<double>().end());
    else {
      Tensor rois_f = as_float32(rois);
      boxes.assign(rois_f.values<float>().begin(), rois_f.values<float>().end());
    }
    for (double v : boxes)
      if (!std::isfinite(v)) throw Error("rois hold a value that is not finite");

    if (x.dtype() == DataType::Double) {
      Tensor y = Tensor::uninitialized(DataType::Double, out_dims);
      pool<double>(x.values<double>().data(), x.dims(), boxes, batch, y.mutable_values<double>().data(), ctx.threads);
      out[0] = std::move(y);
      return;
    }
    Tensor xf = as_float32(x);
    Tensor y = Tensor::uninitialized(DataType::Float, out_dims);
    pool<float>(xf.values<float>().data(), x.dims(), boxes, batch, y.mutable_values<float>().data(), ctx.threads);
    out[0] = float32_as(y, x.dtype());
  }

 private:
  struct RoiGeometry {
    double start_h, start_w, bin_h, bin_w;
    int64_t grid_h, grid_w;
  };

  RoiGeometry geometry(const double* box) const {
    const double offset = half_pixel_ ? 0.5 : 0.0;
    RoiGeometry g{};
    g.start_w = box[0] * spatial_scale_ - offset;
    g.start_h = box[1] * spatial_scale_ - offset;
    double roi_w = box[2] * spatial_scale_ - offset - g.start_w;
    double roi_h = box[3] * spatial_scale_ - offset - g.start_h;
    if (!half_pixel_) {  // the backward-compatible mode forces malformed rois to 1x1
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    g.bin_h = roi_h / static_cast<double>(out_h_);
    g.bin_w = roi_w / static_cast<double>(out_w_);
    // An adaptive grid samples at least once (an empty roi would otherwise divide by 0).
    g.grid_h = sampling_ratio_ > 0 ? sampling_ratio_ : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::min(g.bin_h, 1e9))));
    g.grid_w = sampling_ratio_ > 0 ? sampling_ratio_ : std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::min(g.bin_w, 1e9))));
    return g;
  }

  // The taps of every sample of a roi, bin by bin, row by row of its grid.
  template <class T>
  void taps_of(const RoiGeometry& g, int64_t height, int64_t width, std::vector<RoiTap<T>>& taps) const {
    taps.clear();
    for (int64_t ph = 0; ph < out_h_; ++ph)
      for (int64_t pw = 0; pw < out_w_; ++pw)
        for (int64_t iy = 0; iy < g.grid_h; ++iy) {
          const double yy = g.start_h + static_cast<double>(ph) * g.bin_h +
                            (static_cast<double>(iy) + 0.5) * g.bin_h / static_cast<double>(g.grid_h);
          for (int64_t ix = 0; ix < g.grid_w; ++ix) {
            const double xx = g.start_w + static_cast<double>(pw) * g.bin_w +
                              (static_cast<double>(ix) + 0.5) * g.bin_w / static_cast<double>(g.grid_w);
            RoiTap<T> tap{};
            if (!(yy >= -1.0 && yy <= static_cast<double>(height) && xx >= -1.0 && xx <= static_cast<double>(width))) {
              taps.push_back(tap);  // outside the plane: contributes 0
              continue;
            }
            double y = std::max(yy, 0.0), x = std::max(xx, 0.0);
            auto y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(x);
            int64_t y_hi = y_lo + 1, x_hi = x_lo + 1;
            if (y_lo >= height - 1) {
              y_lo = y_hi = height - 1;
              y = static_cast<double>(y_lo);
            }
            if (x_lo >= width - 1) {
              x_lo = x_hi = width - 1;
              x = static_cast<double>(x_lo);
            }
            const double ly = y - static_cast<double>(y_lo), lx = x - static_cast<double>(x_lo);
            const double hy = 1 - ly, hx = 1 - lx;
            tap.pos[0] = y_lo * width + x_lo;
            tap.pos[1] = y_lo * width + x_hi;
            tap.pos[2] = y_hi * width + x_lo;
            tap.pos[3] = y_hi * width + x_hi;
            tap.w[0] = static_cast<T>(hy * hx);
            tap.w[1] = static_cast<T>(hy * lx);
            tap.w[2] = static_cast<T>(ly * hx);
            tap.w[3] = static_cast<T>(ly * lx);
            taps.push_back(tap);
          }
        }
  }

  template <class T>
  void pool(const T* x, const std::vector<int64_t>& dims, const std::vector<double>& boxes,
            const std::vector<int64_t>& batch, T* y, int threads) const {
    const int64_t channels = dims[1], height = dims[2], width = dims[3];
    const int64_t num_rois = static_cast<int64_t>(batch.size());
    const int64_t bins = out_h_ * out_w_;
    std::vector<RoiGeometry> geometries(static_cast<size_t>(num_rois));
    for (int64_t r = 0; r < num_rois; ++r) {
      geometries[r] = geometry(boxes.data() + 4 * r);
      const RoiGeometry& g = geometries[r];
      if (static_cast<double>(g.grid_h) * static_cast<double>(g.grid_w) * static_cast<double>(bins) >
          static_cast<double>(kMaxRoiSamples))
        throw Error("roi " + std::to_string(r) + " needs a sampling grid of " + std::to_string(g.grid_h) + "x" +
                    std::to_string(g.grid_w) + " in each of " + std::to_string(bins) + " bins, over " +
                    std::to_string(kMaxRoiSamples) + " samples");
    }
    if (height == 0 || width == 0) {
      std::fill(y, y + num_rois * channels * bins, T{0});
      return;
    }
    // Work items: a roi and a block of its channels (rois alone leave threads idle when few).
    constexpr int64_t kBlock = 16;
    const int64_t blocks = std::max<int64_t>(1, (channels + kBlock - 1) / kBlock);
    parallel_for(threads, num_rois * blocks, 1, [&](int64_t first, int64_t last) {
      std::vector<RoiTap<T>> taps;
      int64_t tapped = -1;
      for (int64_t item = first; item < last; ++item) {
        const int64_t r = item / blocks;
        const RoiGeometry& g = geometries[r];
        if (tapped != r) {
          taps_of<T>(g, height, width, taps);
          tapped = r;
        }
        const int64_t samples = g.grid_h * g.grid_w;
        const auto count = static_cast<T>(samples);
        const int64_t c_end = std::min(channels, (item % blocks + 1) * kBlock);
        for (int64_t c = (item % blocks) * kBlock; c < c_end; ++c) {
          const T* plane = x + (batch[r] * channels + c) * height * width;
          T* dst = y + (r * channels + c) * bins;
          const RoiTap<T>* tap = taps.data();
          for (int64_t bin = 0; bin < bins; ++bin) {
            if (max_) {
              // The docs' max mode: the largest weighted tap of any sample.
              T best = -std::numeric_limits<T>::infinity();
              for (int64_t s = 0; s < samples; ++s, ++tap) {
                const T v = std::max(std::max(tap->w[0] * plane[tap->pos[0]], tap->w[1] * plane[tap->pos[1]]),
                                     std::max(tap->w[2] * plane[tap->pos[2]], tap->w[3] * plane[tap->pos[3]]));
                best = std::max(best, v);
              }
              dst[bin] = best;
            } else {
              T sum = 0;
              for (int64_t s = 0; s < samples; ++s, ++tap)
                sum += tap->w[0] * plane[tap->pos[0]] + tap->w[1] * plane[tap->pos[1]] +
                       tap->w[2] * plane[tap->pos[2]] + tap->w[3] * plane[tap->pos[3]];
              dst[bin] = sum / count;
            }
          }
        }
      }
    });
  }

  int64_t out_h_, out_w_, sampling_ratio_;
  float spatial_scale_;
  bool max_ = false;
  bool half_pixel_ = true;
};

}  // namespace

void register_detection_kernels(KernelRegistry& r) {
  r.add("", "NonMaxSuppression", 10, kLatestOpset, kernel_factory<NonMaxSuppressionKernel>());
  r.add("", "RoiAlign", 10, kLatestOpset, kernel_factory<RoiAlignKernel>());
}

}  // namespace onnxptq::engine
