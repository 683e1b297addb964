// extra_options' FastFinetune: Quark for ONNX's keys (AdaRoundConfig, AdaQuantConfig and the
// FastFinetune dict of its presets), checked one by one.
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "onnxptq/error.h"
#include "quant/config.h"

namespace onnxptq::quant {
namespace {

[[noreturn]] void bad(const std::string& key, const std::string& expected, const nlohmann::json& v) {
  throw Error("FastFinetune " + key + ": expected " + expected + ", got " + v.dump());
}

bool boolean(const std::string& key, const nlohmann::json& v) {
  if (!v.is_boolean()) bad(key, "true or false", v);
  return v.get<bool>();
}

double number(const std::string& key, const nlohmann::json& v) {
  if (!v.is_number()) bad(key, "a number", v);
  return v.get<double>();
}

// A whole number at least `least` (Quark writes some as floats: DataSize 1e9).
int64_t whole(const std::string& key, const nlohmann::json& v, int64_t least) {
  if (!v.is_number() || v.get<double>() != static_cast<double>(static_cast<int64_t>(v.get<double>())) ||
      v.get<double>() < static_cast<double>(least))
    bad(key, "a whole number of at least " + std::to_string(least), v);
  return static_cast<int64_t>(v.get<double>());
}

std::string text(const std::string& key, const nlohmann::json& v) {
  if (!v.is_string()) bad(key, "a string", v);
  return v.get<std::string>();
}

// A switch whose `true` belongs to a part not built: false is the only value that works.
void only_false(const std::string& key, const nlohmann::json& v, const std::string& feature) {
  if (boolean(key, v)) throw unsupported("FastFinetune " + key + " true: " + feature + " is not built yet");
}

}  // namespace

void apply_fast_finetune(FastFinetune& f, const nlohmann::json& value) {
  if (!value.is_object()) throw Error("FastFinetune must be a JSON object of Quark's keys, got " + value.dump());
  f.given = true;
  for (const auto& [key, v] : value.items()) {
    if (key == "OptimAlgorithm") {
      std::string a = text(key, v);
      if (a != "adaround" && a != "adaquant") bad(key, "\"adaround\" or \"adaquant\"", v);
      f.adaquant = a == "adaquant";
    } else if (key == "OptimDevice" || key == "InferDevice") {
      if (text(key, v) != "cpu")
        throw Error("FastFinetune " + key + " " + v.dump() + ": onnxptq trains and infers on the CPU (\"cpu\")");
    } else if (key == "FixedSeed") {
      f.fixed_seed = static_cast<uint64_t>(whole(key, v, 0));
    } else if (key == "DataSize") {
      f.data_size = static_cast<size_t>(whole(key, v, 1));
    } else if (key == "BatchSize") {
      f.batch_size = static_cast<size_t>(whole(key, v, 1));
    } else if (key == "NumBatches") {
      f.num_batches = static_cast<size_t>(whole(key, v, 1));
    } else if (key == "NumIterations") {
      f.num_iterations = static_cast<int>(whole(key, v, 0));
    } else if (key == "LearningRate") {
      if (!(number(key, v) > 0)) bad(key, "a positive number", v);
      f.learning_rate = v.get<double>();
    } else if (key == "EarlyStop") {
      f.early_stop = boolean(key, v);
    } else if (key == "LRAdjust") {
      if (v.is_null() || (v.is_array() && v.empty())) {
        f.lr_adjust.reset();
      } else {
        if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number() || !(v[1].get<double>() > 0))
          bad(key, "[loss threshold, learning rate]", v);
        f.lr_adjust = std::pair{v[0].get<double>(), v[1].get<double>()};
      }
    } else if (key == "TargetOpType") {
      if (!v.is_array()) bad(key, "a list of op types", v);
      f.target_op_types.clear();
      for (const auto& op : v) {
        std::string name = text(key, op);
        static const std::set<std::string> trainable = {"Conv",   "ConvTranspose",         "Gemm",
                                                        "MatMul", "InstanceNormalization", "LayerNormalization"};
        if (!trainable.count(name))
          throw Error("FastFinetune TargetOpType: " + name +
                      " is not trained (Conv, ConvTranspose, Gemm, MatMul, InstanceNormalization, LayerNormalization)");
        f.target_op_types.push_back(name);
      }
    } else if (key == "UpdateBias") {
      f.update_bias = boolean(key, v);
    } else if (key == "DropRatio") {
      f.drop_ratio = number(key, v);
    } else if (key == "LogPeriod") {
      f.log_period = static_cast<int>(whole(key, v, 1));
    } else if (key == "RegParam") {
      if (!(number(key, v) >= 0)) bad(key, "a number of at least 0", v);
      f.reg_param = v.get<double>();
    } else if (key == "BetaRange") {
      if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number()) bad(key, "[start, end]", v);
      f.beta_range = {v[0].get<double>(), v[1].get<double>()};
    } else if (key == "WarmStart") {
      double w = number(key, v);
      if (!(w >= 0 && w < 1)) bad(key, "a share in [0, 1)", v);
      f.warm_start = w;
    } else if (key == "Parallel") {
      f.parallel = boolean(key, v);
    } else if (key == "MemOptLevel") {
      int64_t level = whole(key, v, 0);
      if (level > 2) bad(key, "0, 1 or 2", v);
      f.mem_opt_level = static_cast<int>(level);
    } else if (key == "SelectiveUpdate") {
      f.selective_update = boolean(key, v);
    } else if (key == "OutputQDQ") {
      f.output_qdq = boolean(key, v);
    } else if (key == "DynamicBatch") {
      // Quark runs the samples through the model as one concatenated batch; the result is the
      // same as one at a time, which is how onnxptq's workers run them.
      only_false(key, v, "running the samples through the model as one concatenated batch (DynamicBatch)");
    } else if (key == "SelectMaxMemLayer") {
      f.select_max_mem_layer = boolean(key, v);
    } else if (key == "PinMemory" || key == "UseGDS") {
      if (boolean(key, v))
        throw unsupported("FastFinetune " + key + " true: a CUDA data path, and onnxptq trains on the CPU (OptimDevice cpu)");
    } else if (key == "OutputIndex") {
      f.output_index = static_cast<size_t>(whole(key, v, 0));
    } else if (key == "NumWorkers") {
      // Quark's DataLoader workers for MemOptLevel 2; here samples are read back as a batch needs them.
      if (whole(key, v, 1) != 1)
        throw Error("FastFinetune NumWorkers: onnxptq reads MemOptLevel 2's files in the training thread (1)");
    } else if (key == "RefModelPath") {
      f.ref_model_path = v.is_null() ? std::string() : text(key, v);
    } else if (key == "CacheDir") {
      f.cache_dir = v.is_null() ? std::string() : text(key, v);
    } else {
      throw Error("FastFinetune: unknown key '" + key + "'");
    }
  }
}

}  // namespace onnxptq::quant
