// Fast finetune of a whole plan: the staged runs give what whole runs give, and finetuning a
// built two-layer model lowers its error on samples it was not trained on, the scales frozen.
#include "finetune/fast_finetune.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/session.h"
#include "finetune/staged_run.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/quantize.h"
#include "quant/simulate.h"
#include "support/model_run.h"
#include "support/pass_check.h"

namespace onnxptq::finetune {
namespace {

// x[2,16] -> Gemm(w1, b1) -> h -> Relu -> r, then r -> MatMul(w2) -> a and r -> MatMul(w3) -> b,
// y = a + b: three trained layers, and a value (r) two parts read, which the staged runs keep.
ir::Model mlp() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = testing::add_float_value(g, "x", {2, 16});
  g.add_input(x);
  ir::Value* w1 = testing::add_random_initializer(g, "w1", {16, 32}, 1);
  ir::Value* b1 = testing::add_random_initializer(g, "b1", {32}, 2);
  ir::Value* w2 = testing::add_random_initializer(g, "w2", {32, 8}, 3);
  ir::Value* w3 = testing::add_random_initializer(g, "w3", {32, 8}, 4);
  ir::Value *h = g.add_value("h"), *r = g.add_value("r"), *a = g.add_value("a"), *b = g.add_value("b");
  ir::Value* y = g.add_value("y");
  g.add_node("Gemm", {x, w1, b1}, {h}, "gemm");
  g.add_node("Relu", {h}, {r}, "relu");
  g.add_node("MatMul", {r, w2}, {a}, "matmul_a");
  g.add_node("MatMul", {r, w3}, {b}, "matmul_b");
  g.add_node("Add", {a, b}, {y}, "add");
  g.add_output(y);
  return m;
}

// `count` seeded samples of x, uniform in [-1, 1).
std::vector<Feed> feeds(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<Feed> out;
  for (size_t i = 0; i < count; ++i) {
    std::vector<float> v(32);
    for (float& x : v) x = d(rng);
    out.push_back({{"x", ir::Tensor::from_values<float>({2, 16}, v)}});
  }
  return out;
}

using FeedReader = testing::FeedListReader;

struct Quantized {
  Quantized() {
    config.optimize_model = false;
    config.calibrate_method = calib::Method::MinMax;
    config.calib.threads = 1;
    // Weights in [-1, 1) on a grid of 1/8 (TensorQuantOverrides' fixed scale): how they round
    // matters more than the activations' quantization.
    for (const char* w : {"w1", "w2", "w3"}) {
      config.tensor_overrides[w].scale = {0.125};
      config.tensor_overrides[w].zero_point = {0};
    }
    FeedReader reader(feeds(16, 100));
    plan = quant::quantize_static(model, reader, config).plan;
  }
  // Summed squared error of the simulated output against the float model's on `samples`.
  double output_error(const quant::Plan& p, const std::vector<Feed>& samples) const {
    quant::Simulation simulation(model, p, config, 1);
    engine::Session float_model(model);
    double sum = 0;
    for (const Feed& f : samples) {
      ir::Tensor q = simulation.run(f)[0], r = float_model.run(f)[0];
      for (size_t i = 0; i < q.values<float>().size(); ++i) {
        double d = static_cast<double>(q.values<float>()[i]) - r.values<float>()[i];
        sum += d * d;
      }
    }
    return sum;
  }
  ir::Model model = mlp();
  quant::QuantConfig config;
  quant::Plan plan;
};

TEST(StagedRun, StagesGiveWhatAWholeRunGives) {
  Quantized q;
  std::vector<Feed> samples = feeds(3, 500);
  StagedRun staged(
      q.model, stores_of(samples),
      [&](const ir::Model& part) -> StagedRun::PartRunner {
        auto sim = std::make_shared<quant::Simulation>(part, quant::plan_within(q.plan, *part.graph), q.config, 1);
        return [sim](const Feed& f) { return sim->run(f); };
      },
      2);
  std::vector<SharedStore> first = staged.values({"x", "r"});
  std::vector<SharedStore> second = staged.values({"a", "y"});
  EXPECT_THROW(staged.values({"h"}), Error);  // computed by the first part, read by no later node
  quant::Simulation whole(q.model, q.plan, q.config, 1);
  for (size_t s = 0; s < samples.size(); ++s) {
    std::map<std::string, ir::Tensor> seen;
    engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) { seen[name] = t; };
    std::vector<ir::Tensor> out = whole.run(samples[s], &observe);
    EXPECT_EQ(first[1]->get(s).values<float>()[0], seen.at("r").values<float>()[0]);
    const ir::Tensor y = second[1]->get(s), x = first[0]->get(s);
    for (size_t i = 0; i < out[0].values<float>().size(); ++i)
      ASSERT_EQ(y.values<float>()[i], out[0].values<float>()[i]) << s << " " << i;
    EXPECT_TRUE(
        std::equal(x.values<float>().begin(), x.values<float>().end(), samples[s].at("x").values<float>().begin()));
  }
}

TEST(FastFinetune, LowersTheErrorOnOtherSamplesWithScalesFrozen) {
  for (Algorithm algorithm : {Algorithm::AdaRound, Algorithm::AdaQuant}) {
    Quantized q;
    quant::Plan plan = q.plan;
    FastFinetuneOptions o;
    o.train.algorithm = algorithm;
    o.train.iterations = 300;
    o.train.batch_size = 2;
    o.train.learning_rate = algorithm == Algorithm::AdaRound ? 0.1 : 1e-4;
    o.threads = 2;
    std::vector<std::string> lines;
    std::vector<quant::FinetunedLayer> reports = fast_finetune(q.model, plan, q.config, stores_of(feeds(32, 100)), o,
                                                               [&](const std::string& l) { lines.push_back(l); });
    ASSERT_EQ(reports.size(), 3u);
    EXPECT_EQ(lines.size(), 3u);
    EXPECT_EQ(reports[0].node, "gemm");
    EXPECT_EQ(reports[0].activation, "Relu");
    for (const quant::FinetunedLayer& r : reports) {
      EXPECT_TRUE(r.skipped.empty()) << r.node;
      EXPECT_TRUE(r.kept) << r.node;
      EXPECT_LT(r.loss_after, r.loss_before) << r.node;
    }
    for (const char* w : {"w1", "w2", "w3"}) {
      const quant::TensorPlan &before = *q.plan.find(w), &after = *plan.find(w);
      EXPECT_EQ(before.params[0].scale, after.params[0].scale) << w;
      EXPECT_EQ(before.params[0].zero_point, after.params[0].zero_point) << w;
      EXPECT_FALSE(std::equal(before.data->values<int8_t>().begin(), before.data->values<int8_t>().end(),
                              after.data->values<int8_t>().begin()))
          << w << ": the integers did not change";
    }
    std::vector<Feed> held_out = feeds(8, 900);
    double before = q.output_error(q.plan, held_out), after = q.output_error(plan, held_out);
    EXPECT_LT(after, 0.85 * before) << (algorithm == Algorithm::AdaRound ? "AdaRound" : "AdaQuant");
  }
}

// The whole pipeline: quantize_static with include_fast_ft runs the refiner after the parameters,
// and the report holds every layer.
TEST(FastFinetune, RunsInQuantizeStaticAndIsReported) {
  Quantized q;
  quant::QuantConfig c = q.config;
  c.include_fast_ft = true;
  quant::apply_extra_option(c, "FastFinetune", nlohmann::json::parse(R"({"NumIterations": 50, "BatchSize": 2})"));
  FeedReader reader(feeds(16, 100));
  EXPECT_THROW(quant::quantize_static(q.model, reader, c), Error);  // no refiner: not silently skipped
  reader.rewind();
  std::vector<std::string> lines;
  auto log = [&](const std::string& l) { lines.push_back(l); };
  quant::QuantizeResult r = quant::quantize_static(q.model, reader, c, log, post_quantization_refiner(c, log));
  ASSERT_EQ(r.finetuned.size(), 3u);
  EXPECT_EQ(r.finetuned[1].node, "matmul_a");
  EXPECT_EQ(r.finetuned[1].iterations, 50);
  EXPECT_TRUE(r.seconds.count("finetune"));
  nlohmann::json report = quant::report(q.model, r);
  ASSERT_EQ(report["fast_finetune"].size(), 3u);
  EXPECT_EQ(report["fast_finetune"][0]["node"], "gemm");
  EXPECT_TRUE(report["fast_finetune"][0].contains("loss_before"));
  EXPECT_NE(
      std::find_if(lines.begin(), lines.end(),
                   [](const std::string& l) { return l.rfind("fast finetune (AdaRound) on 16 samples", 0) == 0; }),
      lines.end());
  // The exported weights are the finetuned plan's.
  const ir::Value* w1 = r.model.graph->find_value("w1_quantized");
  ASSERT_NE(w1, nullptr);
  EXPECT_TRUE(std::equal(w1->initializer().values<int8_t>().begin(), w1->initializer().values<int8_t>().end(),
                         r.plan.find("w1")->data->values<int8_t>().begin()));
}

// The same seed, samples and threads give the same bytes: the mini-batches come from the seeded
// generator, and no sum depends on how work was split between the threads.
TEST(FastFinetune, SameSeedSameThreadsSameModelBytes) {
  for (const char* algorithm : {"adaround", "adaquant"}) {
    Quantized q;
    quant::QuantConfig c = q.config;
    c.include_fast_ft = true;
    c.calib.threads = 2;
    quant::apply_extra_option(c, "FastFinetune",
                              nlohmann::json{{"NumIterations", 100},
                                             {"BatchSize", 2},
                                             {"OptimAlgorithm", algorithm},
                                             {"LearningRate", std::string(algorithm) == "adaround" ? 0.1 : 1e-3},
                                             {"UpdateBias", true},
                                             {"DropRatio", 0.5}});
    std::vector<std::string> bytes;
    for (int run = 0; run < 2; ++run) {
      FeedReader reader(feeds(16, 100));
      quant::QuantizeResult r = quant::quantize_static(q.model, reader, c, {}, post_quantization_refiner(c));
      size_t kept = 0;
      for (const quant::FinetunedLayer& l : r.finetuned) kept += l.kept;
      EXPECT_GT(kept, 0u) << algorithm;  // something was trained, or the comparison proves nothing
      bytes.push_back(ir::serialize_model(r.model));
    }
    EXPECT_TRUE(bytes[0] == bytes[1]) << algorithm;
  }
}

// AdaRound for 50 iterations of batches of 2, on one thread.
FastFinetuneOptions short_run() {
  FastFinetuneOptions o;
  o.train.iterations = 50;
  o.train.batch_size = 2;
  o.threads = 1;
  return o;
}

// SelectiveUpdate keeps a layer only when the model's output gets closer to the float one: the
// distances reported fall with each layer kept, and a layer not kept leaves the plan as it was.
TEST(FastFinetune, SelectiveUpdateKeepsOnlyLayersThatBringTheOutputCloser) {
  Quantized q;
  quant::Plan plan = q.plan;
  FastFinetuneOptions o;
  o.train.iterations = 200;
  o.train.batch_size = 2;
  o.threads = 2;
  o.selective_update = true;
  std::vector<quant::FinetunedLayer> reports = fast_finetune(q.model, plan, q.config, stores_of(feeds(32, 100)), o);
  ASSERT_EQ(reports.size(), 3u);
  double current = reports[0].output_distance.value().first;
  size_t kept = 0;
  for (const quant::FinetunedLayer& r : reports) {
    if (!r.output_distance) continue;  // its reconstruction loss did not improve: not tried
    EXPECT_EQ(r.output_distance->first, current) << r.node;
    EXPECT_EQ(r.kept, r.output_distance->second < r.output_distance->first) << r.node;
    if (r.kept) current = r.output_distance->second;
    kept += r.kept;
  }
  EXPECT_GT(kept, 0u);
  // The final plan's distance is the last one kept, computed the same way.
  std::vector<Feed> samples = feeds(32, 100);
  engine::Session float_model(q.model);
  quant::Simulation simulation(q.model, plan, q.config, 1);
  double sum = 0;
  for (const Feed& f : samples) {
    ir::Tensor a = simulation.run(f)[0], b = float_model.run(f)[0];
    double squares = 0;
    for (size_t i = 0; i < a.values<float>().size(); ++i)
      squares += std::pow(static_cast<double>(a.values<float>()[i]) - b.values<float>()[i], 2);
    sum += std::sqrt(squares);
  }
  EXPECT_NEAR(sum / 32, current, 1e-9 * current);
  o.output_index = 1;
  EXPECT_THROW(fast_finetune(q.model, plan, q.config, stores_of(feeds(4, 100)), o), Error);  // one output only
}

// OutputQDQ: the loss is taken after each layer's output quantization: the first layer's loss
// before training is then the error of the simulated model's quantized Relu output, which the
// simulation computes on its own.
TEST(FastFinetune, OutputQdqMeasuresTheLossAfterTheOutputsQuantization) {
  Quantized q;
  FastFinetuneOptions o = short_run();
  o.output_qdq = true;
  quant::Plan plan = q.plan;
  std::vector<Feed> samples = feeds(16, 100);
  std::vector<quant::FinetunedLayer> reports = fast_finetune(q.model, plan, q.config, stores_of(samples), o);
  ASSERT_EQ(reports[0].activation, "Relu");
  quant::Simulation simulation(q.model, q.plan, q.config, 1);
  engine::Session float_model(q.model);
  double sum = 0, positions = 0;
  for (const Feed& f : samples) {
    ir::Tensor quantized, reference;
    engine::TensorObserver take_q = [&](const std::string& name, const ir::Tensor& t) {
      if (name == "r") quantized = t;
    };
    engine::TensorObserver take_f = [&](const std::string& name, const ir::Tensor& t) {
      if (name == "r") reference = t;
    };
    simulation.run(f, &take_q);
    float_model.run(f, {&take_f});
    for (size_t i = 0; i < quantized.values<float>().size(); ++i)
      sum += std::pow(static_cast<double>(quantized.values<float>()[i]) - reference.values<float>()[i], 2);
    positions += 2;  // [2, 32]: the squares summed over dim 1
  }
  EXPECT_NEAR(reports[0].loss_before, sum / positions, 1e-6 * reports[0].loss_before);
}

// RefModelPath: targets from another model with the same tensor names; the float model itself as
// the reference gives the same plan as no reference, and a tensor it lacks skips the layer.
TEST(FastFinetune, ReferenceModelGivesTheTargets) {
  Quantized q;
  FastFinetuneOptions o = short_run();
  quant::Plan without = q.plan, with = q.plan, renamed_plan = q.plan;
  fast_finetune(q.model, without, q.config, stores_of(feeds(8, 100)), o);
  ir::Model reference = mlp();
  fast_finetune(q.model, with, q.config, stores_of(feeds(8, 100)), o, {}, &reference);
  for (const char* w : {"w1", "w2", "w3"})
    EXPECT_TRUE(std::equal(without.find(w)->data->values<int8_t>().begin(),
                           without.find(w)->data->values<int8_t>().end(), with.find(w)->data->values<int8_t>().begin()))
        << w;
  // A reference whose Relu output has another name: the layers reading or ending at it are skipped.
  ir::Model renamed = mlp();
  renamed.graph->rename_value(renamed.graph->find_value("r"), "r_renamed");
  std::vector<quant::FinetunedLayer> reports =
      fast_finetune(q.model, renamed_plan, q.config, stores_of(feeds(8, 100)), o, {}, &renamed);
  ASSERT_EQ(reports.size(), 3u);
  for (const quant::FinetunedLayer& r : reports)
    EXPECT_NE(r.skipped.find("reference model (RefModelPath) has no tensor 'r'"), std::string::npos) << r.node;
}

// MemOptLevel 2: every sample's values in files of CacheDir, read back as needed; the plan is
// the same as with everything in memory, and no file is left behind.
TEST(FastFinetune, SpilledToDiskGivesTheSamePlanAndLeavesNoFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "onnxptq_spill_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  for (Algorithm algorithm : {Algorithm::AdaRound, Algorithm::AdaQuant}) {
    Quantized q;
    FastFinetuneOptions o;
    o.train.algorithm = algorithm;
    o.train.iterations = 100;
    o.train.batch_size = 3;
    o.train.drop_ratio = 0.5;  // float inputs too
    o.threads = 2;
    o.selective_update = true;  // its reference outputs spilled as well
    quant::Plan in_memory = q.plan, spilled = q.plan;
    fast_finetune(q.model, in_memory, q.config, stores_of(feeds(16, 100)), o);
    o.spill = dir;
    SampleInputs inputs = stores_of(feeds(16, 100), dir);
    EXPECT_TRUE(inputs.at("x")->spilled());
    fast_finetune(q.model, spilled, q.config, inputs, o);
    for (const char* w : {"w1", "w2", "w3"})
      EXPECT_TRUE(std::equal(in_memory.find(w)->data->values<int8_t>().begin(),
                             in_memory.find(w)->data->values<int8_t>().end(),
                             spilled.find(w)->data->values<int8_t>().begin()))
          << w;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // unlinked as soon as made
  std::filesystem::remove_all(dir);

  quant::QuantConfig c;
  c.include_fast_ft = true;
  quant::apply_extra_option(c, "FastFinetune", nlohmann::json{{"MemOptLevel", 2}, {"CacheDir", "/no/such/dir"}});
  EXPECT_THROW(quant::check_config(c), Error);
  EXPECT_EQ(fast_finetune_options(c.fast_finetune, 1).spill, std::filesystem::path("/no/such/dir"));
  quant::QuantConfig missing_reference;
  missing_reference.include_fast_ft = true;
  quant::apply_extra_option(missing_reference, "FastFinetune", nlohmann::json{{"RefModelPath", "/no/such.onnx"}});
  EXPECT_THROW(quant::check_config(missing_reference), Error);
  quant::FastFinetune default_dir;
  quant::apply_fast_finetune(default_dir, nlohmann::json{{"MemOptLevel", 2}});
  EXPECT_EQ(fast_finetune_options(default_dir, 1).spill, std::filesystem::temp_directory_path());
  EXPECT_FALSE(fast_finetune_options(quant::FastFinetune{}, 1).spill);
}

TEST(FastFinetuneConfig, QuarksKeysAndDefaultsByAlgorithm) {
  quant::FastFinetune f;
  quant::apply_fast_finetune(f, nlohmann::json::parse(R"({"DataSize": 1000, "FixedSeed": 1705472343, "BatchSize": 2,
      "NumIterations": 1000, "LearningRate": 0.1, "OptimAlgorithm": "adaround", "OptimDevice": "cpu",
      "InferDevice": "cpu", "EarlyStop": true})"));
  FastFinetuneOptions o = fast_finetune_options(f, 2);
  EXPECT_EQ(o.train.algorithm, Algorithm::AdaRound);
  EXPECT_EQ(o.train.batch_size, 2u);
  EXPECT_TRUE(o.train.early_stop);
  EXPECT_EQ(o.target_op_types.size(), 6u);
  quant::FastFinetune q;
  quant::apply_fast_finetune(q, nlohmann::json::parse(R"({"OptimAlgorithm": "adaquant", "UpdateBias": true,
      "LRAdjust": [0.5, 0.001], "TargetOpType": ["Conv"], "BetaRange": [10, 1], "WarmStart": 0.1})"));
  o = fast_finetune_options(q, 2);
  EXPECT_EQ(o.train.algorithm, Algorithm::AdaQuant);
  EXPECT_EQ(o.train.iterations, 3000);  // AdaQuantConfig's defaults
  EXPECT_EQ(o.train.learning_rate, 1e-5);
  EXPECT_TRUE(o.train.update_bias);
  EXPECT_EQ(o.train.lr_adjust, (std::pair<double, double>{0.5, 0.001}));
  EXPECT_EQ(o.target_op_types, std::set<std::string>{"Conv"});
  EXPECT_EQ(o.train.beta_start, 10);
  EXPECT_EQ(o.train.warm_start, 0.1);
  EXPECT_EQ(fast_finetune_options(quant::FastFinetune{}, 1).train.learning_rate, 0.1);

  auto refusal = [](const char* json) {
    quant::FastFinetune f;
    try {
      quant::apply_fast_finetune(f, nlohmann::json::parse(json));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal(R"({"MemOptLevel": 3})").find("MemOptLevel"), std::string::npos);
  EXPECT_EQ(refusal(R"({"MemOptLevel": 2, "CacheDir": "/tmp"})"), "");
  EXPECT_NE(refusal(R"({"NumWorkers": 4})").find("NumWorkers"), std::string::npos);
  EXPECT_NE(refusal(R"({"OptimDevice": "cuda:0"})").find("CPU"), std::string::npos);
  EXPECT_NE(refusal(R"({"DynamicBatch": true})").find("not built"), std::string::npos);
  EXPECT_EQ(refusal(R"({"SelectiveUpdate": true, "OutputIndex": 1, "OutputQDQ": true, "RefModelPath": "f.onnx"})"), "");
  EXPECT_NE(refusal(R"({"OutputIndex": -1})").find("OutputIndex"), std::string::npos);
  quant::FastFinetune keys;
  quant::apply_fast_finetune(keys, nlohmann::json::parse(R"({"SelectiveUpdate": true, "OutputIndex": 1,
      "OutputQDQ": true})"));
  o = fast_finetune_options(keys, 1);
  EXPECT_TRUE(o.selective_update);
  EXPECT_EQ(o.output_index, 1u);
  EXPECT_TRUE(o.output_qdq);
  EXPECT_NE(refusal(R"({"NumIteration": 5})").find("unknown key 'NumIteration'"), std::string::npos);
  EXPECT_NE(refusal(R"({"BatchSize": 0})").find("BatchSize"), std::string::npos);
  EXPECT_NE(refusal(R"({"TargetOpType": ["Relu"]})").find("Relu"), std::string::npos);
  EXPECT_NE(refusal(R"({"OptimAlgorithm": "gptq"})").find("adaround"), std::string::npos);

  quant::QuantConfig c;
  quant::apply_extra_option(c, "FastFinetune", nlohmann::json::object());
  EXPECT_THROW(quant::check_config(c), Error);  // without include_fast_ft
  c.include_fast_ft = true;
  EXPECT_NO_THROW(quant::check_config(c));
  c.weight_type = ir::DataType::Float16;
  c.activation_type = ir::DataType::Float16;
  c.format = quant::QuantFormat::ExtendedQDQ;
  c.calibrate_method = calib::Method::MinMax;
  try {
    quant::check_config(c);
    ADD_FAILURE() << "AdaRound of float16 weights accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("AdaRound chooses between integers"), std::string::npos) << e.what();
  }
  c.fast_finetune.adaquant = true;
  EXPECT_NO_THROW(quant::check_config(c));

  EXPECT_NE(refusal(R"({"PinMemory": true})").find("CUDA"), std::string::npos);
  EXPECT_EQ(refusal(R"({"PinMemory": false, "UseGDS": false, "NumWorkers": 1})"), "");
  quant::FastFinetune largest;
  quant::apply_fast_finetune(largest, nlohmann::json::parse(R"({"SelectMaxMemLayer": true})"));
  EXPECT_TRUE(fast_finetune_options(largest, 1).select_max_mem_layer);
}

// q.config without its weights' grid, in ExtendedQuantFormat.QDQ with `type` for activations and
// weights.
quant::QuantConfig extended_config(const Quantized& q, ir::DataType type) {
  quant::QuantConfig c = q.config;
  c.tensor_overrides.clear();
  c.format = quant::QuantFormat::ExtendedQDQ;
  c.activation_type = c.weight_type = type;
  return c;
}

// The plan of q's model quantized with `c`, before and after AdaQuant (`iterations`, learning rate
// 1e-3) on `train` samples: every layer trains, each kept lowers its loss, at least one is kept;
// and AdaRound, which chooses between integers, skips every layer of that plan.
struct AdaQuantRun {
  quant::Plan before, plan;
};
AdaQuantRun adaquant_every_layer(const Quantized& q, const quant::QuantConfig& c, size_t train, int iterations) {
  FeedReader reader(feeds(16, 100));
  AdaQuantRun run;
  run.before = quant::quantize_static(q.model, reader, c).plan;
  run.plan = run.before;
  FastFinetuneOptions o = short_run();
  o.train.algorithm = Algorithm::AdaQuant;
  o.train.iterations = iterations;
  o.train.learning_rate = 1e-3;
  std::vector<quant::FinetunedLayer> reports = fast_finetune(q.model, run.plan, c, stores_of(feeds(train, 100)), o);
  EXPECT_EQ(reports.size(), 3u);
  size_t kept = 0;
  for (const quant::FinetunedLayer& r : reports) {
    EXPECT_TRUE(r.skipped.empty()) << r.node << ": " << r.skipped;
    if (r.kept) {
      EXPECT_LT(r.loss_after, r.loss_before) << r.node;
      ++kept;
    }
  }
  EXPECT_GT(kept, 0u);
  o.train.algorithm = Algorithm::AdaRound;
  quant::Plan untouched = run.before;
  for (const quant::FinetunedLayer& r : fast_finetune(q.model, untouched, c, stores_of(feeds(4, 100)), o))
    EXPECT_NE(r.skipped.find("AdaRound"), std::string::npos) << r.node;
  return run;
}

// bfloat16 weights and activations (Quark's BF16_ADAQUANT): AdaQuant trains the weights through
// the cast; the plan holds bfloat16 values of the trained weights, the scales unchanged, and each
// layer kept lowers its loss. AdaRound skips them.
TEST(FastFinetune, Bfloat16WeightsTrainWithAdaQuant) {
  Quantized q;
  const quant::QuantConfig c = extended_config(q, ir::DataType::BFloat16);
  const auto [before, plan] = adaquant_every_layer(q, c, 16, 200);
  for (const char* w : {"w1", "w2", "w3"}) {
    const quant::TensorPlan &a = *before.find(w), &b = *plan.find(w);
    ASSERT_EQ(b.data->dtype(), ir::DataType::BFloat16) << w;
    EXPECT_EQ(a.params[0].scale, b.params[0].scale) << w;
  }
  bool changed = false;
  for (const char* w : {"w1", "w2", "w3"})
    changed = changed || !std::equal(before.find(w)->data->values<uint16_t>().begin(),
                                     before.find(w)->data->values<uint16_t>().end(),
                                     plan.find(w)->data->values<uint16_t>().begin());
  EXPECT_TRUE(changed);
}

// Block-format weights (Quark's BFP16_ADAQUANT, MX*_ADAQUANT): AdaQuant trains the float weight
// through the block quantization, each layer kept with a lower loss; the plan keeps the trained
// float weight and the written model puts it through the weight's block node (the engine's run of
// the export equals the simulation). AdaRound skips them. (Each layer's loss is what AdaQuant
// lowers; on this model's two summed MatMuls the output's error need not follow: SelectiveUpdate
// keeps only the layers that bring the output closer.)
TEST(FastFinetune, BlockFormatWeightsTrainWithAdaQuant) {
  Quantized q;
  quant::QuantConfig c = extended_config(q, quant::kQBfp);
  c.bfp.bit_width = 12;  // few mantissa bits: rounding matters
  const auto [before, plan] = adaquant_every_layer(q, c, 128, 300);
  for (const char* w : {"w1", "w2", "w3"}) {
    EXPECT_FALSE(before.find(w)->data.has_value()) << w;
    if (const quant::TensorPlan* t = plan.find(w); t->data) {
      EXPECT_EQ(t->data->dtype(), ir::DataType::Float) << w;
    }
  }
  // The written model carries the trained weights.
  ir::Model written = quant::export_model(q.model, plan, c);
  quant::Simulation simulation(q.model, plan, c, 1);
  engine::Session engine_run(written);
  for (const Feed& f : feeds(16, 200)) {
    ir::Tensor a = simulation.run(f)[0], b = engine_run.run(f)[0];
    ASSERT_EQ(a.values<float>().size(), b.values<float>().size());
    for (size_t i = 0; i < a.values<float>().size(); ++i) EXPECT_EQ(a.values<float>()[i], b.values<float>()[i]) << i;
  }
}

// SelectMaxMemLayer trains one layer: the one whose data is largest (the Gemm: [2, 16] in and
// [2, 32] out per sample, against [2, 32] and [2, 8] for each MatMul); among the MatMuls alone,
// equal in size, the first.
TEST(FastFinetune, SelectMaxMemLayerTrainsOnlyTheLargestLayer) {
  Quantized q;
  FastFinetuneOptions o = short_run();
  o.select_max_mem_layer = true;
  quant::Plan plan = q.plan;
  std::vector<std::string> lines;
  std::vector<quant::FinetunedLayer> reports = fast_finetune(q.model, plan, q.config, stores_of(feeds(4, 100)), o,
                                                             [&](const std::string& l) { lines.push_back(l); });
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].node, "gemm");
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0].rfind("SelectMaxMemLayer: only gemm (Gemm), about ", 0), 0u) << lines[0];
  o.target_op_types = {"MatMul"};
  plan = q.plan;
  reports = fast_finetune(q.model, plan, q.config, stores_of(feeds(4, 100)), o);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].node, "matmul_a");
  // FastFinetuneOptions::nodes narrows the targets the same way.
  o.select_max_mem_layer = false;
  o.nodes = {"matmul_b"};
  plan = q.plan;
  reports = fast_finetune(q.model, plan, q.config, stores_of(feeds(4, 100)), o);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].node, "matmul_b");
}

TEST(FastFinetune, RefusesNoSamples) {
  Quantized q;
  EXPECT_THROW(fast_finetune(q.model, q.plan, q.config, {}, {}), Error);
}

}  // namespace
}  // namespace onnxptq::finetune
