// The preset table (quant/presets.h) against Quark's DefaultConfigMapping and the vai_q_onnx user
// guide, what the core refuses of each preset today, and `onnxptq quantize --config NAME` /
// `onnxptq presets` as a user runs them.
#include "quant/presets.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "onnxptq/error.h"
#include "quant/quantize.h"
#include "support/cli_run.h"
#include "support/export_models.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The names of Quark's DefaultConfigMapping (quark/onnx/quantization/config/custom_config.py), and
// the vai_q_onnx user guide's four recommended configurations under onnxptq's names.
// clang-format off
const std::vector<std::string> kSpecNames = {
    "UINT8_DYNAMIC_QUANT", "XINT8", "XINT8_ADAROUND", "XINT8_ADAQUANT", "VINT8", "S8S8_AAWS", "S8S8_AAWS_ADAROUND",
    "S8S8_AAWS_ADAQUANT", "U8S8_AAWS", "U8S8_AAWS_ADAROUND", "U8S8_AAWS_ADAQUANT", "U8U8_AAWA", "S16S8_ASWS",
    "S16S8_ASWS_ADAROUND", "S16S8_ASWS_ADAQUANT", "A8W8", "A8W8_ADAROUND", "A8W8_ADAQUANT", "A16W8",
    "A16W8_ADAROUND", "A16W8_ADAQUANT", "U16S8_AAWS", "U16S8_AAWS_ADAROUND", "U16S8_AAWS_ADAQUANT", "FP16",
    "FP16_ADAQUANT", "BF16", "BF16_ADAQUANT", "BFP16", "BFP16_ADAQUANT", "MX4", "MX4_ADAQUANT", "MX6",
    "MX6_ADAQUANT", "MX9", "MX9_ADAQUANT", "MXFP8E5M2", "MXFP8E5M2_ADAQUANT", "MXFP8E4M3", "MXFP8E4M3_ADAQUANT",
    "MXFP6E3M2", "MXFP6E3M2_ADAQUANT", "MXFP6E2M3", "MXFP6E2M3_ADAQUANT", "MXFP4E2M1", "MXFP4E2M1_ADAQUANT",
    "MXINT8", "MXINT8_ADAQUANT", "S16S16_MIXED_S8S8", "BF16_MIXED_BFP16", "BF16_MIXED_BFP16_ADAQUANT",
    "BF16_MIXED_MXINT8", "BF16_MIXED_MXINT8_ADAQUANT", "BF16_BFP16", "BF16_MXINT8", "MX9_INT8", "INT8_CNN_DEFAULT",
    "INT16_CNN_DEFAULT", "INT8_TRANSFORMER_DEFAULT", "INT16_TRANSFORMER_DEFAULT", "INT8_CNN_ACCURATE",
    "INT16_CNN_ACCURATE", "INT8_TRANSFORMER_ACCURATE", "INT16_TRANSFORMER_ACCURATE", "MATMUL_NBITS",
    "VAI_CNN_NPU", "VAI_CNN_NPU_CLE", "VAI_TRANSFORMER_NPU", "VAI_CNN_CPU"};
// clang-format on

TEST(Presets, TheTableHasEveryPresetOfTheSpecOnce) {
  std::multiset<std::string> names;
  for (const Preset& p : presets()) {
    names.insert(p.name);
    EXPECT_FALSE(p.description.empty()) << p.name;
    EXPECT_EQ(p.description.find('\n'), std::string::npos) << p.name;
    EXPECT_EQ(find_preset(p.name), &p);
  }
  EXPECT_EQ(names, std::multiset<std::string>(kSpecNames.begin(), kSpecNames.end()));
  EXPECT_EQ(find_preset("xint8"), nullptr);  // exact names
}

// Presets of custom_config.py and the vai_q_onnx guide's code blocks, written here from them.
TEST(Presets, SettingsAreTheSpecsRows) {
  auto config = [](const std::string& name) { return find_preset(name)->config; };
  json xint8 = config("XINT8");
  EXPECT_EQ(xint8["quant_format"], "QuantFormat.QDQ");
  EXPECT_EQ(xint8["calibrate_method"], "MinMSE");
  EXPECT_EQ(xint8["activation_type"], "QuantType.QUInt8");
  EXPECT_EQ(xint8["weight_type"], "QuantType.QInt8");
  EXPECT_EQ(xint8["enable_dpu"], true);
  EXPECT_EQ(xint8["include_cle"], true);  // QuantizationConfig's default
  EXPECT_EQ(xint8["extra_options"], json({{"ActivationSymmetric", true}, {"ForceQuantizeNoInputCheck", true}}));

  json a8w8 = config("A8W8");
  EXPECT_EQ(a8w8["quant_format"], "ExtendedQuantFormat.QDQ");
  EXPECT_EQ(a8w8["calibrate_method"], "MinMax");
  EXPECT_EQ(a8w8["activation_type"], "QuantType.QInt8");
  EXPECT_EQ(a8w8["extra_options"], json({{"ActivationSymmetric", true},
                                         {"ForceQuantizeNoInputCheck", true},
                                         {"AlignSlice", false},
                                         {"FoldRelu", true},
                                         {"AlignConcat", true}}));
  json a16w8 = config("A16W8");
  EXPECT_EQ(a16w8["activation_type"], "ExtendedQuantType.QInt16");
  EXPECT_EQ(a16w8["extra_options"]["AlignEltwiseQuantType"], true);

  // Quark's Percentile is vai_q_onnx's CalibPercentile in the core's config.
  EXPECT_EQ(config("S8S8_AAWS")["extra_options"]["CalibPercentile"], 99.9999);
  EXPECT_FALSE(config("U8S8_AAWS")["extra_options"].contains("CalibPercentile"));  // Quark's default 99.999
  EXPECT_EQ(config("U8U8_AAWA")["weight_type"], "QuantType.QUInt8");
  EXPECT_EQ(config("U8U8_AAWA")["extra_options"]["WeightSymmetric"], false);
  EXPECT_EQ(config("U16S8_AAWS")["activation_type"], "ExtendedQuantType.QUInt16");
  EXPECT_EQ(config("INT16_CNN_DEFAULT")["weight_type"], "ExtendedQuantType.QInt16");
  EXPECT_EQ(config("INT8_TRANSFORMER_DEFAULT")["enable_npu_transformer"], true);
  EXPECT_EQ(config("INT8_TRANSFORMER_DEFAULT")["extra_options"], json({{"CalibMovingAverage", true}}));
  EXPECT_EQ(config("BF16")["extra_options"]["QuantizeAllOpTypes"], true);
  EXPECT_EQ(config("VINT8")["optimize_model"], false);
  EXPECT_EQ(config("UINT8_DYNAMIC_QUANT")["use_dynamic_quant"], true);

  // custom_config.py's parameter blocks.
  json adaround = {{"DataSize", 1000},      {"FixedSeed", 1705472343}, {"BatchSize", 2},
                   {"NumIterations", 1000}, {"LearningRate", 0.1},     {"OptimAlgorithm", "adaround"},
                   {"OptimDevice", "cpu"},  {"InferDevice", "cpu"},    {"EarlyStop", true}};
  json adaquant = adaround;
  adaquant["LearningRate"] = 1e-5;
  adaquant["OptimAlgorithm"] = "adaquant";
  EXPECT_EQ(config("XINT8_ADAROUND")["extra_options"]["FastFinetune"], adaround);
  EXPECT_EQ(config("XINT8_ADAROUND")["include_fast_ft"], true);
  EXPECT_EQ(config("S16S8_ASWS_ADAQUANT")["extra_options"]["FastFinetune"], adaquant);
  EXPECT_EQ(config("INT8_CNN_ACCURATE")["extra_options"]["FastFinetune"], adaround);
  EXPECT_EQ(config("MX4")["extra_options"]["BFPAttributes"]["bit_width"], 11);
  EXPECT_EQ(config("MX9")["extra_options"]["BFPAttributes"]["bit_width"], 16);
  EXPECT_EQ(config("BFP16")["extra_options"]["BFPAttributes"],
            json({{"bfp_method", "to_bfp"}, {"axis", 1}, {"bit_width", 16}, {"block_size", 8}, {"rounding_mode", 2}}));
  EXPECT_EQ(config("MXFP4E2M1")["extra_options"]["MXAttributes"],
            json({{"element_dtype", "fp4_e2m1"}, {"axis", 1}, {"block_size", 32}, {"rounding_mode", 2}}));
  EXPECT_FALSE(config("BF16_MIXED_BFP16_ADAQUANT")["extra_options"]["AutoMixprecision"].contains("DualQuantNodes"));
  EXPECT_EQ(config("BF16_MIXED_MXINT8_ADAQUANT")["extra_options"]["AutoMixprecision"]["DualQuantNodes"], true);

  // The vai_q_onnx guide, "CNNs on NPU" and the CLE example: vai_q_onnx's include_cle default is
  // False.
  json npu = config("VAI_CNN_NPU");
  EXPECT_EQ(npu["calibrate_method"], "MinMSE");
  EXPECT_EQ(npu["activation_type"], "QUInt8");
  EXPECT_EQ(npu["enable_dpu"], true);
  EXPECT_EQ(npu["include_cle"], false);
  EXPECT_EQ(npu["extra_options"], json({{"ActivationSymmetric", true}}));
  json cle = config("VAI_CNN_NPU_CLE");
  EXPECT_EQ(cle["include_cle"], true);
  EXPECT_EQ(
      cle["extra_options"],
      json({{"ActivationSymmetric", true}, {"ReplaceClip6Relu", true}, {"CLESteps", 1}, {"CLEScaleAppendBias", true}}));
  EXPECT_EQ(config("VAI_TRANSFORMER_NPU")["activation_type"], "QInt8");
  EXPECT_EQ(config("VAI_CNN_CPU")["activation_type"], "QUInt8");
  EXPECT_EQ(config("VAI_CNN_CPU")["calibrate_method"], "MinMax");
}

// What the core refuses of each preset today, by setting. A preset not listed applies and passes
// check_config. When a feature lands its keys stop being refused and this test names the preset
// that changed: shrink the list (docs/options.md, "Presets", says the same).
const std::map<std::string, std::set<std::string>> kRefusedToday = {};

// Words the refusal of a feature nobody is building must contain.
const std::map<std::string, std::string> kMissingFeature = {{"include_fast_ft", "fast finetune"}};

TEST(Presets, EachAppliesOrNamesWhatTheCoreRefuses) {
  std::vector<std::string> ready;
  for (const Preset& p : presets()) {
    SCOPED_TRACE(p.name);
    QuantConfig c;
    std::vector<PresetRefusal> refused = apply_preset_settings(c, p);
    std::set<std::string> keys;
    for (const PresetRefusal& r : refused) {
      keys.insert(r.key);
      // The error names the setting: its key, or the type it asks for.
      const json& value = p.config.contains(r.key) ? p.config.at(r.key) : p.config.at("extra_options").at(r.key);
      bool names_it = r.error.find(r.key) != std::string::npos ||
                      (value.is_string() && r.error.find(value.get<std::string>()) != std::string::npos);
      EXPECT_TRUE(names_it) << r.key << ": " << r.error;
      if (kMissingFeature.count(r.key)) {
        EXPECT_NE(r.error.find(kMissingFeature.at(r.key)), std::string::npos) << r.error;
        EXPECT_NE(r.error.find("not built"), std::string::npos) << r.error;
      }
    }
    // The whole config at once, as `--config FILE` reads it, fails exactly when a setting does.
    QuantConfig whole;
    bool whole_applies = true;
    try {
      apply_config_json(whole, p.config);
    } catch (const Error&) {
      whole_applies = false;
    }
    EXPECT_EQ(whole_applies, refused.empty());
    if (refused.empty()) {
      std::vector<PresetRefusal> checked = check_preset(p);
      // Settings that apply one by one hold together.
      EXPECT_NO_THROW(check_config(c));
      EXPECT_TRUE(checked.empty());
      ready.push_back(p.name);
    }
    auto expected = kRefusedToday.find(p.name);
    if (expected == kRefusedToday.end())
      EXPECT_TRUE(keys.empty()) << "refused today but not listed in kRefusedToday";
    else
      EXPECT_EQ(keys, expected->second) << "the core's refusals changed: update kRefusedToday";
  }
  std::ostringstream list;
  for (const std::string& name : ready) list << " " << name;
  std::cout << "presets ready:" << list.str() << "\n";
}

TEST(Presets, ApplyPresetNamesThePresetAndEveryRefusal) {
  QuantConfig c;
  apply_preset(c, "UINT8_DYNAMIC_QUANT");  // Quark's: uint8 weights, dynamic activations
  EXPECT_TRUE(c.use_dynamic_quant);
  EXPECT_EQ(c.weight_type, ir::DataType::UInt8);
  try {
    apply_preset(c, "NOPE");
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("unknown preset 'NOPE' (presets: VAI_CNN_NPU, ", 0), 0u) << m;
    EXPECT_NE(m.find("MATMUL_NBITS)"), std::string::npos) << m;
  }
  QuantConfig u8s8;
  apply_preset(u8s8, "U8S8_AAWS");
  EXPECT_EQ(u8s8.calibrate_method, calib::Method::Percentile);
  EXPECT_EQ(u8s8.activation_type, ir::DataType::UInt8);
  EXPECT_EQ(u8s8.weight_type, ir::DataType::Int8);
  EXPECT_TRUE(u8s8.include_cle);
  EXPECT_TRUE(u8s8.force_quantize_no_input_check);
  EXPECT_FALSE(u8s8.activation_symmetric);
}

// `onnxptq quantize --config NAME` and `onnxptq presets`, on a small model saved by the test.
class PresetsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_presets_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    model_ = dir_ / "model.onnx";
    ir::save_model(testing::export_test_model(), model_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The bytes `onnxptq quantize` writes with `options`; "" (and a test failure) when it fails.
  std::string quantize(const std::string& name, const std::string& options) {
    fs::path out = dir_ / (name + ".onnx");
    cli_test::CliRun r =
        cli_test::onnxptq("quantize " + model_.string() + " -o " + out.string() + " --random 2 --quiet " + options);
    EXPECT_EQ(r.code, 0) << options << "\n" << r.err;
    return cli_test::slurp(out);
  }

  fs::path dir_, model_;
};

TEST_F(PresetsCli, PresetIsItsSpecRowAndLaterOptionsOverrideIt) {
  // Quark's U8S8_AAWS preset as flags, with QuantizationConfig's include_cle default.
  const std::string u8s8_flags =
      "--quant-format QDQ --calibrate-method Percentile --activation-type QUInt8 --weight-type QInt8 "
      "--extra-option ForceQuantizeNoInputCheck=true ";
  std::string preset = quantize("preset", "--config U8S8_AAWS");
  ASSERT_FALSE(preset.empty());
  EXPECT_EQ(preset, quantize("flags", u8s8_flags + "--include-cle"));
  // The vai_q_onnx guide's "CNNs on CPU" call as flags.
  EXPECT_EQ(quantize("cpu_preset", "--config VAI_CNN_CPU"),
            quantize("cpu_flags",
                     "--quant-format QDQ --calibrate-method MinMax --activation-type QUInt8 "
                     "--weight-type QInt8"));

  // Options after the preset win: a type, include_cle off, an extra option.
  std::string overridden = quantize(
      "overridden", "--config U8S8_AAWS --activation-type QInt8 --no-include-cle --extra-option CalibPercentile=99.0");
  EXPECT_NE(overridden, preset);
  EXPECT_EQ(overridden, quantize("overridden_flags",
                                 "--quant-format QDQ --calibrate-method Percentile "
                                 "--activation-type QInt8 --weight-type QInt8 "
                                 "--extra-option ForceQuantizeNoInputCheck=true "
                                 "--extra-option CalibPercentile=99.0"));

  // `onnxptq presets NAME --json` is a config file that gives the same model.
  cli_test::CliRun shown = cli_test::onnxptq("presets S8S8_AAWS --json");
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out), find_preset("S8S8_AAWS")->config);
  {
    std::ofstream file(dir_ / "s8s8.json");
    file << shown.out;
  }
  EXPECT_EQ(quantize("from_file", "--config " + (dir_ / "s8s8.json").string()),
            quantize("from_name", "--config S8S8_AAWS"));
}

TEST_F(PresetsCli, UnknownAndUnbuiltPresetsAreOneLineErrorsAndWriteNothing) {
  fs::path out = dir_ / "q.onnx";
  std::string base = "quantize " + model_.string() + " -o " + out.string() + " --random 1 ";
  cli_test::CliRun unknown = cli_test::onnxptq(base + "--config NOPE");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.err.rfind("error: --config 'NOPE' is neither a preset nor a readable file (presets: ", 0), 0u)
      << unknown.err;
  EXPECT_NE(unknown.err.find("XINT8"), std::string::npos);
  EXPECT_FALSE(fs::exists(out));
  cli_test::CliRun dynamic = cli_test::onnxptq(base + "--config UINT8_DYNAMIC_QUANT");
  EXPECT_EQ(dynamic.code, 0) << dynamic.err;
  EXPECT_TRUE(fs::exists(out));
}

TEST_F(PresetsCli, PresetsListsEveryPresetWithItsStatus) {
  cli_test::CliRun list = cli_test::onnxptq("presets");
  ASSERT_EQ(list.code, 0) << list.err;
  std::istringstream lines(list.out);
  std::map<std::string, std::string> status;
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string name, first;
    words >> name >> first;
    if (find_preset(name)) status[name] = first;
  }
  EXPECT_EQ(status.size(), presets().size());
  EXPECT_EQ(status["U8S8_AAWS"], "ready");
  EXPECT_EQ(status["MATMUL_NBITS"], "ready");
  EXPECT_EQ(status["UINT8_DYNAMIC_QUANT"], "ready");
  cli_test::CliRun json_list = cli_test::onnxptq("presets --json");
  ASSERT_EQ(json_list.code, 0) << json_list.err;
  json all = json::parse(json_list.out);
  ASSERT_EQ(all.size(), presets().size());
  for (const json& p : all) {
    std::string name = p.at("name").get<std::string>();
    EXPECT_EQ(p.at("ready").get<bool>(), status[name] == "ready") << name;
  }
  cli_test::CliRun one = cli_test::onnxptq("presets UINT8_DYNAMIC_QUANT");
  EXPECT_EQ(one.code, 0);
  EXPECT_NE(one.out.find("use_dynamic_quant"), std::string::npos) << one.out;
  cli_test::CliRun bad = cli_test::onnxptq("presets NOPE");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err.rfind("error: unknown preset 'NOPE'", 0), 0u) << bad.err;
}

}  // namespace
}  // namespace onnxptq::quant
