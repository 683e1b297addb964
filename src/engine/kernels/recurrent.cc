// LSTM, GRU and RNN (ONNX operator specification, opsets 7 and 14: layout 1 puts the batch axis
// first). The input projection X W^T of every time step is one matrix product per direction
// (oneDNN), the biases added once; each step is then the recurrent product H R^T of the whole
// batch (a oneDNN primitive made with R packed once per direction) and the gate arithmetic, a row
// of gates at a time. Computed in float32 (float16 and double through it, as MatMul does).
#include <algorithm>
#include <optional>

#include "engine/kernels/linear.h"
#include "engine/kernels/recurrent.h"

namespace onnxptq::engine::recurrent {
namespace {

enum class Cell { Rnn, Gru, Lstm };

int64_t gate_count(Cell cell) { return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4; }

std::string dims_of(const Tensor& t) { return ir::dims_to_string(t.dims()); }

// One direction's weights, in float32, laid out for the products and the gates.
struct DirectionWeights {
  std::vector<float> w_t;    // W transposed: [input_size, G*H]
  std::vector<float> r_t;    // R transposed: [H, G*H]; GRU without linear_before_reset: z and r only, [H, 2H]
  std::vector<float> r_h_t;  // GRU without linear_before_reset: Rh transposed, [H, H]
  std::vector<float> bias;   // Wb + Rb, [G*H]; GRU with linear_before_reset: Wb alone for gate h
  std::vector<float> r_bias_h;   // GRU with linear_before_reset: Rbh [H], added before the reset gate's product
  std::vector<float> peepholes;  // LSTM: Pi, Po, Pf [3H], or empty
};

struct Weights {
  int64_t input_size = 0, hidden = 0;
  std::vector<DirectionWeights> directions;
};

// The product of a step, [batch, k] x [k, n] with a constant right-hand side: the primitive made
// and the right-hand side packed in its layout once for all steps (a plain one would be packed by
// oneDNN again at every call, at the cost of the product itself for small batches).
struct StepProduct {
  int64_t m = 0, k = 0, n = 0;
  const float* b = nullptr;  // dense [k, n], for the loop when oneDNN declines
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  std::shared_ptr<const dnnl::memory> packed;
  bool reference = false;
};

StepProduct make_step_product(int64_t m, int64_t k, int64_t n, const float* b, int threads) {
  StepProduct p;
  p.m = m, p.k = k, p.n = n, p.b = b;
  linear::dnnl_use_threads(threads);
  try {
    const dnnl::engine& eng = linear::dnnl_cpu_engine();
    p.pd = dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(linear::f32_desc({m, k}), linear::f32_any({k, n}), linear::f32_desc({m, n})),
        linear::dnnl_attr(), eng);
    p.prim = dnnl::matmul(p.pd);
    auto packed = std::make_shared<dnnl::memory>(p.pd.weights_desc(), eng);
    dnnl::memory user(linear::f32_desc({k, n}), eng, const_cast<float*>(b));
    dnnl::stream stream(eng);
    dnnl::reorder::primitive_desc pack_pd = linear::dnnl_reorder_pd(user.get_desc(), p.pd.weights_desc());
    linear::dnnl_reorder(stream, dnnl::reorder(pack_pd), pack_pd, user, *packed);
    stream.wait();
    p.packed = std::move(packed);
  } catch (const dnnl::error&) {
    p.reference = true;
  }
  return p;
}

// c = a [m, k] x the product's right-hand side.
void run_step_product(const StepProduct& p, int threads, const float* a, float* c) {
  if (p.reference) return linear::matmul_reference(a, p.k, 1, p.b, p.n, 1, c, p.m, p.n, p.k);
  linear::dnnl_use_threads(threads);
  const dnnl::engine& eng = linear::dnnl_cpu_engine();
  dnnl::stream stream(eng);
  linear::dnnl_execute(stream, p.prim, p.pd,
                       {{DNNL_ARG_SRC, dnnl::memory(p.pd.src_desc(), eng, const_cast<float*>(a))},
                        {DNNL_ARG_WEIGHTS, *p.packed},
                        {DNNL_ARG_DST, dnnl::memory(p.pd.dst_desc(), eng, c)}});
  stream.wait();
}

// Each direction's step products: H R^T, and for GRU without linear_before_reset (r . H) Rh^T.
using StepProducts = std::vector<std::vector<StepProduct>>;

class RecurrentKernel : public Kernel {
 public:
  RecurrentKernel(const KernelInfo& info, Cell cell) : cell_(cell) {
    const ir::Node& node = info.node;
    std::string direction = node.attr_string("direction", "forward");
    if (direction == "forward") directions_ = 1;
    else if (direction == "reverse") directions_ = 1, reverse_only_ = true;
    else if (direction == "bidirectional") directions_ = 2;
    else throw Error("direction \"" + direction + "\" must be forward, reverse or bidirectional");
    layout_ = node.attr_int("layout", 0);
    if (layout_ != 0 && layout_ != 1) throw Error("layout " + std::to_string(layout_) + " must be 0 or 1");
    if (const ir::Attribute* c = node.find_attribute("clip")) {
      if (!(c->f > 0)) throw Error("clip " + std::to_string(c->f) + " must be positive");
      clip_ = c->f;
    }
    hidden_size_ = node.attr_int("hidden_size", -1);
    if (cell == Cell::Lstm) {
      input_forget_ = node.attr_int("input_forget", 0) != 0;
      activations_ = read_activations(node, {"Sigmoid", "Tanh", "Tanh"}, directions_);
    } else if (cell == Cell::Gru) {
      linear_before_reset_ = node.attr_int("linear_before_reset", 0) != 0;
      activations_ = read_activations(node, {"Sigmoid", "Tanh"}, directions_);
    } else {
      activations_ = read_activations(node, {"Tanh"}, directions_);
    }
    // Weights prepared once when W, R and the optional B and P are constants.
    auto known = [&](size_t i) { return !info.has_input(i) || info.constant(i) != nullptr; };
    if (info.constant(1) && info.constant(2) && known(3) && (cell != Cell::Lstm || known(7)))
      weights_ = prepare(info.constant(1), info.constant(2), info.constant(3), cell == Cell::Lstm ? info.constant(7) : nullptr);
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    auto input = [&](size_t i) -> const Tensor* { return i < in.size() ? in[i] : nullptr; };
    const Tensor& x_in = *in[0];
    const DataType type = x_in.dtype();
    for (size_t i : {1, 2, 3, 5, 6, 7})
      if (const Tensor* t = input(i); t && t->dtype() != type)
        throw Error("input " + std::to_string(i) + " is " + std::string(ir::data_type_name(t->dtype())) + ", X is " +
                    std::string(ir::data_type_name(type)));
    if (type != DataType::Float && type != DataType::Float16 && type != DataType::Double)
      throw Error("X of type " + std::string(ir::data_type_name(type)) + " is not a float type");
    std::optional<Weights> made;
    if (!weights_) made = prepare(input(1), input(2), input(3), cell_ == Cell::Lstm ? input(7) : nullptr);
    const Weights& w = weights_ ? *weights_ : *made;
    if (x_in.rank() != 3) throw Error("X must have rank 3, got shape " + dims_of(x_in));
    const int64_t seq = x_in.dims()[layout_ ? 1 : 0], batch = x_in.dims()[layout_ ? 0 : 1], H = w.hidden;
    if (x_in.dims()[2] != w.input_size)
      throw Error("X " + dims_of(x_in) + " has input size " + std::to_string(x_in.dims()[2]) + ", W has " +
                  std::to_string(w.input_size));
    Tensor x = as_float32(x_in);

    std::vector<int64_t> lengths(static_cast<size_t>(batch), seq);
    if (const Tensor* s = input(4)) {
      lengths = read_int64s(*s, "sequence_lens");
      if (static_cast<int64_t>(lengths.size()) != batch)
        throw Error("sequence_lens has " + std::to_string(lengths.size()) + " values for a batch of " + std::to_string(batch));
      for (int64_t l : lengths)
        if (l < 0 || l > seq)
          throw Error("sequence_lens value " + std::to_string(l) + " is outside [0, " + std::to_string(seq) + "]");
    }
    const std::vector<int64_t> state_dims =
        layout_ ? std::vector<int64_t>{batch, directions_, H} : std::vector<int64_t>{directions_, batch, H};
    std::optional<Tensor> initial_h, initial_c;
    for (size_t i : {5, 6}) {
      const Tensor* t = input(i);
      if (!t || (i == 6 && cell_ != Cell::Lstm)) continue;
      if (t->dims() != state_dims)
        throw Error(std::string(i == 5 ? "initial_h" : "initial_c") + " has shape " + dims_of(*t) + ", expected " +
                    ir::dims_to_string(state_dims));
      (i == 5 ? initial_h : initial_c) = as_float32(*t);
    }

    // The step products for this batch size: kept from run to run when the weights are the kernel's.
    const int threads = linear::matmul_threads(ctx.threads, batch * gate_count(cell_) * H);
    auto make_products = [&](const StepProducts*) {
      auto products = std::make_shared<StepProducts>();
      for (const DirectionWeights& dw : w.directions) {
        std::vector<StepProduct>& p = products->emplace_back();
        if (batch == 0 || H == 0) continue;
        p.push_back(make_step_product(batch, H, static_cast<int64_t>(dw.r_t.size()) / H, dw.r_t.data(), threads));
        if (!dw.r_h_t.empty()) p.push_back(make_step_product(batch, H, H, dw.r_h_t.data(), threads));
      }
      return std::shared_ptr<const StepProducts>(std::move(products));
    };
    std::shared_ptr<const StepProducts> products =
        weights_ ? products_.get({batch, threads}, make_products) : make_products(nullptr);

    Geometry g{seq, batch, H, directions_, layout_};
    Tensor y(DataType::Float, layout_ ? std::vector<int64_t>{batch, seq, directions_, H}
                                       : std::vector<int64_t>{seq, directions_, batch, H});
    Tensor y_h(DataType::Float, state_dims), y_c(DataType::Float, state_dims);
    for (int64_t d = 0; d < directions_; ++d) {
      State state{y.mutable_values<float>().data(), y_h.mutable_values<float>().data(),
                  y_c.mutable_values<float>().data(), initial_h ? initial_h->values<float>().data() : nullptr,
                  initial_c ? initial_c->values<float>().data() : nullptr};
      run_direction(ctx, g, d, reverse_only_ || d == 1, w.directions[static_cast<size_t>(d)],
                    (*products)[static_cast<size_t>(d)], threads, x.values<float>().data(), lengths, state);
    }
    if (out.size() > 0) out[0] = float32_as(y, type);
    if (out.size() > 1) out[1] = float32_as(y_h, type);
    if (out.size() > 2 && cell_ == Cell::Lstm) out[2] = float32_as(y_c, type);
  }

 private:
  struct Geometry {
    int64_t seq, batch, hidden, directions, layout;
    int64_t x_row(int64_t t, int64_t b) const { return layout ? b * seq + t : t * batch + b; }
    int64_t y_offset(int64_t t, int64_t d, int64_t b) const {
      return (layout ? (b * seq + t) * directions + d : (t * directions + d) * batch + b) * hidden;
    }
    int64_t state_offset(int64_t d, int64_t b) const { return (layout ? b * directions + d : d * batch + b) * hidden; }
  };
  struct State {
    float* y;
    float* y_h;
    float* y_c;
    const float* initial_h;  // null: zeros
    const float* initial_c;
  };

  Weights prepare(const Tensor* w_in, const Tensor* r_in, const Tensor* b_in, const Tensor* p_in) const {
    const int64_t G = gate_count(cell_);
    if (w_in->rank() != 3 || r_in->rank() != 3)
      throw Error("W and R must have rank 3, got shapes " + dims_of(*w_in) + " and " + dims_of(*r_in));
    Weights out;
    out.hidden = r_in->dims()[2];
    out.input_size = w_in->dims()[2];
    const int64_t H = out.hidden, I = out.input_size, GH = G * H;
    if (hidden_size_ >= 0 && hidden_size_ != H)
      throw Error("R " + dims_of(*r_in) + " has hidden size " + std::to_string(H) + ", hidden_size is " +
                  std::to_string(hidden_size_));
    auto expect = [&](const Tensor* t, const char* name, std::vector<int64_t> dims) {
      if (t && t->dims() != dims)
        throw Error(std::string(name) + " has shape " + dims_of(*t) + ", expected " + ir::dims_to_string(dims));
    };
    expect(w_in, "W", {directions_, GH, I});
    expect(r_in, "R", {directions_, GH, H});
    expect(b_in, "B", {directions_, 2 * GH});
    expect(p_in, "P", {directions_, 3 * H});
    Tensor w = as_float32(*w_in), r = as_float32(*r_in);
    std::optional<Tensor> b, p;
    if (b_in) b = as_float32(*b_in);
    if (p_in) p = as_float32(*p_in);
    const bool split_h = cell_ == Cell::Gru && !linear_before_reset_;
    const int64_t r_cols = split_h ? 2 * H : GH;
    for (int64_t d = 0; d < directions_; ++d) {
      DirectionWeights dw;
      const float* wd = w.values<float>().data() + d * GH * I;
      const float* rd = r.values<float>().data() + d * GH * H;
      dw.w_t.resize(static_cast<size_t>(I * GH));
      for (int64_t j = 0; j < GH; ++j)
        for (int64_t k = 0; k < I; ++k) dw.w_t[k * GH + j] = wd[j * I + k];
      dw.r_t.resize(static_cast<size_t>(H * r_cols));
      for (int64_t j = 0; j < r_cols; ++j)
        for (int64_t k = 0; k < H; ++k) dw.r_t[k * r_cols + j] = rd[j * H + k];
      if (split_h) {
        dw.r_h_t.resize(static_cast<size_t>(H * H));
        for (int64_t j = 0; j < H; ++j)
          for (int64_t k = 0; k < H; ++k) dw.r_h_t[k * H + j] = rd[(2 * H + j) * H + k];
      }
      dw.bias.assign(static_cast<size_t>(GH), 0.0f);
      if (cell_ == Cell::Gru && linear_before_reset_) dw.r_bias_h.assign(static_cast<size_t>(H), 0.0f);
      if (b) {
        const float* wb = b->values<float>().data() + d * 2 * GH;
        const float* rb = wb + GH;
        for (int64_t j = 0; j < GH; ++j) {
          bool apart = cell_ == Cell::Gru && linear_before_reset_ && j >= 2 * H;
          dw.bias[j] = apart ? wb[j] : wb[j] + rb[j];
          if (apart) dw.r_bias_h[j - 2 * H] = rb[j];
        }
      }
      if (p) {
        const float* pd = p->values<float>().data() + d * 3 * H;
        dw.peepholes.assign(pd, pd + 3 * H);
      }
      out.directions.push_back(std::move(dw));
    }
    return out;
  }

  // c = a [m, k] x b [k, n], dense row-major.
  static void product(const RunContext& ctx, const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    linear::matmul_f32(linear::matmul_threads(ctx.threads, m * n), a, b, c, 1, m, k, n);
  }

  void run_direction(const RunContext& ctx, const Geometry& g, int64_t d, bool reverse, const DirectionWeights& w,
                     const std::vector<StepProduct>& step, int threads, const float* x,
                     const std::vector<int64_t>& lengths, const State& state) const {
    const int64_t G = gate_count(cell_), H = g.hidden, GH = G * H, batch = g.batch;
    const int64_t rows = g.seq * batch, input_size = static_cast<int64_t>(w.w_t.size()) / std::max<int64_t>(GH, 1);
    if (batch == 0 || H == 0) return;
    // X W^T + biases for every step at once.
    std::vector<float> xw(static_cast<size_t>(rows * GH));
    product(ctx, x, w.w_t.data(), xw.data(), rows, input_size, GH);
    for (int64_t i = 0; i < rows; ++i) {
      float* row = xw.data() + i * GH;
#pragma omp simd
      for (int64_t j = 0; j < GH; ++j) row[j] += w.bias[j];
    }

    std::vector<float> h(static_cast<size_t>(batch * H), 0.0f), c(static_cast<size_t>(batch * H), 0.0f);
    for (int64_t b = 0; b < batch; ++b) {
      if (state.initial_h) std::copy_n(state.initial_h + g.state_offset(d, b), H, h.begin() + b * H);
      if (state.initial_c) std::copy_n(state.initial_c + g.state_offset(d, b), H, c.begin() + b * H);
    }
    const Activation* f = &activations_[static_cast<size_t>(d * (cell_ == Cell::Lstm ? 3 : cell_ == Cell::Gru ? 2 : 1))];
    const bool split_h = cell_ == Cell::Gru && !linear_before_reset_;
    const int64_t r_cols = split_h ? 2 * H : GH;
    std::vector<float> gates(static_cast<size_t>(batch * r_cols));
    std::vector<float> reset_h, gates_h;  // GRU without linear_before_reset: r . H and its product with Rh^T
    if (split_h) reset_h.assign(static_cast<size_t>(batch * H), 0.0f), gates_h.resize(static_cast<size_t>(batch * H));
    const int64_t steps = *std::max_element(lengths.begin(), lengths.end());
    auto time_of = [&](int64_t s, int64_t b) { return reverse ? lengths[b] - 1 - s : s; };

    for (int64_t s = 0; s < steps; ++s) {
      run_step_product(step[0], threads, h.data(), gates.data());
      for (int64_t b = 0; b < batch; ++b) {
        if (s >= lengths[b]) continue;
        const int64_t t = time_of(s, b);
        float* gb = gates.data() + b * r_cols;
        const float* xb = xw.data() + g.x_row(t, b) * GH;
        float* hb = h.data() + b * H;
        float* yb = state.y + g.y_offset(t, d, b);
        if (cell_ == Cell::Rnn) {
          #pragma omp simd
          for (int64_t j = 0; j < H; ++j) gb[j] += xb[j];
          if (clip_) clip(*clip_, gb, H);
          activate(f[0], gb, H);
          std::copy_n(gb, H, hb);
          std::copy_n(gb, H, yb);
        } else if (cell_ == Cell::Lstm) {
          lstm_step(f, w, xb, gb, hb, c.data() + b * H, H);
          std::copy_n(hb, H, yb);
        } else {
          // z and r; with linear_before_reset h's whole pre-activation too.
          #pragma omp simd
          for (int64_t j = 0; j < 2 * H; ++j) gb[j] += xb[j];
          if (clip_) clip(*clip_, gb, 2 * H);
          activate(f[0], gb, 2 * H);
          const float* r = gb + H;
          if (split_h) {
            #pragma omp simd
            for (int64_t j = 0; j < H; ++j) reset_h[b * H + j] = r[j] * hb[j];
          } else {
            float* hh = gb + 2 * H;
            #pragma omp simd
            for (int64_t j = 0; j < H; ++j) hh[j] = xb[2 * H + j] + r[j] * (hh[j] + w.r_bias_h[j]);
            gru_finish(f[1], gb, hh, hb, yb, H);
          }
        }
      }
      if (!split_h) continue;
      run_step_product(step[1], threads, reset_h.data(), gates_h.data());
      for (int64_t b = 0; b < batch; ++b) {
        if (s >= lengths[b]) continue;
        const int64_t t = time_of(s, b);
        const float* xb = xw.data() + g.x_row(t, b) * GH;
        float* hh = gates_h.data() + b * H;
        #pragma omp simd
        for (int64_t j = 0; j < H; ++j) hh[j] += xb[2 * H + j];
        gru_finish(f[1], gates.data() + b * r_cols, hh, h.data() + b * H, state.y + g.y_offset(t, d, b), H);
      }
    }
    // The last state of each sequence; zeros for a sequence of length 0, as its outputs are.
    for (int64_t b = 0; b < batch; ++b) {
      if (lengths[b] == 0) continue;
      std::copy_n(h.data() + b * H, H, state.y_h + g.state_offset(d, b));
      if (cell_ == Cell::Lstm) std::copy_n(c.data() + b * H, H, state.y_c + g.state_offset(d, b));
    }
  }

  // GRU after the candidate's pre-activation `hh`: H_t = (1 - z) . g(hh) + z . H_{t-1}, written
  // to the state and to Y.
  void gru_finish(const Activation& g_act, const float* zr, float* hh, float* h, float* y, int64_t H) const {
    if (clip_) clip(*clip_, hh, H);
    activate(g_act, hh, H);
    #pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      h[j] = (1.0f - zr[j]) * hh[j] + zr[j] * h[j];
      y[j] = h[j];
    }
  }

  // One LSTM step of one batch entry: `gates` holds H R^T in the spec's order i, o, f, c.
  void lstm_step(const Activation* f, const DirectionWeights& w, const float* xw, float* gates, float* h, float* c,
                 int64_t H) const {
    #pragma omp simd
    for (int64_t j = 0; j < 4 * H; ++j) gates[j] += xw[j];
    float *i = gates, *o = gates + H, *fg = gates + 2 * H, *cand = gates + 3 * H;
    const bool peep = !w.peepholes.empty();
    const float *pi = peep ? w.peepholes.data() : nullptr, *po = pi ? pi + H : nullptr, *pf = pi ? pi + 2 * H : nullptr;
    if (peep)
      #pragma omp simd
      for (int64_t j = 0; j < H; ++j) i[j] += pi[j] * c[j];
    if (clip_) clip(*clip_, i, H);
    activate(f[0], i, H);
    if (input_forget_) {
      #pragma omp simd
      for (int64_t j = 0; j < H; ++j) fg[j] = 1.0f - i[j];
    } else {
      if (peep)
        #pragma omp simd
        for (int64_t j = 0; j < H; ++j) fg[j] += pf[j] * c[j];
      if (clip_) clip(*clip_, fg, H);
      activate(f[0], fg, H);
    }
    if (clip_) clip(*clip_, cand, H);
    activate(f[1], cand, H);
    #pragma omp simd
    for (int64_t j = 0; j < H; ++j) c[j] = fg[j] * c[j] + i[j] * cand[j];
    if (peep)
      #pragma omp simd
      for (int64_t j = 0; j < H; ++j) o[j] += po[j] * c[j];
    if (clip_) clip(*clip_, o, H);
    activate(f[0], o, H);
    std::copy_n(c, H, cand);
    activate(f[2], cand, H);
    #pragma omp simd
    for (int64_t j = 0; j < H; ++j) h[j] = o[j] * cand[j];
  }

  Cell cell_;
  int64_t directions_ = 1;
  bool reverse_only_ = false;
  int64_t layout_ = 0;
  std::optional<float> clip_;
  int64_t hidden_size_ = -1;
  bool input_forget_ = false;
  bool linear_before_reset_ = false;
  std::vector<Activation> activations_;  // per direction: LSTM f, g, h; GRU f, g; RNN f
  std::optional<Weights> weights_;      // prepared when built, from constant W, R, B and P
  linear::PlanCache<StepProducts> products_;  // for weights_, the last batch size and thread count
};

template <Cell C>
KernelFactory recurrent_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> { return std::make_unique<RecurrentKernel>(info, C); };
}

}  // namespace
}  // namespace onnxptq::engine::recurrent

namespace onnxptq::engine {

void register_recurrent_kernels(KernelRegistry& r) {
  // Opset 7 dropped output_sequence (Y is simply optional); 14 added layout; 22 adds bfloat16,
  // which the type check refuses by name.
  r.add("", "LSTM", 7, kLatestOpset, recurrent::recurrent_factory<recurrent::Cell::Lstm>());
  r.add("", "GRU", 7, kLatestOpset, recurrent::recurrent_factory<recurrent::Cell::Gru>());
  r.add("", "RNN", 7, kLatestOpset, recurrent::recurrent_factory<recurrent::Cell::Rnn>());
  recurrent::register_extended_lstm_kernel(r);
}

}  // namespace onnxptq::engine
