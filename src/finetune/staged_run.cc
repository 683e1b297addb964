#include "finetune/staged_run.h"

#include <algorithm>

#include "engine/parallel.h"
#include "engine/subgraph.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune {
namespace {

// What `node` reads: its inputs and the values its subgraphs read from outside.
std::vector<const ir::Value*> reads_of(const ir::Graph& g, const ir::Node* node) {
  std::vector<const ir::Value*> r;
  for (const ir::Value* v : node->inputs())
    if (v) r.push_back(v);
  for (const ir::Value* v : g.implicit_inputs(node)) r.push_back(v);
  return r;
}

bool is_constant(const ir::Graph& g, const ir::Value* v) {
  return !v->producer() && v->has_initializer() && !g.is_input(v);
}

}  // namespace

StagedRun::StagedRun(const ir::Model& model, SampleInputs inputs, MakeRunner make, int workers,
                     std::function<bool(const std::string&)> keep_together, std::optional<std::filesystem::path> spill)
    : model_(model),
      make_(std::move(make)),
      workers_(std::max(workers, 1)),
      keep_together_(std::move(keep_together)),
      spill_(std::move(spill)) {
  const ir::Graph& g = *model.graph;
  samples_ = sample_count(inputs);
  order_ = g.topological_order();
  main_nodes_.insert(order_.begin(), order_.end());
  for (const ir::Value* v : g.inputs()) {
    auto it = inputs.find(v->name());
    if (it != inputs.end()) {
      known_[v->name()] = it->second;
    } else if (v->has_initializer()) {  // an input with a default no sample overrides
      auto store = std::make_shared<SampleStore>(samples_);
      for (size_t s = 0; s < samples_; ++s) store->set(s, v->initializer());
      known_[v->name()] = std::move(store);
    }
  }
}

std::vector<SharedStore> StagedRun::values(const std::vector<std::string>& names) {
  const ir::Graph& g = *model_.graph;
  std::vector<const ir::Value*> targets;
  for (const std::string& name : names) {
    const ir::Value* v = g.find_value(name);
    if (!v) throw Error("finetune: the model has no value '" + name + "'");
    if (!known_.count(name) && !is_constant(g, v)) targets.push_back(v);
  }
  if (!targets.empty()) {
    // The part: back from the targets to known values; then the readers of values it must not
    // end at, and what those read.
    std::unordered_set<const ir::Node*> part;
    std::vector<std::string> inputs;
    std::unordered_set<const ir::Value*> seen;
    std::vector<const ir::Value*> stack = targets;
    bool grown = true;
    while (grown) {
      while (!stack.empty()) {
        const ir::Value* v = stack.back();
        stack.pop_back();
        if (!seen.insert(v).second || is_constant(g, v)) continue;
        if (known_.count(v->name())) {
          inputs.push_back(v->name());
          continue;
        }
        const ir::Node* n = v->producer();
        if (!n) throw Error("finetune: the value '" + v->name() + "' is a graph input no sample gives");
        if (ran_.count(n))
          throw Error("finetune: the value '" + v->name() + "' was computed by an earlier part and is no longer held");
        if (!part.insert(n).second) continue;
        for (const ir::Value* in : reads_of(g, n)) stack.push_back(in);
      }
      grown = false;
      if (!keep_together_) break;
      for (const ir::Node* n : order_) {
        if (!part.count(n)) continue;
        for (const ir::Value* out : n->outputs())
          if (out && keep_together_(out->name()))
            for (const ir::Use& u : out->uses())
              if (main_nodes_.count(u.node) && !part.count(u.node) && !ran_.count(u.node))
                for (const ir::Value* w : u.node->outputs())
                  if (w) {
                    stack.push_back(w);
                    grown = true;
                  }
      }
    }
    // Outputs: the targets, and what the part computes that a node after it reads.
    std::unordered_set<const ir::Value*> read_later;
    for (const ir::Node* r : order_)
      if (!part.count(r) && !ran_.count(r))
        for (const ir::Value* in : reads_of(g, r)) read_later.insert(in);
    std::vector<std::string> outputs;
    std::unordered_set<std::string> wanted;
    for (const ir::Value* v : targets)
      if (wanted.insert(v->name()).second) outputs.push_back(v->name());
    for (const ir::Node* n : order_)
      if (part.count(n))
        for (const ir::Value* out : n->outputs())
          if (out && read_later.count(out) && wanted.insert(out->name()).second) outputs.push_back(out->name());
    std::sort(inputs.begin(), inputs.end());
    ir::Model part_model = engine::extract_model(model_, inputs, outputs);
    PartRunner run = make_(part_model);
    std::vector<SharedStore> computed;
    for (size_t i = 0; i < outputs.size(); ++i) computed.push_back(std::make_shared<SampleStore>(samples_, spill_));
    engine::for_each_on_workers(samples_, workers_, [&](size_t s) {
      Feed feed;
      for (const std::string& name : inputs) feed[name] = known_.at(name)->get(s);
      std::vector<ir::Tensor> out = run(feed);
      for (size_t i = 0; i < outputs.size(); ++i) computed[i]->set(s, out.at(i));
    });
    for (size_t i = 0; i < outputs.size(); ++i) known_[outputs[i]] = std::move(computed[i]);
    ran_.insert(part.begin(), part.end());
  }
  std::vector<SharedStore> result;
  for (const std::string& name : names) {
    auto it = known_.find(name);
    if (it != known_.end()) {
      result.push_back(it->second);
    } else {  // a constant: the same for every sample
      auto store = std::make_shared<SampleStore>(samples_);
      for (size_t s = 0; s < samples_; ++s) store->set(s, g.find_value(name)->initializer());
      result.push_back(std::move(store));
    }
  }
  forget_what_no_node_reads();
  return result;
}

void StagedRun::forget_what_no_node_reads() {
  const ir::Graph& g = *model_.graph;
  std::unordered_set<const ir::Value*> read;
  for (const ir::Node* n : order_)
    if (!ran_.count(n))
      for (const ir::Value* v : reads_of(g, n)) read.insert(v);
  for (auto it = known_.begin(); it != known_.end();) {
    const ir::Value* v = g.find_value(it->first);
    it = read.count(v) ? std::next(it) : known_.erase(it);
  }
}

}  // namespace onnxptq::finetune
