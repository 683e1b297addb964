// A model run forward over a set of samples in stages: each request for some values runs only
// the part of the model between the values already known and those (engine::extract_model's
// cut), on every sample, and keeps only what later parts still read. Fast finetune asks one
// layer's input and output at a time, so the model runs once per sample in all, and the values
// held are the few at the frontier (a layer's input, the skips around it), per sample.
//
// The part runner is made when the part is: a quantized model whose plan changes between
// requests (a layer finetuned) computes every later part with the new weights.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "calib/data_reader.h"
#include "finetune/sample_store.h"
#include "ir/model.h"

namespace onnxptq::finetune {

class StagedRun {
 public:
  // What computes a part's outputs (in order) from a feed of its inputs; made for `part`.
  using PartRunner = std::function<std::vector<ir::Tensor>(const Feed&)>;
  using MakeRunner = std::function<PartRunner(const ir::Model& part)>;

  // `model` must outlive the run; `inputs` its inputs for every sample; `make` is called once
  // per part; `workers` samples run at a time. `keep_together(value)` names values that a part
  // must not end at (a Conv's output whose Relu a quantized model removes): the nodes reading
  // them join the part. With `spill`, the values computed are kept in files there.
  StagedRun(const ir::Model& model, SampleInputs inputs, MakeRunner make, int workers,
            std::function<bool(const std::string&)> keep_together = {},
            std::optional<std::filesystem::path> spill = std::nullopt);

  // The values named, for every sample (result[i]->get(s): name i, sample s), computing what is
  // not known yet. Values whose producers ran in an earlier request are known only while a node
  // not run yet reads them: a request never goes back.
  std::vector<SharedStore> values(const std::vector<std::string>& names);

  size_t samples() const { return samples_; }

 private:
  void forget_what_no_node_reads();

  const ir::Model& model_;
  MakeRunner make_;
  int workers_;
  std::function<bool(const std::string&)> keep_together_;
  std::optional<std::filesystem::path> spill_;
  size_t samples_ = 0;
  std::vector<ir::Node*> order_;
  std::unordered_set<const ir::Node*> main_nodes_, ran_;
  std::unordered_map<std::string, SharedStore> known_;
};

}  // namespace onnxptq::finetune
