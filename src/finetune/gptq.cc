#include "finetune/gptq.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <memory>
#include <set>
#include <sstream>

#include "engine/kernel.h"
#include "engine/parallel.h"
#include "engine/session.h"
#include "finetune/fast_finetune.h"
#include "finetune/gptq_core.h"
#include "finetune/staged_run.h"
#include "onnxptq/error.h"
#include "qmath/quantize.h"
#include "quant/tensor_quant.h"

namespace onnxptq::finetune {
namespace {

std::string rounded(double v) {
  std::ostringstream out;
  out << std::setprecision(4) << v;
  return out.str();
}

// The plan's grid of weight `t` seen as [K, N] (`transposed`: stored [N, K], Gemm's transB), or
// why GPTQ cannot round on it.
std::optional<GptqGrid> grid_of(const quant::TensorPlan& t, const quant::QuantConfig& config, int64_t k, int64_t n,
                                bool transposed, std::string& why) {
  GptqGrid g;
  for (const qmath::ScaleZeroPoint& p : t.params) {
    g.scale.push_back(static_cast<float>(p.scale));
    g.zero_point.push_back(static_cast<float>(p.zero_point));
  }
  if (t.group_size) {  // MatMulNBits: codes 0 .. 2^bits - 1 rounded as MLAS rounds them
    g.layout = GptqGrid::Layout::ColumnGroups;
    g.group_size = *t.group_size;
    g.qmin = 0;
    g.qmax = t.type == ir::DataType::UInt4 ? 15.0f : 255.0f;
    g.mlas_rounding = true;
    return g;
  }
  const qmath::QRange range = quant::weight_saturation(t, config);
  g.qmin = static_cast<float>(range.min);
  g.qmax = static_cast<float>(range.max);
  if (t.params.size() == 1 && !t.axis) return g;
  int64_t axis = t.axis ? (*t.axis < 0 ? *t.axis + 2 : *t.axis) : -1;
  if (transposed && axis >= 0) axis = 1 - axis;
  if (axis == 1 && static_cast<int64_t>(t.params.size()) == n) {
    g.layout = GptqGrid::Layout::PerColumn;
    return g;
  }
  if (axis == 0 && static_cast<int64_t>(t.params.size()) == k) {
    g.layout = GptqGrid::Layout::PerRow;
    return g;
  }
  if (t.params.size() == 1) return g;
  why = "its weight has " + std::to_string(t.params.size()) + " scales along axis " + std::to_string(axis);
  return std::nullopt;
}

// GPTQ's codes as the plan's weight data: unpacked uint8 codes for MatMulNBits, else the type's.
ir::Tensor weight_data(const quant::TensorPlan& t, const std::vector<int64_t>& dims, const std::vector<float>& codes) {
  if (t.group_size) {
    std::vector<uint8_t> bytes(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) bytes[i] = static_cast<uint8_t>(codes[i]);
    return ir::Tensor::from_values<uint8_t>(dims, bytes);
  }
  ir::Tensor q(t.type, dims);
  if (qmath::is_4bit_type(t.type)) {  // packed two a byte, as ONNX stores int4 / uint4
    std::vector<int8_t> held(codes.size());
    for (size_t i = 0; i < held.size(); ++i) held[i] = static_cast<int8_t>(codes[i]);
    qmath::pack_4bit(held.data(), q.size(), q.mutable_bytes());
  } else {
    qmath::visit_integer_quant_type(t.type, "the weight", [&](auto tag) {
      using T = decltype(tag);
      std::span<T> out = q.mutable_values<T>();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(codes[i]);
    });
  }
  return q;
}

// The transpose of `a` [rows, cols].
std::vector<float> transpose(const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::vector<float> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

}  // namespace

std::vector<quant::FinetunedLayer> gptq_plan(const ir::Model& model, quant::Plan& plan,
                                             const quant::QuantConfig& config, const SampleInputs& samples,
                                             const std::function<void(const std::string&)>& log) {
  const size_t count = sample_count(samples);
  if (count == 0) throw Error("GPTQ: no calibration sample for the Hessians");
  const ir::Graph& g = *model.graph;
  const int threads = config.calib.threads > 0 ? config.calib.threads : engine::hardware_threads();
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), count));
  const int session_threads = std::max(1, threads / workers);
  // MatMulNBits is weight-only: its MatMuls read the float model's values.
  std::unique_ptr<StagedRun> run;
  if (config.use_matmul_nbits) {
    run = std::make_unique<StagedRun>(
        model, samples,
        [session_threads](const ir::Model& part) -> StagedRun::PartRunner {
          engine::SessionOptions so;
          so.threads = session_threads;
          auto session = std::make_shared<engine::Session>(part, so);
          return [session](const Feed& feed) { return session->run(feed); };
        },
        workers);
  } else {
    run = std::make_unique<StagedRun>(quantized_staged_run(model, plan, config, samples, workers, session_threads));
  }

  std::vector<const ir::Node*> targets;
  for (const ir::Node* node : g.topological_order())
    if ((node->domain.empty() || node->domain == "ai.onnx") && (node->op_type == "MatMul" || node->op_type == "Gemm"))
      targets.push_back(node);
  const ProgressFunction& progress = config.calib.progress;
  if (progress) progress({"gptq", "layers", 0, targets.size()});
  GptqOptions options;
  options.block_size = config.gptq.block_size;
  options.perc_damp = config.gptq.perc_damp;
  options.act_order = config.gptq.act_order;
  options.threads = threads;
  std::vector<quant::FinetunedLayer> reports;
  std::set<std::string> rounded_weights;
  for (const ir::Node* node : targets) {
    quant::FinetunedLayer report;
    report.pass = "gptq";
    report.node = node->name;
    report.op_type = node->op_type;
    const std::string where = "GPTQ " + std::to_string(reports.size() + 1) + "/" + std::to_string(targets.size()) +
                              " " + node->name + " (" + node->op_type + ")";
    auto done = [&] {
      reports.push_back(std::move(report));
      if (progress) progress({"gptq", "layers", reports.size(), targets.size()});
    };
    auto skip = [&](const std::string& why) {
      report.skipped = why;
      if (log) log(where + ": skipped, " + why);
      done();
    };
    const ir::Value* x = node->input(0);
    const ir::Value* b = node->input(1);
    quant::TensorPlan* wp = b ? plan.find(b->name()) : nullptr;
    if (!x || !b || !b->has_initializer() || b->producer() || !wp || wp->role != quant::Role::Weight || !wp->data ||
        !(wp->group_size || quant::quant_type_is_integer(wp->type))) {
      skip("its B is not a weight quantized to integers");
      continue;
    }
    const ir::Tensor& initializer = b->initializer();
    if (initializer.rank() != 2) {
      skip("its weight is " + std::to_string(initializer.rank()) + "-D, GPTQ takes a 2-D B");
      continue;
    }
    // Gemm: Y = alpha A op(B) + C; A [M, K] (transA 0), op(B) [K, N]. alpha scales the error
    // alone, the bias not at all: GPTQ's choice is the same.
    const bool gemm = node->op_type == "Gemm";
    if (gemm && node->attr_int("transA", 0) != 0) {
      skip("transA 1 (its rows are not A's rows)");
      continue;
    }
    const bool transposed = gemm && node->attr_int("transB", 0) != 0;
    if (rounded_weights.count(b->name())) {
      skip("its weight was rounded with an earlier node");
      continue;
    }
    const int64_t k = initializer.dims()[transposed ? 1 : 0], n = initializer.dims()[transposed ? 0 : 1];
    std::string why;
    std::optional<GptqGrid> grid = grid_of(*wp, config, k, n, transposed, why);
    if (!grid) {
      skip(why);
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    GptqHessian hessian(k, threads);
    SharedStore inputs = run->values({x->name()})[0];
    for (size_t s = 0; s < count; ++s) {
      const ir::Tensor value = engine::as_float32(inputs->get(s));
      if (value.rank() < 1 || value.dims().back() != k)
        throw Error("GPTQ of node '" + node->name + "': its input '" + x->name() + "' is " +
                    ir::dims_to_string(value.dims()) + ", the weight takes " + std::to_string(k) + " values a row");
      hessian.add(value.values<float>().data(), static_cast<int64_t>(value.size()) / k);
    }
    inputs.reset();
    const ir::Tensor w = engine::as_float32(initializer);
    std::vector<float> weight(w.values<float>().begin(), w.values<float>().end());
    if (transposed) weight = transpose(weight, n, k);
    GptqResult r;
    try {
      r = gptq_quantize(hessian.matrix(), weight.data(), k, n, *grid, options);
    } catch (const Error& e) {
      throw Error("GPTQ of node '" + node->name + "': " + e.what(), e.kind());
    }
    if (transposed) r.codes = transpose(r.codes, k, n);
    report.loss_before = r.error_nearest;
    report.loss_after = r.error_gptq;
    report.kept = r.error_gptq < r.error_nearest;
    if (report.kept) wp->data = weight_data(*wp, initializer.dims(), r.codes);
    rounded_weights.insert(b->name());
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (log)
      log(where + ", " + std::to_string(k) + " x " + std::to_string(n) + ": output error " + rounded(r.error_nearest) +
          " -> " + rounded(r.error_gptq) + (report.kept ? "" : " (not kept)") + ", " + rounded(report.seconds) + " s");
    done();
  }
  return reports;
}

}  // namespace onnxptq::finetune
