// The public C++ API (include/onnxptq/): written against those headers only, as a program
// outside the tree would be, but for building the test model and checking results against the
// library's own parts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/session.h"
#include "ir/model.h"
#include "onnxptq/onnxptq.h"
#include "support/accuracy_models.h"
#include "support/cli_run.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

struct SavedModel {
  SavedModel() {
    fs::create_directories(dir);
    ir::save_model(testing::outlier_model(), path);
  }
  ~SavedModel() { fs::remove_all(dir); }
  // Per process: ctest runs the tests in parallel processes, and one's cleanup must not remove another's.
  fs::path dir = fs::temp_directory_path() / ("onnxptq_api_test_" + std::to_string(getpid()));
  fs::path path = dir / "model.onnx";
};

TEST(PublicApi, ModelAndSessionGiveTheEnginesNumbers) {
  SavedModel saved;
  Model model = Model::load(saved.path);
  ASSERT_EQ(model.inputs().size(), 1u);
  EXPECT_EQ(model.inputs()[0].name, "x");
  EXPECT_EQ(model.inputs()[0].dims, (std::vector<int64_t>{1, 2, 6, 6}));
  EXPECT_EQ(model.inputs()[0].dtype, DataType::Float);
  EXPECT_EQ(model.outputs()[0].name, "y");
  Session session(model, {.threads = 1});
  EXPECT_EQ(session.input_names(), std::vector<std::string>{"x"});
  auto reader = random_reader(model, {.count = 1, .seed = 3});
  Feed feed = *reader->next();
  std::vector<Tensor> ours = session.run(feed);
  std::vector<Tensor> engine = engine::Session(model.ir()).run(feed);
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_TRUE(
      std::equal(ours[0].values<float>().begin(), ours[0].values<float>().end(), engine[0].values<float>().begin()));
  try {
    Model::load(saved.dir / "missing.onnx");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
  }
}

// A model in memory is the file's model: the bytes of a file load as the file does, and a
// model's bytes are what save writes. Bytes with no folder cannot name external data.
TEST(PublicApi, ModelFromBytesAndToBytesAreTheFilesModel) {
  SavedModel saved;
  Model from_file = Model::load(saved.path);
  std::string bytes = from_file.to_bytes();
  std::ifstream in(saved.path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, file);
  Model from_bytes = Model::from_bytes(bytes);
  EXPECT_EQ(from_bytes.to_bytes(), bytes);
  EXPECT_EQ(from_bytes.inputs()[0].dims, from_file.inputs()[0].dims);
  try {
    Model::from_bytes(std::string_view(bytes).substr(0, bytes.size() / 2), {}, "half");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("half: ", 0), 0u) << e.what();
  }
  fs::path external = saved.dir / "external.onnx";
  from_file.save(external, SaveOptions{.external_data = SaveOptions::ExternalData::Always, .external_threshold = 0});
  std::ifstream ext_in(external, std::ios::binary);
  std::string ext((std::istreambuf_iterator<char>(ext_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(Model::from_bytes(ext, saved.dir).to_bytes(), bytes);
  try {
    Model::from_bytes(ext);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stores its data in the external file 'external.onnx.data'"),
              std::string::npos)
        << e.what();
  }
}

// A reader without rewind replays what it has read; one with rewind calls it.
TEST(PublicApi, CallbackReaderReplaysOrRewinds) {
  int calls = 0;
  auto next = [&calls]() -> std::optional<Feed> {
    if (calls == 3) return std::nullopt;
    ++calls;
    return Feed{{"x", Tensor::from_values<float>({1}, std::vector<float>{static_cast<float>(calls)})}};
  };
  CallbackReader replayed(next, "three numbers");
  std::vector<float> seen;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass) replayed.rewind();
    while (auto f = replayed.next()) seen.push_back(f->at("x").values<float>()[0]);
  }
  EXPECT_EQ(seen, (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(calls, 3);
  int rewinds = 0;
  calls = 0;
  CallbackReader rewound(next, "three numbers", [&] {
    ++rewinds;
    calls = 0;
  });
  seen.clear();
  for (int pass = 0; pass < 2; ++pass) {
    if (pass) rewound.rewind();
    while (auto f = rewound.next()) seen.push_back(f->at("x").values<float>()[0]);
  }
  EXPECT_EQ(seen, (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(rewinds, 1);
  EXPECT_EQ(rewound.describe(), "three numbers");
}

TEST(PublicApi, ConfigNamesWhatIsWrongWithItsKind) {
  auto kind_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::optional<ErrorKind>(e.kind());
    }
    return std::optional<ErrorKind>();
  };
  EXPECT_EQ(kind_of([] { Config().set("quant_formatt", "\"QDQ\""); }), ErrorKind::bad_input);
  EXPECT_EQ(kind_of([] { Config().set("quant_format", "QDQ"); }), ErrorKind::bad_input);  // not JSON
  EXPECT_EQ(kind_of([] { Config().set("execution_providers", "[\"CUDAExecutionProvider\"]"); }),
            ErrorKind::unsupported);
  EXPECT_EQ(kind_of([] { Config().append("per_channel", {"x"}); }), ErrorKind::bad_input);
  EXPECT_EQ(kind_of([] { Config::preset("NO_SUCH_PRESET"); }), ErrorKind::bad_input);
  EXPECT_FALSE(kind_of([] { Config::preset("XINT8").check(); }));
  EXPECT_TRUE(Config::has_preset("A8W8"));
  size_t ready = 0;
  for (const PresetInfo& p : Config::presets()) {
    ready += p.ready;
    EXPECT_FALSE(nlohmann::json::parse(p.config_json).is_discarded()) << p.name;
  }
  EXPECT_GT(ready, 30u);
  // A copy is independent of the original.
  Config a;
  Config b = a;
  b.set("per_channel", "true").set("quant_format", "\"QOperator\"");
  EXPECT_NE(a.quant().per_channel, b.quant().per_channel);
}

// quantize() is what `onnxptq quantize` runs: the same model bytes and report for one config.
TEST(PublicApi, QuantizeWritesWhatTheCommandWrites) {
  SavedModel saved;
  Model model = Model::load(saved.path);
  auto reader = random_reader(model, {.count = 4, .seed = 0});
  Config config = Config::preset("A8W8");
  config.set("per_channel", "true").threads(1);
  std::vector<std::string> lines;
  QuantizeOutcome q = quantize(model, *reader, config, {.log = [&](const std::string& l) { lines.push_back(l); }});
  EXPECT_FALSE(lines.empty());
  EXPECT_TRUE(q.target_met);
  nlohmann::json report = nlohmann::json::parse(q.report_json);
  EXPECT_EQ(report["quantized_nodes_by_op_type"]["Conv"], 3);
  EXPECT_FALSE(nlohmann::json::parse(q.plan_json).is_discarded());
  q.model.save(saved.dir / "api.onnx");
  cli_test::CliRun cli =
      cli_test::onnxptq("quantize " + saved.path.string() + " -o " + (saved.dir / "cli.onnx").string() +
                        " --random 4 --config A8W8 --per-channel --threads 1 --quiet");
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_EQ(cli_test::slurp(saved.dir / "api.onnx"), cli_test::slurp(saved.dir / "cli.onnx"));
  // The input model is untouched, and an evaluate function nobody asks for is refused.
  EXPECT_EQ(Model::load(saved.path).outputs()[0].name, "y");
  EXPECT_THROW(quantize(model, *reader, config, {.evaluate = [](const fs::path&, const std::string&) { return 1.0; }}),
               Error);
}

// The command's exit codes follow the error's kind.
TEST(PublicApi, CommandExitCodesFollowTheKind) {
  SavedModel saved;
  const std::string out = (saved.dir / "q.onnx").string();
  EXPECT_EQ(
      cli_test::onnxptq("quantize " + saved.path.string() + " -o " + out +
                        " --random 1 --extra-option UseMatMulNBits=true --extra-option "
                        "'MatMulNBitsParams={\"Algorithm\":\"HQQ\",\"Bits\":8}'")
          .code,
      3);
  EXPECT_EQ(
      cli_test::onnxptq("quantize " + saved.path.string() + " -o " + out + " --random 1 --activation-type QInt3").code,
      2);
  EXPECT_EQ(cli_test::onnxptq("--version").out, std::string("onnxptq ") + version() + "\n");
}

// calibrate() gives the extrema of the samples for MinMax, and the JSON holds the same numbers.
TEST(PublicApi, CalibrateGivesTheExtremaOfTheSamples) {
  SavedModel saved;
  Model model = Model::load(saved.path);
  std::vector<Feed> feeds;
  float lo = 0, hi = 0;
  for (int s = 0; s < 3; ++s) {
    std::vector<float> x(72);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 + s * 13) % 29) * 0.1f - 1.3f - s;
    lo = std::min(lo, *std::min_element(x.begin(), x.end()));
    hi = std::max(hi, *std::max_element(x.begin(), x.end()));
    feeds.push_back(Feed{{"x", Tensor::from_values<float>({1, 2, 6, 6}, x)}});
  }
  size_t next = 0;
  CallbackReader reader(
      [&]() -> std::optional<Feed> {
        if (next == feeds.size()) return std::nullopt;
        return feeds[next++];
      },
      "three samples", [&] { next = 0; });
  Config config;
  config.set("calibrate_method", "\"MinMax\"").set("optimize_model", "false");
  std::vector<Progress> progress;
  CalibrateOptions options;
  options.progress = [&](const Progress& p) { progress.push_back(p); };
  Calibration c = calibrate(model, reader, config, options);
  EXPECT_EQ(c.method, "MinMax");
  EXPECT_EQ(c.samples, 3u);
  auto x = std::find_if(c.tensors.begin(), c.tensors.end(), [](const TensorRange& t) { return t.tensor == "x"; });
  ASSERT_NE(x, c.tensors.end());
  EXPECT_EQ(x->min, lo);
  EXPECT_EQ(x->max, hi);
  EXPECT_FALSE(x->pos);
  nlohmann::json j = nlohmann::json::parse(c.to_json());
  EXPECT_EQ(j["tensors"].size(), c.tensors.size());
  EXPECT_EQ(j["tensors"]["x"]["min"].get<double>(), lo);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().done, 3u);
  // A power-of-two method gives positions; a bad method is named.
  reader.rewind();
  config.set("calibrate_method", "\"NonOverflow\"");
  EXPECT_TRUE(calibrate(model, reader, config).tensors.front().pos);
  EXPECT_THROW(config.set("calibrate_method", "\"KL\""), Error);
}

// The sensitivity report's whole-model error is the error of the model quantize() writes, run on
// the same samples: the simulation and the exported QDQ model agree.
TEST(PublicApi, SensitivityWholeModelErrorIsTheQuantizedModels) {
  SavedModel saved;
  Model model = Model::load(saved.path);
  Config config = Config::preset("A8W8");
  config.threads(1);
  RandomData data;
  data.count = 4;
  auto reader = random_reader(model, data);
  SensitivityOptions options;
  options.samples = 4;
  SensitivityReport report = analyze_sensitivity(model, *reader, config, options);
  ASSERT_EQ(report.nodes.size(), 4u);  // the three Convs and the Tanh
  for (size_t i = 1; i < report.nodes.size(); ++i)
    EXPECT_LE(report.nodes[i - 1].alone.sqnr_db, report.nodes[i].alone.sqnr_db);  // worst first

  reader = random_reader(model, data);
  Model quantized = quantize(model, *reader, config).model;
  reader = random_reader(model, data);
  Session float_run(model), quantized_run(quantized);
  double signal = 0, noise = 0;
  while (auto feed = reader->next()) {
    Tensor ref_tensor = float_run.run(*feed)[0], got_tensor = quantized_run.run(*feed)[0];
    std::span<const float> ref = ref_tensor.values<float>(), got = got_tensor.values<float>();
    ASSERT_EQ(ref.size(), got.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      signal += double(ref[i]) * ref[i];
      noise += (double(ref[i]) - got[i]) * (double(ref[i]) - got[i]);
    }
  }
  EXPECT_NEAR(report.whole_model.sqnr_db, 10 * std::log10(signal / noise), 1e-4);

  nlohmann::json j = nlohmann::json::parse(report.to_json());
  EXPECT_EQ(j["nodes"].size(), 4u);
  const std::string csv = report.to_csv();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_NE(report.to_html("outlier <model>").find("outlier &lt;model&gt;"), std::string::npos);
}

// The key table the parser reads: every key that works takes its documented default, and the
// lookup finds a family's entry for a key it covers.
TEST(PublicApi, EveryWorkingKeyTakesItsDefault) {
  size_t tried = 0;
  for (const ConfigKeyInfo& k : Config::keys()) {
    EXPECT_EQ(Config::key(k.name).scope, k.scope) << k.name;
    if (k.status != "works" || !nlohmann::json::accept(k.default_value)) continue;
    Config c;
    if (k.scope == "config")
      EXPECT_NO_THROW(c.set(k.name, k.default_value)) << k.name;
    else
      EXPECT_NO_THROW(c.set_extra_option(k.name, k.default_value)) << k.name;
    ++tried;
  }
  EXPECT_GT(tried, 50u);
  EXPECT_THROW(Config::key("no_such_key"), Error);
  PresetInfo xint8 = Config::preset_info("XINT8");
  EXPECT_TRUE(xint8.ready);
  EXPECT_TRUE(xint8.refused.empty());
  for (const PresetInfo& p : Config::presets()) EXPECT_EQ(p.ready, p.refused.empty()) << p.name;
}

// A metric from a command: "{model}" becomes the path, the last line is the score.
TEST(PublicApi, CommandEvaluatorReadsTheLastLine) {
  EvaluateFunction metric =
      command_evaluator("echo starting; case {model} in */m.onnx) echo 0.75;; *) echo 0;; esac", 10);
  EXPECT_EQ(metric("/tmp/dir/m.onnx", "trial 1"), 0.75);
  EXPECT_EQ(metric("/tmp/dir/other.onnx", "trial 2"), 0);
  EXPECT_THROW(command_evaluator("echo 1; exit 3")("/tmp/m.onnx", "trial 3"), Error);
}

// UseRandomData: quantize() calibrates on the config's random sample, not on the reader; the result
// is the model quantized on the same sample given as a reader. CalibDataSize: the first samples.
TEST(PublicApi, UseRandomDataAndCalibDataSize) {
  SavedModel saved;
  Model model = Model::load(saved.path);
  auto bytes_of = [&](const Model& m, const std::string& name) {
    m.save(saved.dir / name);
    return cli_test::slurp(saved.dir / name);
  };
  size_t reads = 0;
  CallbackReader unread(
      [&]() -> std::optional<Feed> {
        ++reads;
        return std::nullopt;
      },
      "a reader nobody should read");
  Config config = Config::preset("A8W8");
  config.set_extra_option("UseRandomData", "true").set_extra_option("RandomDataReaderInputDataRange",
                                                                      R"({"x": [-2, 2]})");
  EXPECT_TRUE(config.uses_random_data());
  std::string random = bytes_of(quantize(model, unread, config).model, "random.onnx");
  EXPECT_EQ(reads, 0u);
  RandomData one;  // the seeds' RandomDataReader: one sample, seed 0
  one.ranges["x"] = {-2, 2};
  auto reader = random_reader(model, one);
  EXPECT_EQ(random, bytes_of(quantize(model, *reader, Config::preset("A8W8")).model, "given.onnx"));

  RandomData five;
  five.count = 5;
  five.seed = 4;
  reader = random_reader(model, five);
  Config first_two = Config::preset("A8W8");
  first_two.set_extra_option("CalibDataSize", "2");
  std::string limited = bytes_of(quantize(model, *reader, first_two).model, "limited.onnx");
  std::vector<Feed> two;
  reader->rewind();
  for (int i = 0; i < 2; ++i) two.push_back(*reader->next());
  size_t next = 0;
  CallbackReader only_two([&]() -> std::optional<Feed> {
    if (next == two.size()) return std::nullopt;
    return two[next++];
  }, "two samples", [&] { next = 0; });
  EXPECT_EQ(limited, bytes_of(quantize(model, only_two, Config::preset("A8W8")).model, "two.onnx"));
  reader->rewind();
  EXPECT_NE(limited, bytes_of(quantize(model, *reader, Config::preset("A8W8")).model, "five.onnx"));

  EXPECT_THROW(Config().set_extra_option("RandomDataReaderInputShape", "[1, 2]"), Error);
  EXPECT_THROW(Config().set_extra_option("RandomDataReaderInputDataRange", R"({"x": [1]})"), Error);
  EXPECT_THROW(Config().set_extra_option("CalibDataSize", "-1"), Error);
}

}  // namespace
}  // namespace onnxptq
