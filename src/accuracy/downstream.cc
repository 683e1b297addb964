#include "accuracy/downstream.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <numeric>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "engine/parallel.h"
#include "engine/session.h"
#include "engine/subgraph.h"
#include "onnxptq/error.h"
#include "qmath/quantize.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"

namespace onnxptq::accuracy {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The main graph as the walks below see it: nodes in topological order, what each reads (its
// inputs and the values its subgraphs read), who reads each value, and which values are
// constants (initializers, and what nodes compute from constants alone, as a session does once
// when it is built): those are part of any region and never cut.
struct GraphFacts {
  explicit GraphFacts(const ir::Graph& graph) : g(graph) {
    order = g.topological_order();
    for (size_t i = 0; i < order.size(); ++i) {
      const ir::Node* n = order[i];
      position[n] = i;
      std::vector<const ir::Value*>& r = reads[n];
      for (const ir::Value* v : n->inputs())
        if (v) r.push_back(v);
      std::vector<ir::Value*> implicit = g.implicit_inputs(n);
      r.insert(r.end(), implicit.begin(), implicit.end());
      for (const ir::Value* v : r) readers[v].push_back(n);
      bool all_constant = implicit.empty() && !engine::is_nondeterministic(*n);
      for (const ir::Value* v : r)
        all_constant = all_constant && (constant.count(v) || (v->has_initializer() && !g.is_input(v)));
      if (all_constant)
        for (const ir::Value* v : n->outputs())
          if (v) constant.insert(v);
    }
  }
  bool is_constant(const ir::Value* v) const {
    return constant.count(v) || (!v->producer() && v->has_initializer() && !g.is_input(v));
  }
  const std::vector<const ir::Node*>& readers_of(const ir::Value* v) const {
    static const std::vector<const ir::Node*> none;
    auto it = readers.find(v);
    return it == readers.end() ? none : it->second;
  }

  const ir::Graph& g;
  std::vector<ir::Node*> order;
  std::unordered_map<const ir::Node*, size_t> position;
  std::unordered_map<const ir::Node*, std::vector<const ir::Value*>> reads;
  std::unordered_map<const ir::Value*, std::vector<const ir::Node*>> readers;
  std::unordered_set<const ir::Value*> constant;
};

// A weight or bias of zeros whose quantized values are integer zeros with zero points 0: the
// simulation's value, (0 - 0) * scale, is the float one, so quantizing it changes nothing. (The
// preparation merges identical initializers: a model whose convolutions all have zero biases has
// one, read by all of them, which would otherwise put every convolution in every region.)
bool stays_zero(const quant::TensorPlan& t, const ir::Value& v) {
  if (t.role == quant::Role::Activation || !t.data || !v.has_initializer() ||
      !quant::quant_type_is_integer(t.data->dtype()))
    return false;
  if (v.initializer().dtype() != ir::DataType::Float) return false;
  for (const qmath::ScaleZeroPoint& p : t.params)
    if (p.zero_point != 0) return false;
  for (float x : v.initializer().values<float>())
    if (x != 0) return false;
  bool zeros = true;
  if (qmath::is_4bit_type(t.data->dtype())) {  // packed: every nibble 0, the padding one too
    for (std::byte b : std::span(t.data->bytes().data(), t.data->byte_size())) zeros = zeros && b == std::byte{0};
    return zeros;
  }
  qmath::visit_integer_quant_type(t.data->dtype(), "a quantized constant", [&](auto tag) {
    for (auto q : t.data->values<decltype(tag)>()) zeros = zeros && q == 0;
  });
  return zeros;
}

// What one group of plans changes, and the float values its region is fed.
struct Region {
  std::vector<std::string> cut;  // when the output is not reached: the output itself
  bool reaches_output = false;
  size_t ready_at = 0;  // nodes (in topological order) the float model runs before the cut is known
  std::unordered_set<const ir::Node*> ancestors;  // the non-constant nodes the cut is computed by
};

Region region_of(const GraphFacts& f, const std::vector<quant::Plan>& plans, const ir::Value* output) {
  bool any = false;
  for (const quant::Plan& p : plans) any = any || !p.tensors.empty();
  if (!any) return {};  // nothing to measure: no error, and no float value needed
  // Downstream of the planned tensors: the values they are and everything computed from them.
  std::unordered_set<const ir::Value*> affected;
  std::unordered_set<const ir::Node*> affected_nodes;
  std::vector<const ir::Value*> stack;
  auto affect = [&](const ir::Node* n) {
    if (affected_nodes.insert(n).second)
      for (const ir::Value* out : n->outputs())
        if (out) stack.push_back(out);
  };
  for (const quant::Plan& p : plans) {
    for (const quant::TensorPlan& t : p.tensors)
      if (const ir::Value* v = f.g.find_value(t.name); v && !stays_zero(t, *v)) stack.push_back(v);
    // A removed Relu/Clip: its producer's producer writes the output in its place.
    for (const std::string& name : p.removed_activations) {
      const ir::Value* v = f.g.find_value(name);
      const ir::Node* act = v ? v->producer() : nullptr;
      const ir::Value* in = act ? act->input(0) : nullptr;
      if (in && in->producer()) affect(in->producer());
    }
  }
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (!affected.insert(v).second) continue;
    for (const ir::Node* n : f.readers_of(v)) affect(n);
  }
  Region r;
  r.reaches_output = affected.count(output) > 0;
  auto cut = [&](const ir::Value* v) {
    r.cut.push_back(v->name());
    if (v->producer()) r.ready_at = std::max(r.ready_at, f.position.at(v->producer()) + 1);
  };
  if (!r.reaches_output) cut(output);
  // Walk back from the output through what the plans change; the rest is cut (or constant).
  std::unordered_set<const ir::Value*> seen;
  if (r.reaches_output) stack = {output};
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    if (v->producer() && affected_nodes.count(v->producer()))
      for (const ir::Value* in : f.reads.at(v->producer())) stack.push_back(in);
    else if (!f.is_constant(v))
      cut(v);
  }
  std::sort(r.cut.begin(), r.cut.end());
  // The float nodes the cut needs.
  for (const std::string& name : r.cut) stack.push_back(f.g.find_value(name));
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    const ir::Node* n = v->producer();
    if (!n || f.is_constant(v) || !r.ancestors.insert(n).second) continue;
    for (const ir::Value* in : f.reads.at(n)) stack.push_back(in);
  }
  return r;
}

using SampleValues = std::vector<ir::Tensor>;  // one value, per sample

size_t bytes_of(const std::unordered_map<std::string, SampleValues>& known) {
  size_t total = 0;
  for (const auto& [name, values] : known)
    for (const ir::Tensor& t : values) total += t.byte_size();
  return total;
}

}  // namespace

std::vector<std::vector<OutputMetrics>> downstream_errors(const ir::Model& model,
                                                          const std::vector<std::vector<quant::Plan>>& groups,
                                                          const quant::QuantConfig& config,
                                                          const ReferenceOutputs& reference, int threads,
                                                          DownstreamStats* stats, const ProgressFunction& progress) {
  const ir::Graph& g = *model.graph;
  if (reference.output_index >= g.outputs().size())
    throw Error("output index " + std::to_string(reference.output_index) + ": the model has " +
                std::to_string(g.outputs().size()) + " outputs");
  for (const std::vector<quant::Plan>& plans : groups)
    for (const quant::Plan& p : plans)
      for (const quant::TensorPlan& t : p.tensors)
        if (!g.find_value(t.name)) throw Error("simulation: the planned tensor '" + t.name + "' is not in the model");
  DownstreamStats local;
  DownstreamStats& st = stats ? *stats : local;
  const ir::Value* output = g.outputs()[reference.output_index];
  const size_t samples = reference.feeds.size();
  // Samples on threads of their own, as calibration runs its workers; the threads left over go to
  // each worker's session. (On resnet50, two workers of one thread and one of two took the same
  // time on a quiet machine; with the other core busy, workers do not wait for it at every step.)
  const int all_threads = threads > 0 ? threads : engine::hardware_threads();
  const int workers = static_cast<int>(std::min<size_t>(std::max(all_threads, 1), std::max<size_t>(samples, 1)));
  const int session_threads = std::max(1, all_threads / workers);
  GraphFacts facts(g);

  std::vector<Region> regions;
  for (const std::vector<quant::Plan>& plans : groups) regions.push_back(region_of(facts, plans, output));
  // Regions in the order their cuts become known, so the float model runs once, forward.
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return regions[a].ready_at < regions[b].ready_at; });

  // The float values known, per sample: the graph inputs, then what the float parts compute.
  std::unordered_map<std::string, SampleValues> known;
  for (const ir::Value* v : g.inputs()) {
    SampleValues values;
    for (const Feed& feed : reference.feeds) {
      auto it = feed.find(v->name());
      if (it != feed.end())
        values.push_back(it->second);
      else if (v->has_initializer())
        values.push_back(v->initializer());
    }
    if (values.size() == samples) known[v->name()] = std::move(values);
  }
  if (facts.is_constant(output)) {  // no plan changes it; what it is for every sample
    engine::Session session(engine::extract_model(model, {}, {output->name()}));
    known[output->name()] = SampleValues(samples, session.run({}).at(0));
  }
  std::unordered_set<const ir::Node*> computed;

  std::vector<std::vector<OutputMetrics>> results(groups.size());
  for (size_t k = 0; k < order.size(); ++k) {
    if (progress) progress({"sensitivity", "nodes", k, order.size()});
    const size_t gi = order[k];
    const Region& region = regions[gi];
    const std::vector<quant::Plan>& plans = groups[gi];
    results[gi].resize(plans.size());
    bool any = false;
    for (const quant::Plan& p : plans) any = any || !p.tensors.empty();
    if (!any) continue;

    // The float part that computes the cut values not known yet, and keeps what later ones read.
    std::vector<const ir::Value*> targets;
    for (const std::string& name : region.cut)
      if (!known.count(name)) targets.push_back(g.find_value(name));
    if (!targets.empty()) {
      auto start = Clock::now();
      std::unordered_set<const ir::Node*> part;
      std::vector<std::string> inputs;
      std::unordered_set<const ir::Value*> seen;
      std::vector<const ir::Value*> stack = targets;
      while (!stack.empty()) {
        const ir::Value* v = stack.back();
        stack.pop_back();
        if (!seen.insert(v).second || facts.is_constant(v)) continue;
        if (known.count(v->name())) {
          inputs.push_back(v->name());
          continue;
        }
        const ir::Node* n = v->producer();
        if (!n) throw Error("sensitivity: the float value '" + v->name() + "' is not known (a graph input not fed)");
        if (!part.insert(n).second) continue;
        for (const ir::Value* in : facts.reads.at(n)) stack.push_back(in);
      }
      std::unordered_set<std::string> pending_cut;
      std::unordered_set<const ir::Node*> pending_nodes;
      for (size_t j = k; j < order.size(); ++j) {
        pending_cut.insert(regions[order[j]].cut.begin(), regions[order[j]].cut.end());
        for (const ir::Node* n : regions[order[j]].ancestors)
          if (!computed.count(n) && !part.count(n)) pending_nodes.insert(n);
      }
      std::vector<std::string> outputs;
      for (const ir::Node* n : facts.order) {
        if (!part.count(n)) continue;
        for (const ir::Value* v : n->outputs()) {
          if (!v) continue;
          bool read_later = pending_cut.count(v->name()) > 0;
          for (const ir::Node* r : facts.readers_of(v)) read_later = read_later || pending_nodes.count(r);
          if (read_later) outputs.push_back(v->name());
        }
      }
      engine::SessionOptions so;
      so.threads = session_threads;
      engine::Session session(engine::extract_model(model, inputs, outputs), so);
      std::vector<SampleValues> computed_values(outputs.size(), SampleValues(samples));
      std::vector<const SampleValues*> fed;
      for (const std::string& name : inputs) fed.push_back(&known.at(name));
      engine::for_each_on_workers(samples, workers, [&](size_t s) {
        Feed feed;
        for (size_t i = 0; i < inputs.size(); ++i) feed[inputs[i]] = (*fed[i])[s];
        std::vector<ir::Tensor> out = session.run(feed);
        for (size_t i = 0; i < outputs.size(); ++i) computed_values[i][s] = std::move(out[i]);
      });
      for (size_t i = 0; i < outputs.size(); ++i) known[outputs[i]] = std::move(computed_values[i]);
      computed.insert(part.begin(), part.end());
      st.float_runs += samples;
      st.float_seconds += seconds_since(start);
      st.peak_cached_bytes = std::max(st.peak_cached_bytes, bytes_of(known));
    }

    // Each plan on the region, from the cut.
    if (!region.reaches_output) {
      // Nothing the plans change reaches the output: it is the float model's.
      auto start = Clock::now();
      OutputError error;
      for (size_t s = 0; s < samples; ++s)
        error.add(reference.outputs[s], known.at(output->name())[s], "sample " + std::to_string(s));
      for (size_t p = 0; p < plans.size(); ++p)
        if (!plans[p].tensors.empty()) results[gi][p] = error.metrics();
      st.run_seconds += seconds_since(start);
    } else {
      auto start = Clock::now();
      ir::Model cut = engine::extract_model(model, region.cut, {output->name()});
      double share = static_cast<double>(cut.graph->node_count()) / std::max<size_t>(g.node_count(), 1);
      st.build_seconds += seconds_since(start);
      for (size_t p = 0; p < plans.size(); ++p) {
        if (plans[p].tensors.empty()) continue;
        start = Clock::now();
        quant::Simulation simulation(cut, quant::plan_within(plans[p], *cut.graph), config, session_threads);
        st.build_seconds += seconds_since(start);
        start = Clock::now();
        std::vector<const SampleValues*> fed;
        for (const std::string& name : region.cut) fed.push_back(&known.at(name));
        std::vector<ir::Tensor> outputs(samples);
        engine::for_each_on_workers(samples, workers, [&](size_t s) {
          Feed feed;
          for (size_t i = 0; i < region.cut.size(); ++i) feed[region.cut[i]] = (*fed[i])[s];
          outputs[s] = std::move(simulation.run(feed).at(0));
        });
        OutputError error;  // summed in sample order, as compare_to_reference does
        for (size_t s = 0; s < samples; ++s) error.add(reference.outputs[s], outputs[s], "sample " + std::to_string(s));
        results[gi][p] = error.metrics();
        st.run_seconds += seconds_since(start);
        st.region_nodes += share;
        st.region_runs += samples;
      }
    }

    // Forget the float values no later region or float part reads.
    std::unordered_set<std::string> later_cut;
    std::unordered_set<const ir::Node*> later_nodes;
    for (size_t j = k + 1; j < order.size(); ++j) {
      later_cut.insert(regions[order[j]].cut.begin(), regions[order[j]].cut.end());
      for (const ir::Node* n : regions[order[j]].ancestors)
        if (!computed.count(n)) later_nodes.insert(n);
    }
    for (auto it = known.begin(); it != known.end();) {
      bool needed = later_cut.count(it->first) > 0;
      const ir::Value* v = g.find_value(it->first);
      for (const ir::Node* r : facts.readers_of(v)) needed = needed || later_nodes.count(r);
      it = needed ? std::next(it) : known.erase(it);
    }
  }
  size_t runs_per_sample = samples ? st.region_runs / samples : 0;
  if (runs_per_sample) st.region_nodes /= static_cast<double>(runs_per_sample);
  if (progress) progress({"sensitivity", "nodes", order.size(), order.size()});
  return results;
}

std::string describe(const DownstreamStats& s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << "float parts " << s.float_seconds << " s (" << s.float_runs
      << " runs), regions built " << s.build_seconds << " s, run " << s.run_seconds << " s (" << s.region_runs
      << " runs, " << std::setprecision(0) << s.region_nodes * 100
      << " % of the nodes each), float values held at most " << std::setprecision(1)
      << static_cast<double>(s.peak_cached_bytes) / (1 << 20) << " MB";
  return out.str();
}

}  // namespace onnxptq::accuracy
