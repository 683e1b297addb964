#include "accuracy/target_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>

#include "engine/session.h"
#include "finetune/fast_finetune.h"
#include "ir/file_io.h"
#include "onnxptq/error.h"
#include "quant/overrides.h"
#include "quant/presets.h"
#include "quant/simulate.h"
#include "quant/tensor_quant.h"

namespace onnxptq::accuracy {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string number(double v) {
  std::ostringstream out;
  out << std::setprecision(6) << v;
  return out.str();
}

bool is_weighted(const std::string& op_type) {
  return op_type == "Conv" || op_type == "ConvTranspose" || op_type == "Gemm" || op_type == "MatMul";
}

void check_target(const SearchOptions& o) {
  const AccuracyTarget& t = o.target;
  auto non_negative = [](const char* what, std::optional<double> v) {
    if (v && !(std::isfinite(*v) && *v >= 0))
      throw Error(std::string(what) + " must be a number of at least 0, got " + number(*v));
  };
  non_negative("max_loss", t.max_loss);
  non_negative("max_relative_loss", t.max_relative_loss);
  if (t.evaluate) {
    if (t.min_sqnr) throw Error("min_sqnr is the built-in metric's target: with an evaluate function, give max_loss or max_relative_loss");
    if (t.max_loss.has_value() == t.max_relative_loss.has_value())
      throw Error("the accuracy target needs exactly one of max_loss and max_relative_loss");
    if (o.work_dir.empty()) throw Error("the accuracy target search needs a folder for candidate models (work_dir)");
  } else {
    if (t.max_loss || t.max_relative_loss)
      throw Error("max_loss and max_relative_loss need an evaluate command or function (the user's metric); "
                  "the built-in metric, the output SQNR, takes min_sqnr");
    if (!t.min_sqnr) throw Error("the accuracy target needs min_sqnr (dB) for the built-in metric, or an evaluate command");
    if (!std::isfinite(*t.min_sqnr)) throw Error("min_sqnr must be a finite number of dB");
  }
}

size_t count_samples(DataReader& reader) {
  if (std::optional<size_t> n = reader.size()) return *n;
  if (!reader.can_rewind())
    throw Error(reader.describe() + " cannot start over, and the accuracy target search reads it many times");
  reader.rewind();
  size_t n = 0;
  while (reader.next()) ++n;
  reader.rewind();
  return n;
}

// What a recipe shares with other trials: its prepared float model and its calibrated ranges.
struct Recipe {
  std::optional<ir::Model> prepared;
  quant::RangeCache ranges;
};

class Search {
 public:
  Search(const ir::Model& model, DataReader& reader, const quant::QuantConfig& base, const SearchOptions& o,
         const std::function<void(const std::string&)>& log)
      : model_(model), reader_(reader), base_(base), o_(o), log_(log) {}

  SearchResult run() {
    check_target(o_);
    quant::check_config(base_);
    if (o_.fallback_type && *o_.fallback_type)  // the format takes the type: said now, not after the recipes
      quant::check_config(with_fallback(base_, {"(a node falling back)"}, *o_.fallback_type));
    start_ = Clock::now();
    r_.lower_is_better = o_.target.evaluate && o_.target.lower_is_better;
    split_data();
    baseline();
    if (!recipes() && !stopped_) fallback();
    if (r_.stop_reason.empty()) r_.stop_reason = r_.met ? "the target is met" : "no trial left to try";
    r_.seconds = seconds_since(start_);
    return std::move(r_);
  }

 private:
  void say(const std::string& line) const {
    if (log_) log_(line);
  }

  // The built-in metric measures on samples held out of calibration (the last ones).
  void split_data() {
    if (o_.target.evaluate) return;
    size_t n = count_samples(reader_);
    if (n < 2)
      throw Error("the built-in metric needs at least 2 calibration samples (one to calibrate on, one to measure on); " +
                  reader_.describe() + " has " + std::to_string(n));
    size_t held = o_.held_out ? o_.held_out : std::clamp<size_t>(n / 4, 1, 32);
    if (held >= n)
      throw Error("holding out " + std::to_string(held) + " of " + std::to_string(n) +
                  " samples leaves none to calibrate on");
    calib_part_ = calib::make_subset_reader(reader_, 0, n - held);
    measure_part_ = calib::make_subset_reader(reader_, n - held, n);
    say("accuracy target: calibrating on " + std::to_string(n - held) + " samples, measuring on the last " +
        std::to_string(held));
  }
  DataReader& calibration_data() { return calib_part_ ? *calib_part_ : reader_; }

  void baseline() {
    const Recipe& recipe = recipe_for(base_);
    const ir::Model& prepared = recipe.prepared ? *recipe.prepared : model_;
    const AccuracyTarget& t = o_.target;
    if (t.evaluate) {
      fs::path path = o_.float_model_path;
      if (path.empty()) {
        path = o_.work_dir / "float.onnx";
        ir::save_model(model_, path);
      }
      r_.float_metric = t.evaluate(path, "the float model");
      if (o_.float_model_path.empty()) remove_model_file(path);
      if (!std::isfinite(r_.float_metric))
        throw Error("the float model's metric is " + number(r_.float_metric) + ": the target cannot be set from it");
      double slack = t.max_loss ? *t.max_loss : std::abs(r_.float_metric) * *t.max_relative_loss;
      r_.required = r_.lower_is_better ? r_.float_metric + slack : r_.float_metric - slack;
      // The fallback order is measured on the first calibration samples.
      sensitivity_set_ = prepared_reference_outputs(prepared, calibration_data(), base_, o_.output_index,
                                                    o_.sensitivity_samples, o_.threads);
    } else {
      r_.float_metric = std::numeric_limits<double>::infinity();
      r_.required = *t.min_sqnr;
      measure_ = prepared_reference_outputs(prepared, *measure_part_, base_, o_.output_index, 0, o_.threads);
      sensitivity_set_ = measure_;
      if (sensitivity_set_.feeds.size() > o_.sensitivity_samples) {
        sensitivity_set_.feeds.resize(o_.sensitivity_samples);
        sensitivity_set_.outputs.resize(o_.sensitivity_samples);
      }
    }
    say("accuracy target: float model " + number(r_.float_metric) + ", required " + (r_.lower_is_better ? "<= " : ">= ") +
        number(r_.required));
  }

  bool better_metric(double a, double b) const {
    if (std::isnan(b)) return !std::isnan(a);
    return r_.lower_is_better ? a < b : a > b;
  }
  bool meets(double metric) const {
    return !std::isnan(metric) && (r_.lower_is_better ? metric <= r_.required : metric >= r_.required);
  }

  Recipe& recipe_for(const quant::QuantConfig& config) {
    std::string key = std::string(config.include_cle ? "cle " : "") + calib::method_name(config.calibrate_method);
    auto it = recipes_.find(key);
    if (it != recipes_.end()) return it->second;
    Recipe recipe;
    auto prepared = cle_prepared_.find(config.include_cle);
    if (prepared == cle_prepared_.end()) {
      DataReader& data = calibration_data();
      data.rewind();
      prepared = cle_prepared_.emplace(config.include_cle, quant::prepare_float_model(model_, data, config)).first;
    }
    if (prepared->second) recipe.prepared = ir::clone_model(*prepared->second);
    return recipes_.emplace(key, std::move(recipe)).first->second;
  }

  bool out_of_budget() {
    if (o_.max_trials && r_.trials.size() >= o_.max_trials) {
      r_.stop_reason = "the trial limit (" + std::to_string(o_.max_trials) + ") is reached";
      stopped_ = true;
    } else if (o_.time_limit > 0 && seconds_since(start_) >= o_.time_limit) {
      r_.stop_reason = "the time limit (" + number(o_.time_limit) + " s) is reached";
      stopped_ = true;
    }
    return stopped_;
  }

  static void remove_model_file(const fs::path& path) {
    std::error_code ignored;
    fs::remove(path, ignored);
    fs::remove(fs::path(path.string() + ".data"), ignored);
  }

  double score(const quant::QuantizeResult& q, const std::string& trial) {
    if (o_.target.evaluate) {
      fs::path path = o_.work_dir / (trial.substr(trial.rfind(' ') + 1) + ".onnx");
      ir::save_model(q.model, path);
      try {
        double m = o_.target.evaluate(path, trial);
        remove_model_file(path);
        return m;
      } catch (...) {
        remove_model_file(path);
        throw;
      }
    }
    engine::SessionOptions so;
    so.threads = o_.threads;
    engine::Session session(q.model, so);
    return compare_to_reference(measure_, [&](const Feed& feed) { return session.run(feed); }, trial + ", held-out ")
        .sqnr_db;
  }

  // Quantizes with `config` (`fallback` fallen back to `fallback_type`) and scores the model;
  // nullopt when the budget is spent.
  std::optional<Trial> trial(const std::string& phase, const std::string& change, const quant::QuantConfig& config,
                             std::vector<std::string> fallback = {}, std::string fallback_type = "") {
    if (stopped_ || out_of_budget()) return std::nullopt;
    auto start = Clock::now();
    Trial t{.index = r_.trials.size() + 1,
            .phase = phase,
            .change = change,
            .fallback = std::move(fallback),
            .fallback_type = std::move(fallback_type)};
    std::string name = "trial " + std::to_string(t.index);
    Recipe& recipe = recipe_for(config);
    quant::QuantizeResult q;
    if (recipe.prepared) q.prepared = ir::clone_model(*recipe.prepared);
    DataReader& data = calibration_data();
    data.rewind();
    try {
      quant::quantize_prepared(q, model_, data, config, {}, &recipe.ranges, true,
                               finetune::post_quantization_refiner(config));
    } catch (const Error& e) {
      throw Error(name + " (" + change + "): " + e.what(), e.kind());
    }
    t.metric = score(q, name);
    t.meets = meets(t.metric);
    t.seconds = seconds_since(start);
    say(name + " (" + phase + ": " + change + "): " + number(t.metric) + (t.meets ? ", meets" : ", misses") +
        " the target (" + (r_.lower_is_better ? "<= " : ">= ") + number(r_.required) + "), " +
        number(std::round(t.seconds * 10) / 10) + " s");
    if (!has_best_ || better(t, r_.trials[r_.best_trial - 1])) {
      r_.best = std::move(q);
      r_.config = config;
      r_.best_trial = t.index;
      r_.met = t.meets;
      has_best_ = true;
    }
    r_.trials.push_back(t);
    if (base_.calib.progress) base_.calib.progress({"accuracy search", "trials", r_.trials.size(), o_.max_trials});
    return t;
  }

  // Among trials that meet the target, fewer fallbacks first, then the metric; else the metric.
  bool better(const Trial& a, const Trial& b) const {
    if (a.meets != b.meets) return a.meets;
    if (a.meets && a.fallback.size() != b.fallback.size()) return a.fallback.size() < b.fallback.size();
    return better_metric(a.metric, b.metric);
  }

  // Whole-model recipes, each kept when it improves the metric. True when one meets the target.
  bool recipes() {
    quant::QuantConfig current = base_;
    std::optional<Trial> t = trial("recipe", "as configured", current);
    if (!t) return false;
    double current_metric = t->metric;
    bool met = t->meets;
    if (met && o_.stop_at_first_pass) return stop_first();

    std::vector<std::pair<std::string, std::function<void(quant::QuantConfig&)>>> changes;
    // A block format (BFP, MX) takes its scales from each block, not from a range: per-channel
    // weights and the calibration method change nothing there, and their trials are not run.
    if (!base_.per_channel && !quant::quant_type_is_block(base_.weight_type))
      changes.emplace_back("per-channel weights", [](quant::QuantConfig& c) { c.per_channel = true; });
    std::vector<calib::Method> methods =
        base_.power_of_two()
            ? std::vector<calib::Method>{calib::Method::MinMSE, calib::Method::NonOverflow}
            : std::vector<calib::Method>{calib::Method::MinMax, calib::Method::Percentile, calib::Method::Entropy};
    for (calib::Method m : methods)
      if (m != base_.calibrate_method && !quant::quant_type_is_block(base_.activation_type))
        changes.emplace_back(std::string("calibrate_method ") + calib::method_name(m),
                             [m](quant::QuantConfig& c) { c.calibrate_method = m; });
    // OCP MX with float elements: the floor rule's shared scale clips block maxima past the
    // element's largest value; onnxptq's scale of least error per block does not (docs/formats.md).
    const bool mx = base_.activation_type == quant::kQMx || base_.weight_type == quant::kQMx;
    if (mx && base_.mx.element_dtype.starts_with("fp") && base_.mx.min_error_scale == 0)
      changes.emplace_back("MX min_error_scale", [](quant::QuantConfig& c) { c.mx.min_error_scale = 1; });
    changes.emplace_back(base_.include_cle ? "include_cle off" : "include_cle on",
                         [on = !base_.include_cle](quant::QuantConfig& c) { c.include_cle = on; });
    // Bias correction (Nagel et al. 2019, section 4.2): where the error is a mean shift the layers
    // after amplify, as block formats leave it, it recovers most of the loss, in a fraction of fast
    // finetune's time. Quark's order: before fast finetune.
    if (!base_.bias_correction)
      changes.emplace_back("BiasCorrection", [](quant::QuantConfig& c) { c.bias_correction = true; });
    // Last, the slowest: minutes where the others take seconds. AdaRound chooses between integers;
    // a float16/bfloat16 or block-format weight trains with AdaQuant (Quark's *_ADAQUANT presets).
    if (o_.finetune_recipe && !base_.include_fast_ft) {
      const bool adaquant =
          quant::quant_type_is_float(base_.weight_type) || quant::quant_type_is_block(base_.weight_type);
      changes.emplace_back(adaquant ? "AdaQuant fast finetune" : "AdaRound fast finetune",
                           [adaquant](quant::QuantConfig& c) {
                             c.include_fast_ft = true;
                             c.fast_finetune = quant::FastFinetune{};
                             quant::apply_fast_finetune(c.fast_finetune, quant::default_finetune_params(adaquant));
                           });
    }

    for (const auto& [what, apply] : changes) {
      quant::QuantConfig config = current;
      apply(config);
      try {
        quant::check_config(config);
      } catch (const Error&) {
        continue;  // not allowed with this format or path
      }
      t = trial("recipe", what, config);
      if (!t) return met;
      met = met || t->meets;
      if (t->meets && o_.stop_at_first_pass) return stop_first();
      if (better_metric(t->metric, current_metric)) {
        current = config;
        current_metric = t->metric;
      }
    }
    if (met) r_.stop_reason = "a whole-model recipe meets the target";
    return met;
  }

  bool stop_first() {
    r_.stop_reason = "the first model that meets the target (stop at first pass)";
    stopped_ = true;
    return true;
  }

  // `config` with `nodes` fallen back to `type`: left float, or at that precision (activations
  // and weights; the NPU's weights stay int8).
  static quant::QuantConfig with_fallback(const quant::QuantConfig& config, const std::vector<std::string>& nodes,
                                          const FallbackType& type) {
    quant::QuantConfig c = config;
    if (!type) {
      c.nodes_to_exclude.insert(c.nodes_to_exclude.end(), nodes.begin(), nodes.end());
      return c;
    }
    quant::NodePrecision p;
    p.activation = *type;
    p.weight = c.enable_dpu ? c.weight_type : *type;
    for (const std::string& n : nodes) c.node_precision[n] = p;
    return c;
  }

  // The fallback candidates in the order they fall back: quantized nodes that make an error and
  // that the configuration can name (enable_dpu's later passes make nodes of their own).
  std::vector<std::string> fallback_order(const quant::QuantConfig& recipe) {
    const quant::QuantizeResult& best = r_.best;
    auto start = Clock::now();
    Recipe& prepared = recipe_for(recipe);
    std::set<std::string> nameable;
    for (const auto& n : (prepared.prepared ? *prepared.prepared : model_).graph->nodes()) nameable.insert(n->name);
    // The left-float measures are a whole-model quantization each, one per node: ranked without
    // the recipe's bias correction and fast finetune, which would run again for every node (337
    // bias corrections for PP-OCRv4's recognizer); the trials keep them.
    quant::QuantConfig ranking = recipe;
    ranking.bias_correction = false;
    ranking.include_fast_ft = false;
    LeftFloatPlan left_float;
    if (o_.fallback_order == FallbackOrder::LeftFloat)
      left_float = left_float_plans(model_, prepared.prepared, calibration_data(), ranking, prepared.ranges);
    std::vector<NodeSensitivity> ranked = analyze_nodes(best.prepared ? *best.prepared : model_, best.plan, recipe,
                                                        sensitivity_set_, o_.threads, /*split=*/false, left_float);
    std::erase_if(ranked, [&](const NodeSensitivity& s) {
      return !std::isfinite(s.alone.sqnr_db) || !nameable.count(s.node);
    });
    if (left_float)  // most recovered first; nodes whose fallback recovers nothing keep their place after
      std::stable_sort(ranked.begin(), ranked.end(), [](const NodeSensitivity& a, const NodeSensitivity& b) {
        double x = a.left_float ? a.left_float->sqnr_db : -HUGE_VAL, y = b.left_float ? b.left_float->sqnr_db : -HUGE_VAL;
        return (std::isnan(x) ? -HUGE_VAL : x) > (std::isnan(y) ? -HUGE_VAL : y);
      });
    r_.sensitivity = ranked;
    std::vector<std::string> order;
    for (const NodeSensitivity& s : ranked) order.push_back(s.node);
    say("sensitivity of " + std::to_string(best.plan.quantized_nodes.size()) + " quantized nodes (" +
        (left_float ? "left float" : "alone") + "): " + number(std::round(seconds_since(start) * 10) / 10) + " s; " +
        std::to_string(order.size()) + " make an error" + (order.empty() ? "" : ", first to fall back " + order[0]));
    return order;
  }

  // Nodes fall back from the best recipe, in sensitivity order: the shortest prefix meeting the
  // target (bisection), then reverts of the fallbacks it does not need. A wider type that misses
  // even with every candidate fallen back gives way to float.
  void fallback() {
    const quant::QuantConfig recipe = r_.config;
    std::vector<std::string> order = fallback_order(recipe);
    if (order.empty()) {
      r_.stop_reason = "no quantized node makes an error to fall back";
      return;
    }
    FallbackType type = o_.fallback_type ? *o_.fallback_type : default_fallback_type(recipe);
    if (!fall_back_to(type, recipe, order) && type && !stopped_) {
      say("accuracy target: " + std::string(quant::precision_name(*type)) + " fallback misses; falling back to float");
      fall_back_to(std::nullopt, recipe, order);
    }
  }

  // False when even every node of `order` at `type` misses.
  bool fall_back_to(const FallbackType& type, const quant::QuantConfig& recipe, const std::vector<std::string>& order) {
    const std::string in = type ? std::string(" in ") + quant::precision_name(*type) : std::string(" in float");
    auto prefix = [&](size_t k) { return std::vector<std::string>(order.begin(), order.begin() + k); };
    auto fall_back = [&](const std::string& phase, const std::string& change, const std::vector<std::string>& nodes) {
      return trial(phase, change, with_fallback(recipe, nodes, type), nodes,
                   type ? quant::precision_name(*type) : "float");
    };

    size_t lo = 0, hi = order.size();  // prefix lo misses (the recipe); prefix hi is to be tried
    std::optional<Trial> t = fall_back("fallback", "all " + std::to_string(hi) + " nodes" + in, prefix(hi));
    if (!t) return true;
    if (!t->meets) {
      r_.stop_reason = "the target is missed even with every node that makes an error" + in;
      return false;
    }
    if (o_.stop_at_first_pass) {
      stop_first();
      return true;
    }
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      t = fall_back("fallback", "the first " + std::to_string(mid) + " nodes" + in, prefix(mid));
      if (!t) return true;
      (t->meets ? hi : lo) = mid;
    }
    // Reverts, by groups: a group is quantized again at once when the target holds without it,
    // else its halves are tried. Conv, Gemm and MatMul nodes first (a float one costs the most),
    // each kind least sensitive first (the likeliest to be unneeded).
    std::vector<std::string> chosen = prefix(hi);
    std::vector<std::string> candidates(chosen.rbegin(), chosen.rend());
    std::map<std::string, std::string> op_of;
    for (const NodeSensitivity& s : r_.sensitivity) op_of[s.node] = s.op_type;
    std::stable_partition(candidates.begin(), candidates.end(),
                          [&](const std::string& n) { return is_weighted(op_of[n]); });
    std::function<bool(std::span<const std::string>)> revert = [&](std::span<const std::string> group) {
      std::vector<std::string> without;
      for (const std::string& n : chosen)
        if (std::find(group.begin(), group.end(), n) == group.end()) without.push_back(n);
      if (!without.empty()) {  // with none left in float, the recipe: known to miss
        std::string what = group.size() == 1 ? group[0] : std::to_string(group.size()) + " nodes";
        t = fall_back("revert", what + " back to the recipe's precision", without);
        if (!t) return false;
        if (t->meets) {
          chosen = std::move(without);
          return true;
        }
      }
      if (group.size() == 1) return true;
      size_t half = group.size() / 2;
      return revert(group.first(half)) && revert(group.subspan(half));
    };
    revert(candidates);
    if (!stopped_)
      r_.stop_reason = "the target is met with " + std::to_string(chosen.size()) + " node" +
                       (chosen.size() == 1 ? "" : "s") + in;
    return true;
  }

  const ir::Model& model_;
  DataReader& reader_;
  const quant::QuantConfig& base_;
  const SearchOptions& o_;
  std::function<void(const std::string&)> log_;
  Clock::time_point start_;
  std::unique_ptr<DataReader> calib_part_, measure_part_;
  ReferenceOutputs measure_, sensitivity_set_;
  std::map<bool, std::optional<ir::Model>> cle_prepared_;  // by include_cle
  std::map<std::string, Recipe> recipes_;                  // by include_cle and calibration method
  SearchResult r_;
  bool has_best_ = false;
  bool stopped_ = false;
};

}  // namespace

FallbackType parse_fallback_type(const std::string& name) {
  if (name == "float") return std::nullopt;
  if (name == "int16") return ir::DataType::Int16;
  if (name == "bfloat16") return ir::DataType::BFloat16;
  throw Error("fallback type '" + name + "': expected float, int16 or bfloat16");
}

FallbackType default_fallback_type(const quant::QuantConfig& config) {
  return config.enable_dpu ? FallbackType(ir::DataType::Int16) : std::nullopt;
}

FallbackOrder parse_fallback_order(const std::string& name) {
  if (name == "left-float") return FallbackOrder::LeftFloat;
  if (name == "alone") return FallbackOrder::Alone;
  throw Error("fallback order '" + name + "': expected left-float or alone");
}

SearchResult search_accuracy_target(const ir::Model& model, DataReader& reader, const quant::QuantConfig& base,
                                    const SearchOptions& options, const std::function<void(const std::string&)>& log) {
  return Search(model, reader, base, options, log).run();
}

std::string search_summary(const SearchResult& r) {
  std::ostringstream out;
  const Trial& best = r.trials.at(r.best_trial - 1);
  out << (r.met ? "accuracy target met" : "accuracy target missed") << " by trial " << best.index << " of "
      << r.trials.size() << " (" << best.phase << ": " << best.change << "): " << number(best.metric) << ", required "
      << (r.lower_is_better ? "<= " : ">= ") << number(r.required);
  if (!r.met) out << ", missed by " << number(std::abs(best.metric - r.required));
  out << ", float model " << number(r.float_metric) << "; " << best.fallback.size() << " node"
      << (best.fallback.size() == 1 ? "" : "s") << " in float; " << r.stop_reason;
  return out.str();
}

nlohmann::json search_report(const SearchResult& r) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["float_metric"] = num(r.float_metric);
  j["required"] = num(r.required);
  j["lower_is_better"] = r.lower_is_better;
  j["met"] = r.met;
  j["best_trial"] = r.best_trial;
  j["stop_reason"] = r.stop_reason;
  j["seconds"] = r.seconds;
  j["trials"] = nlohmann::json::array();
  for (const Trial& t : r.trials)
    j["trials"].push_back({{"index", t.index},
                           {"phase", t.phase},
                           {"change", t.change},
                           {"metric", num(t.metric)},
                           {"meets", t.meets},
                           {"seconds", t.seconds},
                           {"fallback", t.fallback},
                           {"fallback_type", t.fallback_type}});
  j["sensitivity"] = nlohmann::json::array();
  for (const NodeSensitivity& s : r.sensitivity)
    j["sensitivity"].push_back({{"node", s.node},
                                {"op_type", s.op_type},
                                {"alone_db", num(s.alone.sqnr_db)},
                                {"left_float_db", s.left_float ? num(s.left_float->sqnr_db) : nlohmann::json(nullptr)}});
  // The precision of every node of the model quantized: the types of its quantized inputs.
  const ir::Model& model = r.best.prepared ? *r.best.prepared : r.best.model;
  const quant::Plan& plan = r.best.plan;
  std::set<std::string> quantized(plan.quantized_nodes.begin(), plan.quantized_nodes.end());
  nlohmann::json precision = nlohmann::json::object();
  size_t weighted = 0, weighted_quantized = 0, eight_bit = 0;
  for (const auto& node : model.graph->nodes()) {
    bool q = quantized.count(node->name) > 0;
    if (!q) {
      precision[node->name] = "float";
      weighted += is_weighted(node->op_type);
      continue;
    }
    nlohmann::json types = nlohmann::json::object();
    bool eight = true;
    for (const ir::Value* v : node->inputs()) {
      const quant::TensorPlan* t = v ? plan.find(v->name()) : nullptr;
      if (!t) continue;
      const char* role = t->role == quant::Role::Weight ? "weight" : t->role == quant::Role::Bias ? "bias" : "activation";
      // What the node reads: the tensor's type, or what it is converted to for this node.
      ir::DataType type = plan.provider(v->name()).type;
      if (t->convert && (t->convert->recv_nodes.empty() || t->convert->recv_nodes.count(node->name)))
        type = t->convert->type;
      if (t->role != quant::Role::Bias) eight = eight && ir::data_type_bits(type) == 8;
      if (!types.contains(role)) types[role] = quant::quant_type_name(type);
    }
    precision[node->name] = types;
    if (is_weighted(node->op_type)) {
      ++weighted;
      ++weighted_quantized;
      eight_bit += eight;
    }
  }
  j["node_precision"] = precision;
  j["weighted_nodes"] = {{"quantized", weighted_quantized}, {"eight_bit", eight_bit}, {"total", weighted}};
  return j;
}

}  // namespace onnxptq::accuracy
