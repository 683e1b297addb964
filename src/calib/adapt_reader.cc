// adapt_reader: samples widened from float16 and transposed NCHW -> NHWC for a converted model.
#include "calib/adapt_reader.h"

#include <cstring>

#include "ir/float16.h"

namespace onnxptq::calib {
namespace {

// [N, C, H, W] data as [N, H, W, C], for any element width.
ir::Tensor nchw_to_nhwc(const ir::Tensor& t) {
  const std::vector<int64_t>& d = t.dims();
  ir::Tensor out = ir::Tensor::uninitialized(t.dtype(), {d[0], d[2], d[3], d[1]});
  size_t width = static_cast<size_t>(ir::data_type_bits(t.dtype()) / 8);
  const std::byte* src = t.bytes().data();
  std::byte* dst = out.mutable_bytes();
  int64_t hw = d[2] * d[3];
  for (int64_t n = 0; n < d[0]; ++n)
    for (int64_t c = 0; c < d[1]; ++c)
      for (int64_t i = 0; i < hw; ++i)
        std::memcpy(dst + static_cast<size_t>((n * hw + i) * d[1] + c) * width,
                    src + static_cast<size_t>((n * d[1] + c) * hw + i) * width, width);
  return out;
}

// True when `dims` is the NCHW form of the NHWC `type` (fixed H, W, C; N as the model allows).
bool is_nchw_of(const std::vector<int64_t>& dims, const ir::ValueType& type) {
  if (!type.is_tensor() || !type.has_shape || type.shape.size() != 4 || dims.size() != 4) return false;
  const std::vector<ir::Dim>& s = type.shape;
  for (size_t i = 1; i < 4; ++i)
    if (!s[i].has_value) return false;
  if (s[0].has_value && s[0].value != dims[0]) return false;
  bool nchw = dims[1] == s[3].value && dims[2] == s[1].value && dims[3] == s[2].value;
  bool nhwc = dims[1] == s[1].value && dims[2] == s[2].value && dims[3] == s[3].value;
  return nchw && !nhwc;
}

class AdaptedReader : public DataReader {
 public:
  AdaptedReader(DataReader& base, const std::vector<const ir::Value*>& inputs, const FeedAdaptation& adaptation)
      : base_(base), adaptation_(adaptation) {
    for (const ir::Value* v : inputs) types_[v->name()] = v->type;
  }

  std::optional<Feed> next() override {
    std::optional<Feed> feed = base_.next();
    if (!feed) return feed;
    for (auto& [name, t] : *feed) {
      auto it = types_.find(name);
      if (it == types_.end() || !it->second.is_tensor()) continue;
      const ir::ValueType& type = it->second;
      if (adaptation_.widen_float16 && t.dtype() == ir::DataType::Float16 && type.elem_type == ir::DataType::Float) {
        ir::Tensor wide = ir::Tensor::uninitialized(ir::DataType::Float, t.dims());
        ir::half_to_float(t.values<uint16_t>().data(), wide.mutable_values<float>().data(),
                          static_cast<size_t>(t.size()));
        t = std::move(wide);
      }
      if (adaptation_.nchw_to_nhwc && ir::data_type_bits(t.dtype()) >= 8 && is_nchw_of(t.dims(), type))
        t = nchw_to_nhwc(t);
    }
    return feed;
  }
  std::optional<size_t> size() const override { return base_.size(); }
  bool can_rewind() const override { return base_.can_rewind(); }
  void rewind() override { base_.rewind(); }
  std::string describe() const override { return base_.describe(); }

 private:
  DataReader& base_;
  FeedAdaptation adaptation_;
  std::map<std::string, ir::ValueType> types_;
};

}  // namespace

std::unique_ptr<DataReader> adapt_reader(DataReader& base, const std::vector<const ir::Value*>& inputs,
                                         const FeedAdaptation& adaptation) {
  return std::make_unique<AdaptedReader>(base, inputs, adaptation);
}

}  // namespace onnxptq::calib
