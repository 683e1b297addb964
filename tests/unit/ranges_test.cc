// One calibration for many quantizations: Calibration's JSON (what `onnxptq calibrate` writes),
// quantize() with QuantizeOptions::ranges and with Quark's SaveAndRestore extra option, and the
// errors of ranges that do not fit the model or the config.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/model.h"
#include "onnxptq/onnxptq.h"
#include "support/accuracy_models.h"
#include "support/cli_run.h"
#include "support/one_node.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;
using cli_test::slurp;
using testing::error_of;

struct Folder {
  Folder() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    ir::save_model(testing::outlier_model(), model_path);
  }
  ~Folder() { fs::remove_all(dir); }
  fs::path dir = fs::temp_directory_path() / ("onnxptq_ranges_test_" + std::to_string(getpid()));
  fs::path model_path = dir / "model.onnx";
};

std::string bytes_of(const Model& m, const fs::path& path) {
  m.save(path);
  return slurp(path);
}

Config config_of(const std::string& method, const std::string& activation_type) {
  Config c;
  c.set("calibrate_method", "\"" + method + "\"").set("activation_type", "\"" + activation_type + "\"");
  return c;
}

TEST(Ranges, JsonRoundTripsExactly) {
  Calibration c;
  c.method = "MinMSE";
  c.activation_type = "QInt16";
  c.samples = 3;
  c.skipped_samples = {1};
  c.passes = 2;
  c.tensors = {{"a", -0.1, 1e-30, 7, std::nullopt, std::nullopt},
               {"b", -3.0000000000000004, 0.30000000000000004, std::nullopt, 0.5, 2.0 / 3}};
  c.non_finite_tensors = {"n"};
  Calibration back = Calibration::from_json(c.to_json());
  EXPECT_EQ(back.method, "MinMSE");
  EXPECT_EQ(back.activation_type, "QInt16");
  EXPECT_EQ(back.samples, 3u);
  EXPECT_EQ(back.skipped_samples, std::vector<size_t>{1});
  EXPECT_EQ(back.passes, 2);
  ASSERT_EQ(back.tensors.size(), 2u);
  EXPECT_EQ(back.tensors[0].min, -0.1);
  EXPECT_EQ(back.tensors[0].max, 1e-30);
  EXPECT_EQ(back.tensors[0].pos, 7);
  EXPECT_EQ(back.tensors[1].min, -3.0000000000000004);
  EXPECT_EQ(back.tensors[1].max, 0.30000000000000004);
  EXPECT_EQ(back.tensors[1].std, 2.0 / 3);
  EXPECT_EQ(back.non_finite_tensors, std::vector<std::string>{"n"});
  EXPECT_EQ(back.to_json(), c.to_json());
}

TEST(Ranges, BadFilesAreOneLineErrors) {
  auto error = [](const std::string& text) { return error_of([&] { Calibration::from_json(text); }); };
  EXPECT_EQ(error("{"), "not JSON");
  EXPECT_EQ(error(R"({"quark_version": "0.9", "tensors_range": {"x": [[0], [1]]}})"),
            "Quark's SaveAndRestore file (\"tensors_range\"): onnxptq reads the JSON `onnxptq calibrate` writes");
  EXPECT_EQ(error(R"({"method": "MinMax", "tensors": {}})"), "has no \"activation_type\"");
  EXPECT_EQ(error(R"({"method": "MinMax", "activation_type": "QInt8", "tensors": {}, "extra": 1})"),
            "unknown key \"extra\"");
  EXPECT_EQ(error(R"({"method": "MinMax", "activation_type": "QInt8", "tensors": {"x": {"min": 1}}})"),
            "tensors['x'] has no \"max\"");
  EXPECT_EQ(error(R"({"method": "MinMax", "activation_type": "QInt8", "tensors": {"x": {"min": 2, "max": 1}}})"),
            "tensors['x']: min 2 is above max 1");
  EXPECT_EQ(error(R"({"method": "Best", "activation_type": "QInt8", "tensors": {}})")
                .rfind("unknown calibration method 'Best'", 0),
            0u);
}

// The ranges of calibrate() give quantize() the model it makes when it calibrates itself, byte for
// byte, also when the reader then gives other samples (only the first sample's shapes are read).
TEST(Ranges, QuantizeWithCalibratedRangesMakesTheSameModel) {
  Folder f;
  Model model = Model::load(f.model_path);
  for (const auto& [method, type] : {std::pair{"MinMax", "QUInt8"}, std::pair{"MinMSE", "QInt8"}}) {
    Config config = config_of(method, type);
    auto data = [&](uint32_t seed) { return random_reader(model, {.count = 3, .seed = seed}); };
    Calibration ranges = calibrate(model, *data(1), config);
    EXPECT_EQ(ranges.activation_type, type);
    const std::string plain = bytes_of(quantize(model, *data(1), config).model, f.dir / "plain.onnx");
    QuantizeOptions o;
    o.ranges = ranges;
    const std::string reused = bytes_of(quantize(model, *data(2), config, o).model, f.dir / "reused.onnx");
    EXPECT_EQ(reused, plain) << method;
    // Calibrated on those other samples, the MinMax model differs: the ranges above were used.
    if (std::string(method) == "MinMax") {
      EXPECT_NE(bytes_of(quantize(model, *data(2), config).model, f.dir / "other.onnx"), plain);
    }
  }
}

TEST(Ranges, RangesThatDoNotFitAreOneLineErrors) {
  Folder f;
  Model model = Model::load(f.model_path);
  Config config = config_of("MinMax", "QInt8");
  Calibration ranges = calibrate(model, *random_reader(model, {.count = 2}), config);
  auto error = [&](const Calibration& r, const Config& c) {
    QuantizeOptions o;
    o.ranges = r;
    o.ranges_source = "--ranges 'r.json'";
    return error_of([&] { quantize(model, *random_reader(model, {.count = 1}), c, o); });
  };
  EXPECT_EQ(error(ranges, config_of("Percentile", "QInt8")),
            "--ranges 'r.json': ranges calibrated with MinMax, but the config's calibrate_method is Percentile");
  EXPECT_EQ(error(ranges, config_of("MinMax", "QUInt8")),
            "--ranges 'r.json': ranges calibrated for activation_type QInt8, but the config's is QUInt8");
  Calibration missing = ranges;
  const std::string dropped = missing.tensors.back().tensor;
  missing.tensors.pop_back();
  EXPECT_EQ(error(missing, config), "--ranges 'r.json': no range for tensor '" + dropped +
                                        "', which the plan calibrates (ranges of another model, or of other "
                                        "settings: op types, nodes, optimize_model)");
  Calibration extra = ranges;
  extra.tensors.push_back({"/other/Conv_output_0", -1, 1, std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(error(extra, config),
            "--ranges 'r.json': the model has no tensor '/other/Conv_output_0' (ranges of another model?)");
  // A tensor of the model the plan no longer calibrates (its node excluded since) is fine.
  Config fewer = config;
  fewer.set("op_types_to_quantize", R"(["Conv"])");
  EXPECT_EQ(error(ranges, fewer), "");
  // Two sources of ranges, or a search that calibrates per candidate.
  Config restore = config;
  restore.set_extra_option("SaveAndRestore", "\"" + (f.dir / "s.json").string() + "\"");
  EXPECT_EQ(error(ranges, restore), "SaveAndRestore '" + (f.dir / "s.json").string() +
                                        "' and --ranges 'r.json' both give the ranges: choose one");
  QuantizeOptions search;
  search.ranges = ranges;
  search.ranges_source = "--ranges 'r.json'";
  search.target = AccuracyTarget{};
  search.target->min_sqnr = 30;
  EXPECT_EQ(error_of([&] { quantize(model, *random_reader(model, {.count = 4}), config, search); }),
            "--ranges 'r.json': ranges kept for reuse go with one quantization, not include_auto_mp or an accuracy "
            "target search (which calibrate for each candidate)");
}

// Quark's SaveAndRestore: the first run calibrates and writes the file (onnxptq calibrate's JSON),
// the next ones read it and calibrate nothing.
TEST(Ranges, SaveAndRestoreWritesThenReadsTheRanges) {
  Folder f;
  Model model = Model::load(f.model_path);
  const fs::path file = f.dir / "ranges.json";
  for (const char* key : {"SaveAndRestore", "TensorsRangeFile"}) {
    fs::remove(file);
    Config config = config_of("MinMax", "QUInt8");
    const std::string plain =
        bytes_of(quantize(model, *random_reader(model, {.count = 3, .seed = 1}), config).model, f.dir / "p.onnx");
    config.set_extra_option(key, "\"" + file.string() + "\"");
    std::vector<std::string> log;
    QuantizeOptions o;
    o.log = [&log](const std::string& line) { log.push_back(line); };
    const std::string saved =
        bytes_of(quantize(model, *random_reader(model, {.count = 3, .seed = 1}), config, o).model, f.dir / "s.onnx");
    EXPECT_EQ(saved, plain) << key;
    ASSERT_TRUE(fs::exists(file)) << key;
    // What calibrate() gives with the same config and data.
    Calibration written = Calibration::from_json(slurp(file));
    Calibration direct =
        calibrate(model, *random_reader(model, {.count = 3, .seed = 1}), config_of("MinMax", "QUInt8"));
    EXPECT_EQ(written.to_json(), direct.to_json()) << key;
    EXPECT_EQ(log.back(), "SaveAndRestore: ranges of " + std::to_string(direct.tensors.size()) +
                              " tensors written to " + file.string());
    // Restored: other samples, the same model.
    log.clear();
    const std::string restored =
        bytes_of(quantize(model, *random_reader(model, {.count = 3, .seed = 5}), config, o).model, f.dir / "r.onnx");
    EXPECT_EQ(restored, plain) << key;
    bool said = false;
    for (const std::string& line : log) said = said || line.find("from SaveAndRestore '") != std::string::npos;
    EXPECT_TRUE(said) << key;
    // calibrate() and the sensitivity analysis do not take the key.
    EXPECT_EQ(error_of([&] { calibrate(model, *random_reader(model, {.count = 1}), config); }),
              "extra option SaveAndRestore goes with quantize; calibrate returns the ranges it would save");
  }
  // A file in Quark's own form, or for another method.
  Config config = config_of("MinMax", "QUInt8");
  config.set_extra_option("SaveAndRestore", "\"" + file.string() + "\"");
  write_text_file(file, R"({"quark_version": "0.10", "tensors_range": {}})");
  EXPECT_EQ(error_of([&] { quantize(model, *random_reader(model, {.count = 1}), config); }),
            "SaveAndRestore '" + file.string() +
                "': Quark's SaveAndRestore file (\"tensors_range\"): onnxptq reads the JSON `onnxptq calibrate` "
                "writes");
  write_text_file(file,
                  calibrate(model, *random_reader(model, {.count = 1}), config_of("Entropy", "QUInt8")).to_json());
  EXPECT_EQ(error_of([&] { quantize(model, *random_reader(model, {.count = 1}), config); }),
            "SaveAndRestore '" + file.string() +
                "': ranges calibrated with Entropy, but the config's calibrate_method is MinMax");
}

}  // namespace
}  // namespace onnxptq
