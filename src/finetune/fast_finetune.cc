#include "finetune/fast_finetune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "engine/kernel.h"
#include "engine/parallel.h"
#include "engine/session.h"
#include "finetune/gptq.h"
#include "finetune/staged_run.h"
#include "onnxptq/error.h"
#include "qmath/params.h"
#include "qmath/quantize.h"
#include "quant/block_format.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"

namespace onnxptq::finetune {
namespace {

bool default_domain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// A constant input's values as float (Clip's bounds, PRelu's slope), or nullopt.
std::optional<std::vector<float>> constant_values(const ir::Value* v) {
  if (!v || v->producer() || !v->has_initializer()) return std::nullopt;
  ir::Tensor f = engine::as_float32(v->initializer());
  std::span<const float> values = f.values<float>();
  return std::vector<float>(values.begin(), values.end());
}

// A MatMul's bias, as transformers and ONNX exporters write it: the only reader of its output is
// an Add whose other input is a constant of one value per output column (shape [N] or
// [1, ..., 1, N]). Returns that Add, or null.
const ir::Node* bias_add_after(const ir::Graph& g, const ir::Node& matmul, int64_t columns) {
  const ir::Value* out = matmul.output(0);
  if (!out || g.is_output(out) || out->uses().size() != 1) return nullptr;
  const ir::Node* add = out->uses()[0].node;
  if (!default_domain(*add) || add->op_type != "Add" || add->inputs().size() != 2 || !add->output(0)) return nullptr;
  const ir::Value* bias = add->input(1 - out->uses()[0].input);
  if (!bias || !bias->has_initializer()) return nullptr;
  const std::vector<int64_t>& dims = bias->initializer().dims();
  if (dims.empty() || dims.back() != columns || bias->initializer().size() != columns) return nullptr;
  return add;
}

// The activation Quark trains with `node` (the only reader of its output, and one of Relu,
// PRelu, LeakyRelu, Gelu, Tanh, Clip, Sigmoid, Softmax), or nullptr.
const ir::Node* activation_after(const ir::Graph& g, const ir::Node& node, Activation& act) {
  const ir::Value* out = node.output(0);
  if (!out || g.is_output(out) || out->uses().size() != 1) return nullptr;
  const ir::Node* next = out->uses()[0].node;
  if (out->uses()[0].input != 0 || next->output(0) == nullptr) return nullptr;
  using K = Activation::Kind;
  const std::string& op = next->op_type;
  if (default_domain(*next)) {
    if (op == "Relu") {
      act.kind = K::Relu;
    } else if (op == "LeakyRelu") {
      act.kind = K::LeakyRelu;
      act.alpha = next->attr_float("alpha", 0.01f);
    } else if (op == "PRelu") {
      auto slope = constant_values(next->input(1));
      if (!slope) return nullptr;
      act.kind = K::PRelu;
      act.slope = *slope;
    } else if (op == "Tanh") {
      act.kind = K::Tanh;
    } else if (op == "Sigmoid") {
      act.kind = K::Sigmoid;
    } else if (op == "Gelu") {
      act.kind = next->attr_string("approximate", "none") == "tanh" ? K::GeluTanh : K::Gelu;
    } else if (op == "Clip") {
      act.kind = K::Clip;
      if (next->inputs().size() > 1 || next->find_attribute("min") || next->find_attribute("max")) {
        // Opset 11 on: bounds as constant inputs; before: attributes.
        if (next->find_attribute("min") || next->find_attribute("max")) {
          act.min = next->attr_float("min", act.min);
          act.max = next->attr_float("max", act.max);
        } else {
          for (size_t i : {size_t{1}, size_t{2}}) {
            if (!next->input(i)) continue;
            auto bound = constant_values(next->input(i));
            if (!bound || bound->size() != 1) return nullptr;
            (i == 1 ? act.min : act.max) = (*bound)[0];
          }
        }
      }
    } else if (op == "Softmax") {
      // One axis, the last: what every opset's Softmax computes on it alike.
      int64_t axis = next->attr_int("axis", -1);
      auto shape = out->type.static_shape();
      if (!(axis == -1 || (shape && axis == static_cast<int64_t>(shape->size()) - 1))) return nullptr;
      act.kind = K::Softmax;
      act.axis = -1;
    } else {
      return nullptr;
    }
  } else if (next->domain == "com.microsoft" && op == "Gelu") {
    act.kind = K::Gelu;
  } else {
    return nullptr;
  }
  return next;
}

std::string rounded(double v, int precision) {
  std::ostringstream out;
  out << std::setprecision(precision) << v;
  return out.str();
}

// The quantization of activation `name` as the plan gives it (shared parameters resolved), or
// nullopt when the plan leaves it float or quantizes it to a type without rounding.
std::optional<OutputQuant> output_quant(const quant::Plan& plan, const std::string& name) {
  const quant::TensorPlan* t = plan.find(name);
  if (!t || t->role != quant::Role::Activation) return std::nullopt;
  const quant::TensorPlan& p = plan.provider(name);
  if (!quant::quant_type_is_integer(p.type) || p.params.size() != 1) return std::nullopt;
  const qmath::QRange range = qmath::quant_range(p.type, /*symmetric=*/false);
  return OutputQuant{static_cast<float>(p.params[0].scale), static_cast<float>(p.params[0].zero_point),
                     static_cast<float>(range.min), static_cast<float>(range.max)};
}

// SelectiveUpdate's measure: the mean over the samples of the L2 norm of output `index` of the
// model simulated with a plan, minus the float model's.
class OutputDistance {
 public:
  OutputDistance(const ir::Model& model, const quant::QuantConfig& config, SampleInputs samples, size_t index,
                 int threads, const std::optional<std::filesystem::path>& spill)
      : model_(model),
        config_(config),
        samples_(std::move(samples)),
        reference_(sample_count(samples_), spill),
        index_(index),
        threads_(threads) {
    if (index >= model.graph->outputs().size())
      throw Error("FastFinetune OutputIndex " + std::to_string(index) + ": the model has " +
                  std::to_string(model.graph->outputs().size()) + " outputs");
    engine::SessionOptions options;
    options.threads = threads;
    engine::Session session(model, options);
    for (size_t i = 0; i < reference_.size(); ++i)
      reference_.set(i, engine::as_float32(session.run(feed_of(samples_, i))[index]));
  }
  double operator()(const quant::Plan& plan) const {
    quant::Simulation simulation(model_, plan, config_, threads_);
    double sum = 0;
    for (size_t i = 0; i < reference_.size(); ++i) {
      ir::Tensor out = engine::as_float32(simulation.run(feed_of(samples_, i))[index_]);
      const ir::Tensor reference = reference_.get(i);
      std::span<const float> q = out.values<float>(), f = reference.values<float>();
      double squares = 0;
      for (size_t j = 0; j < q.size() && j < f.size(); ++j) {
        const double d = static_cast<double>(q[j]) - f[j];
        squares += d * d;
      }
      sum += std::sqrt(squares);
    }
    return sum / static_cast<double>(reference_.size());
  }

 private:
  const ir::Model& model_;
  const quant::QuantConfig& config_;
  SampleInputs samples_;
  SampleStore reference_;  // output index_ of the float model, per sample
  size_t index_;
  int threads_;
};

// The value a target's training ends at: its activation's output, or its own.
const ir::Value* end_of(const ir::Graph& g, const ir::Node& node) {
  Activation unused;
  const ir::Node* act = activation_after(g, node, unused);
  return (act ? act : &node)->output(0);
}

// SelectMaxMemLayer's choice: the target whose training data takes the most memory: its input
// (twice with DropRatio < 1: quantized and float) and its output for every sample, and its
// weight with the trainer's copies of it. The sizes come from the float model run on the first
// sample. `bytes` gets the estimate.
const ir::Node* largest_layer(const ir::Model& model, const std::vector<const ir::Node*>& targets,
                              const SampleInputs& samples, const FastFinetuneOptions& o, double& bytes) {
  const ir::Graph& g = *model.graph;
  engine::SessionOptions so;
  so.threads = o.threads;
  so.hooks_ignore_layout = true;
  for (const ir::Node* node : targets) {
    so.visible.insert(node->input(0)->name());
    so.visible.insert(end_of(g, *node)->name());
  }
  std::map<std::string, double> elements;
  engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) {
    elements[name] = static_cast<double>(t.size());
  };
  engine::Session(model, so).run(feed_of(samples, 0), {&observe});
  const double count = static_cast<double>(sample_count(samples)), inputs = o.train.drop_ratio < 1 ? 2 : 1;
  // The weight, its gradient and Adam's two moments, and AdaRound's four more per value.
  const double weight_copies = o.train.algorithm == Algorithm::AdaRound ? 8 : 4;
  const ir::Node* best = nullptr;
  bytes = -1;
  for (const ir::Node* node : targets) {
    const double data = count * (inputs * elements[node->input(0)->name()] + elements[end_of(g, *node)->name()]);
    const double weight = weight_copies * static_cast<double>(node->input(1)->initializer().size());
    const double b = 4 * (data + weight);
    if (b > bytes) {
      bytes = b;
      best = node;
    }
  }
  return best;
}

}  // namespace

StagedRun quantized_staged_run(const ir::Model& model, const quant::Plan& plan, const quant::QuantConfig& config,
                               const SampleInputs& samples, int workers, int threads,
                               const std::optional<std::filesystem::path>& spill) {
  const ir::Graph& g = *model.graph;
  const size_t count = sample_count(samples);
  // A Relu the plan removes stays with its producer.
  std::set<std::string> before_removed;
  for (const std::string& name : plan.removed_activations)
    if (const ir::Value* v = g.find_value(name); v && v->producer() && v->producer()->input(0))
      before_removed.insert(v->producer()->input(0)->name());
  // The model's inputs as the quantized model holds them: a layer reading one gets it quantized
  // (later values come fake-quantized from the parts that compute them).
  SampleInputs quantized_inputs = samples;
  for (auto& [name, store] : quantized_inputs) {
    if (!plan.find(name)) continue;
    auto quantized = std::make_shared<SampleStore>(count, spill);
    for (size_t i = 0; i < count; ++i) {
      ir::Tensor value = store->get(i);
      quant::fake_quantize_activation(plan, config, name, value);
      quantized->set(i, value);
    }
    store = std::move(quantized);
  }
  return StagedRun(
      model, std::move(quantized_inputs),
      [&plan, &config, threads](const ir::Model& part) -> StagedRun::PartRunner {
        auto simulation =
            std::make_shared<quant::Simulation>(part, quant::plan_within(plan, *part.graph), config, threads);
        return [simulation](const Feed& feed) { return simulation->run(feed); };
      },
      workers, [before_removed](const std::string& name) { return before_removed.count(name) > 0; }, spill);
}

std::vector<quant::FinetunedLayer> fast_finetune(const ir::Model& model, quant::Plan& plan,
                                                 const quant::QuantConfig& config, const SampleInputs& samples,
                                                 const FastFinetuneOptions& o,
                                                 const std::function<void(const std::string&)>& log,
                                                 const ir::Model* reference) {
  const size_t count = sample_count(samples);
  const bool correcting = o.train.algorithm == Algorithm::BiasCorrection;
  // The name of the pass in messages: "fast finetune", or "bias correction".
  const std::string pass = correcting ? "bias correction" : "fast finetune";
  if (count == 0) throw Error(pass + ": no sample to train on");
  const ir::Graph& g = *model.graph;
  const int threads = o.threads > 0 ? o.threads : engine::hardware_threads();
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), count));
  engine::SessionOptions session_options;
  session_options.threads = std::max(1, threads / workers);

  const ir::Model& target_model = reference ? *reference : model;
  StagedRun float_run(
      target_model, samples,
      [&](const ir::Model& part) -> StagedRun::PartRunner {
        auto session = std::make_shared<engine::Session>(part, session_options);
        return [session](const Feed& feed) { return session->run(feed); };
      },
      workers, {}, o.spill);
  // Parallel: the inputs of every layer from the plan before any layer is finetuned.
  const quant::Plan initial = o.parallel ? plan : quant::Plan{};
  const quant::Plan& inputs_plan = o.parallel ? initial : plan;
  StagedRun quantized_run =
      quantized_staged_run(model, inputs_plan, config, samples, workers, session_options.threads, o.spill);

  std::optional<OutputDistance> distance;
  double current_distance = 0;
  if (o.selective_update) {
    distance.emplace(model, config, samples, o.output_index, threads, o.spill);
    current_distance = (*distance)(plan);
  }

  // How the exported float16/bfloat16 quantize and dequantize ops cast.
  const quant::QuantizeOptions casts = quant::quantize_options_of(config);
  std::vector<const ir::Node*> targets;
  for (const ir::Node* node : g.topological_order())
    if (default_domain(*node) && o.target_op_types.count(node->op_type) &&
        (o.nodes.empty() || o.nodes.count(node->name)))
      targets.push_back(node);
  if (o.select_max_mem_layer && !targets.empty()) {
    // Among the targets whose weight can train.
    std::vector<const ir::Node*> trainable;
    for (const ir::Node* node : targets)
      if (const ir::Value* w = node->input(1); w && w->has_initializer() && plan.find(w->name()) && node->input(0))
        trainable.push_back(node);
    if (!trainable.empty()) {
      double bytes = 0;
      const ir::Node* largest = largest_layer(model, trainable, samples, o, bytes);
      if (log)
        log("SelectMaxMemLayer: only " + largest->name + " (" + largest->op_type + "), about " +
            rounded(bytes / (1 << 20), 3) + " MB of data");
      targets = {largest};
    }
  }
  const ProgressFunction& progress = config.calib.progress;
  if (progress) progress({pass, "layers", 0, targets.size()});
  std::vector<quant::FinetunedLayer> reports;
  std::set<std::string> trained_weights;
  for (const ir::Node* node : targets) {
    quant::FinetunedLayer report;
    report.pass = correcting ? "bias_correction" : "fast_finetune";
    report.node = node->name;
    report.op_type = node->op_type;
    auto skip = [&](const std::string& why) {
      report.skipped = why;
      if (log)
        log(pass + " " + std::to_string(reports.size() + 1) + "/" + std::to_string(targets.size()) + " " + node->name +
            " (" + node->op_type + "): skipped, " + why);
      reports.push_back(std::move(report));
      if (progress) progress({pass, "layers", reports.size(), targets.size()});
    };
    const ir::Value* w = node->input(1);
    quant::TensorPlan* wp = w ? plan.find(w->name()) : nullptr;
    const bool float_weight = wp && quant::quant_type_is_float(wp->type);
    // A block-format weight has no quantized values: the trained float weight is kept in `data`.
    const bool block_weight = wp && quant::quant_type_is_block(wp->type);
    if (!wp || wp->role != quant::Role::Weight ||
        !(block_weight || (wp->data && (quant::quant_type_is_integer(wp->type) || float_weight)))) {
      skip("its weight is not quantized");
      continue;
    }
    // A MatMul's bias is the constant of the Add after it (bias correction only: fast finetune
    // trains the MatMul alone, as Quark does); the layer then ends at the Add.
    const ir::Node* bias_add = nullptr;
    if (correcting && node->op_type == "MatMul" && w->has_initializer() && w->initializer().dims().size() == 2)
      bias_add = bias_add_after(g, *node, w->initializer().dims()[1]);
    const ir::Value* b = bias_add ? bias_add->input(bias_add->input(0) == node->output(0) ? 1 : 0) : node->input(2);
    quant::TensorPlan* bp = b ? plan.find(b->name()) : nullptr;
    // A bias the plan keeps float is the float model's: only a quantized one can change.
    const bool bias_quantized = bp && (bp->data || quant::quant_type_is_block(bp->type));
    if (correcting && !bias_quantized) {
      skip(b                           ? "its bias is not quantized (the float model's stays)"
           : node->op_type == "MatMul" ? "it has no bias (an Add of one constant per column after it)"
                                       : "it has no bias");
      continue;
    }
    if ((float_weight || block_weight) && o.train.algorithm == Algorithm::AdaRound) {
      skip("AdaRound chooses between integers, its weight is " + std::string(quant::quant_type_name(wp->type)));
      continue;
    }
    if (trained_weights.count(w->name())) {
      skip("its weight was trained with an earlier node");
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    Activation activation;
    const ir::Node* layer_end = bias_add ? bias_add : node;
    const ir::Node* act_node = activation_after(g, *layer_end, activation);
    if (act_node) report.activation = act_node->op_type;
    const std::string input = node->input(0)->name();
    const std::string end = (act_node ? act_node : layer_end)->output(0)->name();
    if (o.output_qdq) activation.output = output_quant(plan, end);
    if (reference && (!reference->graph->find_value(input) || !reference->graph->find_value(end))) {
      skip("the reference model (RefModelPath) has no tensor '" + (reference->graph->find_value(input) ? end : input) +
           "'");
      continue;
    }

    // The float weight and bias, and how the plan quantizes the weight.
    ir::Tensor weight_f = engine::as_float32(w->initializer());
    std::vector<float> weight(weight_f.values<float>().begin(), weight_f.values<float>().end());
    std::vector<float> bias;
    if (b && bp && bp->data) {  // a block-format bias holds float values (corrected, or trained)
      ir::Tensor d = quant::quant_type_is_block(bp->type)
                         ? engine::as_float32(*bp->data)
                         : quant::dequantize_tensor(*bp->data, bp->params, bp->data_axis(), casts);
      bias.assign(d.values<float>().begin(), d.values<float>().end());
    } else if (b && b->has_initializer()) {
      ir::Tensor f = engine::as_float32(b->initializer());
      bias.assign(f.values<float>().begin(), f.values<float>().end());
    }
    WeightQuant quant;
    for (const qmath::ScaleZeroPoint& p : wp->params) {
      quant.scale.push_back(static_cast<float>(p.scale));
      quant.zero_point.push_back(p.zero_point);
    }
    quant.axis = wp->axis.value_or(0);
    if (block_weight) {
      if (!wp->block_axis) throw Error("fast finetune of node '" + node->name + "': its block weight has no axis");
      quant.scale = {1.0f};
      quant.zero_point = {0};
      auto block = std::make_shared<engine::BlockQuantizer>(
          quant::block_node(wp->type, config, *wp->block_axis, /*constant=*/true));
      quant.tensor_cast = [block, dims = weight_f.dims()](const float* x, float* y) {
        ir::Tensor w = ir::Tensor::uninitialized(ir::DataType::Float, dims);
        std::copy(x, x + w.size(), w.mutable_values<float>().begin());
        ir::Tensor q = (*block)(w, 1);
        std::copy(q.values<float>().begin(), q.values<float>().end(), y);
      };
    } else if (float_weight)
      quant.float_cast = [type = wp->type, &params = wp->params, &casts](const float* x, size_t n, size_t c, float* y) {
        quant::fake_quantize_values(x, n, type, params[c], casts, y);
      };
    else
      quant.range = quant::weight_saturation(*wp, config);
    // A node the trainer cannot compute (Gemm's transA, ...) is skipped, as Quark skips a module
    // that fails.
    std::unique_ptr<LayerOp> op;
    try {
      op = make_layer_op(*node, weight_f.dims(), bias.size(), threads);
    } catch (const Error& e) {
      skip(e.what());
      continue;
    }

    LayerSamples data;
    data.quantized_inputs = quantized_run.values({input})[0];
    std::vector<SharedStore> f = float_run.values({input, end});
    if (o.train.drop_ratio < 1) data.float_inputs = f[0];
    data.float_outputs = f[1];

    TrainOptions train = o.train;
    train.update_bias = train.update_bias && bias_quantized;
    train.threads = threads;
    if (log)
      train.progress = [&](int iteration, double loss) {
        log("  " + node->name + ": iteration " + std::to_string(iteration) + ", loss " + rounded(loss, 4));
      };
    LayerResult r;
    try {
      r = correcting
              ? correct_bias(*op, activation, weight, weight_f.dims(), bias, quant, data, kBiasCorrectionSteps, threads)
              : train_layer(*op, activation, weight, weight_f.dims(), bias, quant, data, train);
    } catch (const Error& e) {
      throw Error(pass + " of node '" + node->name + "': " + e.what(), e.kind());
    }
    report.loss_before = r.loss_before;
    report.loss_after = r.loss_after;
    report.iterations = r.iterations_run;
    report.kept = r.improved;
    if (r.improved) {
      std::optional<ir::Tensor> old_weight = wp->data, old_bias = bp ? bp->data : std::nullopt;
      if (correcting) {
        // The weight stays the plan's.
      } else if (block_weight) {
        wp->data = ir::Tensor::from_values<float>(weight_f.dims(), r.float_weight);
      } else if (float_weight) {
        wp->data = quant::quantize_tensor(ir::Tensor::from_values<float>(wp->data->dims(), r.float_weight), wp->type,
                                          wp->params, wp->data_axis(), casts);
      } else {
        ir::Tensor q(wp->type, wp->data->dims());
        if (qmath::is_4bit_type(wp->type)) {  // packed two a byte, as ONNX stores int4 / uint4
          std::vector<int8_t> held(static_cast<size_t>(q.size()));
          for (size_t i = 0; i < held.size(); ++i) held[i] = static_cast<int8_t>(r.quantized_weight[i]);
          qmath::pack_4bit(held.data(), q.size(), q.mutable_bytes());
        } else {
          qmath::visit_integer_quant_type(wp->type, "the weight", [&](auto tag) {
            using T = decltype(tag);
            std::span<T> out = q.mutable_values<T>();
            for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(r.quantized_weight[i]);
          });
        }
        wp->data = std::move(q);
      }
      if (bias_quantized && r.bias != bias) {
        if (quant::quant_type_is_block(bp->type))  // through its block node, as a block weight
          bp->data = ir::Tensor::from_values<float>(b->initializer().dims(), r.bias);
        else
          bp->data = quant::quantize_tensor(ir::Tensor::from_values<float>(bp->data->dims(), r.bias), bp->data->dtype(),
                                            bp->params, bp->data_axis(), casts);
      }
      if (distance) {
        const double after = (*distance)(plan);
        report.output_distance = std::pair{current_distance, after};
        report.kept = after < current_distance;
        if (report.kept) {
          current_distance = after;
        } else {
          wp->data = std::move(old_weight);
          if (bp) bp->data = std::move(old_bias);
        }
      }
    }
    trained_weights.insert(w->name());
    report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (log) {
      const size_t done = reports.size() + 1;
      std::string line = pass + " " + std::to_string(done) + "/" + std::to_string(targets.size()) + " " + node->name +
                         " (" + node->op_type + (act_node ? " + " + act_node->op_type : "") + "): loss " +
                         rounded(r.loss_before, 4) + " -> " + rounded(r.loss_after, 4);
      if (report.output_distance)
        line += ", output distance " + rounded(report.output_distance->first, 4) + " -> " +
                rounded(report.output_distance->second, 4);
      line += std::string(report.kept ? "" : " (not kept)") + ", " + std::to_string(r.iterations_run) +
              " iterations, " + rounded(report.seconds, 3) + " s";  // the time left is the progress bar's
      log(line);
    }
    reports.push_back(std::move(report));
    if (progress) progress({pass, "layers", reports.size(), targets.size()});
  }
  return reports;
}

FastFinetuneOptions fast_finetune_options(const quant::FastFinetune& c, int threads) {
  FastFinetuneOptions o;
  TrainOptions& t = o.train;
  t.algorithm = c.adaquant ? Algorithm::AdaQuant : Algorithm::AdaRound;
  t.iterations = c.num_iterations.value_or(c.adaquant ? 3000 : 1000);
  t.learning_rate = c.learning_rate.value_or(c.adaquant ? 1e-5 : 0.1);
  t.batch_size = c.batch_size;
  t.early_stop = c.early_stop;
  t.window = c.num_batches > 1 ? c.num_batches : 0;
  t.reg_param = c.reg_param;
  t.beta_start = c.beta_range.first;
  t.beta_end = c.beta_range.second;
  t.warm_start = c.warm_start;
  t.drop_ratio = c.drop_ratio;
  t.update_bias = c.update_bias;
  t.lr_adjust = c.lr_adjust;
  t.seed = c.fixed_seed;
  t.log_period = c.log_period;
  o.target_op_types = std::set<std::string>(c.target_op_types.begin(), c.target_op_types.end());
  o.parallel = c.parallel;
  o.selective_update = c.selective_update;
  o.output_index = c.output_index;
  o.output_qdq = c.output_qdq;
  if (c.mem_opt_level == 2)
    o.spill = c.cache_dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(c.cache_dir);
  o.select_max_mem_layer = c.select_max_mem_layer;
  o.threads = threads;
  return o;
}

FastFinetuneOptions bias_correction_options(const quant::QuantConfig& config) {
  FastFinetuneOptions o = fast_finetune_options(config.fast_finetune, config.calib.threads);
  o.train = TrainOptions{};
  o.train.algorithm = Algorithm::BiasCorrection;
  o.target_op_types = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
  o.parallel = o.selective_update = o.output_qdq = o.select_max_mem_layer = false;
  return o;
}

quant::PlanRefiner post_quantization_refiner(const quant::QuantConfig& config,
                                             std::function<void(const std::string&)> log, std::set<std::string> nodes) {
  return [config, log, nodes](quant::Plan& plan, const ir::Model& model, DataReader& reader) {
    std::vector<quant::FinetunedLayer> reports;
    // Quark's order: GPTQ, BiasCorrection, (AutoMixprecision,) FastFinetune.
    if (config.use_gptq || (config.use_matmul_nbits && config.matmul_nbits.algorithm == "GPTQ")) {
      reader.rewind();
      SampleInputs samples = read_samples(reader, SIZE_MAX);
      if (log) log("GPTQ on " + std::to_string(sample_count(samples)) + " samples");
      reports = gptq_plan(model, plan, config, samples, log);
      size_t kept = 0;
      for (const quant::FinetunedLayer& r : reports) kept += r.kept;
      if (log) log("GPTQ: " + std::to_string(kept) + " MatMul weights rounded by GPTQ");
    }
    if (config.bias_correction) {
      const FastFinetuneOptions o = bias_correction_options(config);
      reader.rewind();
      SampleInputs samples = read_samples(reader, kBiasCorrectionSamples, o.spill);
      if (log) log("bias correction on " + std::to_string(sample_count(samples)) + " samples");
      std::vector<quant::FinetunedLayer> corrected_layers = fast_finetune(model, plan, config, samples, o, log);
      size_t corrected = 0;
      for (const quant::FinetunedLayer& r : corrected_layers) corrected += r.kept;
      reports.insert(reports.end(), corrected_layers.begin(), corrected_layers.end());
      if (log) log("bias correction: " + std::to_string(corrected) + " biases corrected");
    }
    if (!config.include_fast_ft) return reports;
    reader.rewind();
    FastFinetuneOptions o = fast_finetune_options(config.fast_finetune, config.calib.threads);
    o.nodes = nodes;
    SampleInputs samples = read_samples(reader, config.fast_finetune.data_size, o.spill);
    if (log)
      log(std::string("fast finetune (") + (config.fast_finetune.adaquant ? "AdaQuant" : "AdaRound") + ") on " +
          std::to_string(sample_count(samples)) + " samples, " + std::to_string(o.train.iterations) +
          " iterations a layer");
    std::optional<ir::Model> reference;
    if (!config.fast_finetune.ref_model_path.empty()) {
      try {
        reference = ir::load_model(config.fast_finetune.ref_model_path);
      } catch (const Error& e) {
        throw Error(std::string("FastFinetune RefModelPath: ") + e.what(), e.kind());
      }
    }
    std::vector<quant::FinetunedLayer> finetuned =
        fast_finetune(model, plan, config, samples, o, log, reference ? &*reference : nullptr);
    size_t kept = 0, trained = 0;
    for (const quant::FinetunedLayer& r : finetuned) {
      trained += r.skipped.empty();
      kept += r.kept;
    }
    if (log) log("fast finetune: " + std::to_string(kept) + " of " + std::to_string(trained) + " layers trained kept");
    reports.insert(reports.end(), finetuned.begin(), finetuned.end());
    return reports;
  };
}

}  // namespace onnxptq::finetune
