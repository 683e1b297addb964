// The public C++ API (include/onnxptq/): written against those headers only, as a program
// outside the tree would be, but for building the test model and checking results against the
// library's own parts.
#include <gtest/gtest.h>

#include <filesystem>
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
  fs::path dir = fs::temp_directory_path() / "onnxptq_api_test";
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
  EXPECT_EQ(kind_of([] { Config().set("activation_type", "\"QBFP\""); }), ErrorKind::unsupported);
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
      cli_test::onnxptq("quantize " + saved.path.string() + " -o " + out + " --random 1 --activation-type QBFP").code,
      3);
  EXPECT_EQ(
      cli_test::onnxptq("quantize " + saved.path.string() + " -o " + out + " --random 1 --activation-type QInt3").code,
      2);
  EXPECT_EQ(cli_test::onnxptq("--version").out, std::string("onnxptq ") + version() + "\n");
}

}  // namespace
}  // namespace onnxptq
