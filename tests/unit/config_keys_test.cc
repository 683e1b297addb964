// The table of configuration keys (quant/config_keys.h) against docs/options.md, which documents
// every key the seeds define: the key index must be the table, every key must be described in the
// docs' tables, and the keys the docs call unknown must be refused as unknown. Then the table
// against the parser's behaviour (types, refusals), and `onnxptq options` as a user runs it.
#include "quant/config_keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "onnxptq/error.h"
#include "support/cli_run.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kOptionsDoc = fs::path(ONNXPTQ_SOURCE_DIR) / "docs/options.md";
constexpr const char* kKeyIndexHeading = "## Key index";

// One row of a Markdown table in docs/options.md, with the headings it sits under.
struct DocRow {
  std::string section;              // the last "## " or "### " heading above it
  std::vector<std::string> header;  // the table's header cells
  std::vector<std::string> cells;
  int line = 0;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> cells;
  std::string inner = line.substr(1, line.rfind('|') - 1);
  std::stringstream in(inner);
  for (std::string cell; std::getline(in, cell, '|');) cells.push_back(trim(cell));
  return cells;
}

std::vector<DocRow> doc_rows() {
  std::string text = cli_test::slurp(kOptionsDoc);
  EXPECT_FALSE(text.empty()) << kOptionsDoc;
  std::vector<DocRow> rows;
  std::stringstream in(text);
  std::string section;
  std::vector<std::string> header;
  bool in_table = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.rfind("## ", 0) == 0 || line.rfind("### ", 0) == 0) section = line;
    if (line.empty() || line[0] != '|') {
      in_table = false;
      continue;
    }
    if (!in_table) {  // the header, then the --- line
      header = split_row(line);
      in_table = true;
      continue;
    }
    if (line.rfind("| ---", 0) == 0) continue;
    rows.push_back({section, header, split_row(line), number});
  }
  return rows;
}

std::string without_backticks(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '`'), s.end());
  return s;
}

// The names a cell gives in backticks: `NAME`, also in "`A`, `B` (Quark: `C`)"; other code
// (an error text) is no key.
std::vector<std::string> backticked_names(const std::string& cell) {
  static const std::regex name(R"(`([A-Za-z_][A-Za-z0-9_]*\*?)`)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), name); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

std::string key_id(KeyScope scope, const std::string& name) { return std::string(key_scope_name(scope)) + " " + name; }

TEST(ConfigKeys, NamesAreUniqueAndFitAMarkdownTable) {
  std::set<std::string> seen;
  for (const ConfigKey& k : config_keys()) {
    EXPECT_TRUE(seen.insert(key_id(k.scope, k.name)).second) << "twice: " << k.name;
    for (const std::string& text : {k.name, k.type, k.default_value, k.note, k.owner})
      EXPECT_EQ(text.find_first_of("|`\n"), std::string::npos) << k.name << ": " << text;
    EXPECT_FALSE(k.type.empty() || k.default_value.empty() || k.owner.empty()) << k.name;
    bool applies = k.status == KeyStatus::Works || k.status == KeyStatus::Limited;
    EXPECT_EQ(applies, k.apply != nullptr) << k.name;
    if (k.status != KeyStatus::Works) {
      EXPECT_FALSE(k.note.empty()) << k.name << " is refused without a reason";
    }
  }
}

// docs/options.md's key index is the table, row for row: what `onnxptq options --markdown` prints.
TEST(ConfigKeys, DocsKeyIndexIsTheTable) {
  std::map<std::string, DocRow> documented;
  for (const DocRow& row : doc_rows()) {
    if (row.section != kKeyIndexHeading) continue;
    ASSERT_EQ(row.cells.size(), 6u) << "docs/options.md:" << row.line;
    std::string id = row.cells[1] + " " + without_backticks(row.cells[0]);
    EXPECT_TRUE(documented.emplace(id, row).second) << "docs/options.md:" << row.line << ": " << id << " twice";
  }
  ASSERT_FALSE(documented.empty()) << "no table under '" << kKeyIndexHeading << "' in docs/options.md";
  for (const ConfigKey& k : config_keys()) {
    auto it = documented.find(key_id(k.scope, k.name));
    if (it == documented.end()) {
      ADD_FAILURE() << key_id(k.scope, k.name) << " is missing from docs/options.md's key index";
      continue;
    }
    const std::vector<std::string>& c = it->second.cells;
    const std::string where = "docs/options.md:" + std::to_string(it->second.line) + " (" + k.name + ")";
    EXPECT_EQ(c[2], k.type) << where;
    EXPECT_EQ(without_backticks(c[3]), k.default_value) << where;
    EXPECT_EQ(c[4], key_status_text(k)) << where;
    EXPECT_EQ(c[5], k.owner) << where;
    documented.erase(it);
  }
  for (const auto& [id, row] : documented)
    ADD_FAILURE() << "docs/options.md:" << row.line << ": " << id << " is not in the table (src/quant/config_keys.cc)";
}

bool in_unknown_section(const DocRow& row) {
  return row.section == "### Unknown to the core" || row.section.rfind("### Quark's names", 0) == 0;
}

// The docs' own tables: every key of the table is described there, every key they describe is
// in the table, and the keys they list as unknown to the core are.
TEST(ConfigKeys, DocsDescribeEveryKeyAndOnlyThose) {
  std::set<std::string> described;
  for (const DocRow& row : doc_rows()) {
    if (row.section == kKeyIndexHeading || row.header.empty()) continue;
    const std::string where = "docs/options.md:" + std::to_string(row.line);
    if (in_unknown_section(row)) {
      for (const std::string& name : backticked_names(row.cells[0])) {
        EXPECT_EQ(find_config_key(KeyScope::ExtraOption, name), nullptr) << where << ": " << name << " is known";
        QuantConfig c;
        EXPECT_EQ(testing::error_of([&] { apply_extra_option(c, name, true); }), "unknown extra option '" + name + "'")
            << where;
      }
    } else if (row.header[0] == "key") {  // a table of extra_options keys
      for (const std::string& name : backticked_names(row.cells[0])) {
        EXPECT_TRUE(find_config_key(KeyScope::ExtraOption, name)) << where << ": " << name << " is not in the table";
        described.insert(key_id(KeyScope::ExtraOption, name));
      }
    } else if (row.header.size() > 3 && row.header[3] == "`--config` key") {  // quantize_static's arguments
      for (const std::string& name : backticked_names(row.cells[3])) {
        EXPECT_TRUE(find_config_key(KeyScope::Config, name)) << where << ": " << name << " is not in the table";
        described.insert(key_id(KeyScope::Config, name));
      }
    } else if (row.header[0] == "field") {  // Quark's QuantizationConfig: its switches are config keys too
      for (const std::string& name : backticked_names(row.cells[0])) described.insert(key_id(KeyScope::Config, name));
    }
  }
  for (const ConfigKey& k : config_keys())
    EXPECT_TRUE(described.count(key_id(k.scope, k.name)))
        << key_id(k.scope, k.name) << " is described in none of docs/options.md's tables";
}

// A value of another kind than the table's type for the key: the parser must refuse it.
json value_of_another_type(const std::string& type) {
  if (type == "bool" || type == "string" || type == "object") return 1;
  return "x";  // number, integer, lists
}

TEST(ConfigKeys, TypesAndDefaultsAreWhatTheParserTakes) {
  std::set<std::string> types;
  for (const ConfigKey& k : config_keys()) {
    if (k.status != KeyStatus::Works && k.status != KeyStatus::Limited) continue;
    types.insert(k.type);
    auto apply = [&](const json& v) {
      QuantConfig c;
      if (k.scope == KeyScope::Config)
        apply_config_json(c, {{k.name, v}});
      else
        apply_extra_option(c, k.name, v);
    };
    std::string error = testing::error_of([&] { apply(value_of_another_type(k.type)); });
    EXPECT_NE(error.find(k.name), std::string::npos)
        << k.name << " (" << k.type << ") took a value of another type: " << value_of_another_type(k.type).dump()
        << ": " << error;
    if (json::accept(k.default_value)) {  // the default, given explicitly, is taken
      EXPECT_EQ(testing::error_of([&] { apply(json::parse(k.default_value)); }), "") << k.name;
    }
  }
  EXPECT_EQ(types, (std::set<std::string>{"bool", "number", "integer", "string", "list of strings", "list of numbers",
                                           "object", "list of strings or null", "list of pairs or null",
                                           "list of [start nodes, end nodes]"}));
}

// The refusals name the key and why, as they did when the parser was an if-chain (docs/options.md).
TEST(ConfigKeys, RefusedKeysAreRefusedByName) {
  auto extra_error = [](const std::string& key, const json& v) {
    QuantConfig c;
    return testing::error_of([&] { apply_extra_option(c, key, v); });
  };
  auto config_error = [](const json& j) {
    QuantConfig c;
    return testing::error_of([&] { apply_config_json(c, j); });
  };
  EXPECT_EQ(extra_error("Bogus", true), "unknown extra option 'Bogus'");
  EXPECT_EQ(extra_error("convert_foo", true), "unknown extra option 'convert_foo'");
  EXPECT_EQ(config_error({{"Bogus", true}}), "unknown config key 'Bogus'");
  EXPECT_EQ(config_error({{"ActivationSymmetric", true}}), "unknown config key 'ActivationSymmetric'");
  EXPECT_EQ(config_error({{"extra_options", {{"quant_format", "QDQ"}}}}), "unknown extra option 'quant_format'");
  EXPECT_EQ(config_error(json::array()), "the config must be a JSON object");
  EXPECT_EQ(config_error({{"extra_options", 1}}), "extra_options must be a JSON object");
  EXPECT_EQ(extra_error("BFPAttributes", {{"bits", 8}}),
            "extra option BFPAttributes: unknown key 'bits' (known: bfp_method, axis, bit_width, block_size, "
            "rounding_mode, sub_block_size, sub_block_shift_bits, convert_to_bfloat_before_bfp)");
  EXPECT_EQ(extra_error("MXAttributes", {{"block_size", "32"}}),
            "extra option MXAttributes: block_size must be an integer, got \"32\"");
  EXPECT_EQ(extra_error("ConvertOpsetVersion", 17), "");
  EXPECT_EQ(extra_error("AlignSomethingNew", true),
            "extra option AlignSomethingNew: onnxptq has no such key of the Align* family (onnxptq options lists "
            "those it has)");
  EXPECT_EQ(extra_error("CalibDataSize", 10), "");
  EXPECT_EQ(extra_error("UseRandomData", true), "");
  EXPECT_EQ(extra_error("RandomDataReaderInputShape", json::array({1, 3})),
            "extra option RandomDataReaderInputShape: expected {input name: shape}, got [1,3]");
  EXPECT_EQ(extra_error("Int16Bias", true), "");
  EXPECT_EQ(extra_error("Int16Bias", 1), "extra option Int16Bias: expected true or false, got 1");
  EXPECT_EQ(extra_error("FixShapes", "x:[1,3]"), "");
  EXPECT_EQ(extra_error("FixShapes", "x:1,3"),
            "extra option FixShapes: 'x:1,3' for 'x' is not NAME:[d1,d2,...] with whole dims of 1 or more");
  EXPECT_EQ(config_error({{"use_dynamic_quant", true}}), "");
  EXPECT_EQ(config_error({{"execution_providers", {"CPUExecutionProvider", "CUDAExecutionProvider"}}}),
            "execution provider 'CUDAExecutionProvider' is not available: onnxptq runs on its own CPU engine "
            "(CPUExecutionProvider)");
  EXPECT_EQ(extra_error("UseQDQVitisCustomOps", false), "");
  EXPECT_EQ(extra_error("ActivationSymmetric", 1), "extra option ActivationSymmetric: expected true or false, got 1");
  EXPECT_EQ(extra_error("CLESteps", 1.5), "extra option CLESteps: expected an integer, got 1.5");
  // Every refused key, whatever its value.
  for (const ConfigKey& k : config_keys()) {
    if (k.status != KeyStatus::Refused) continue;
    const bool family = k.name.back() == '*';
    std::string name = family ? k.name.substr(0, k.name.size() - 1) + "Anything" : k.name;
    for (const json& v : {json(true), json(false), json(0)}) {
      std::string error = extra_error(name, v);
      EXPECT_EQ(error.rfind("extra option " + name + (family ? ": onnxptq has no such key" : " belongs to"), 0), 0u)
          << error;
      if (!family) {
        EXPECT_NE(error.find("not built yet"), std::string::npos) << error;
      }
    }
  }
}

TEST(ConfigKeys, KeysSetTheConfig) {
  QuantConfig c;
  apply_config_json(c, json::parse(R"({"per_channel": true, "fp16_fp32_convert": true, "calibrate_method": "Entropy",
      "extra_options": {"CalibMovingAverageConstant": 0.5, "NPULimitationCheck": false, "FuseL2Norm": true,
                        "CLESteps": 3, "AlignPool": false, "NodePrecision": {"conv": "int16"}}})"));
  EXPECT_TRUE(c.per_channel);
  EXPECT_TRUE(c.convert_fp16_to_fp32);
  EXPECT_EQ(c.calibrate_method, calib::Method::Entropy);
  EXPECT_EQ(c.calib.averaging_constant, 0.5);
  EXPECT_FALSE(c.ipu.enabled);
  EXPECT_EQ(c.dpu_pass_switches, (std::map<std::string, bool>{{"FuseL2Norm", true}}));
  EXPECT_EQ(c.cle.steps, 3);
  EXPECT_EQ(c.align_pool, std::optional<bool>(false));
  ASSERT_EQ(c.node_precision.count("conv"), 1u);
  EXPECT_EQ(c.node_precision.at("conv").activation, ir::DataType::Int16);
}

// `onnxptq options` lists the table; --markdown is docs/options.md's key index, verbatim.
TEST(ConfigKeys, OptionsCommand) {
  cli_test::CliRun list = cli_test::onnxptq("options");
  ASSERT_EQ(list.code, 0) << list.err;
  for (const ConfigKey& k : config_keys()) EXPECT_NE(list.out.find("  " + k.name + " "), std::string::npos) << k.name;
  EXPECT_TRUE(std::regex_search(list.out, std::regex(R"(\n  ActivationSymmetric +bool +false +works\n)"))) << list.out;

  cli_test::CliRun one = cli_test::onnxptq("options ConvertAnythingNew --json");
  ASSERT_EQ(one.code, 0) << one.err;
  json entry = json::parse(one.out);
  EXPECT_EQ(entry["name"], "Convert*");
  EXPECT_EQ(entry["status"], "refused");
  cli_test::expect_one_line_error(cli_test::onnxptq("options Bogus"), "unknown config key or extra option 'Bogus'");

  cli_test::CliRun markdown = cli_test::onnxptq("options --markdown");
  ASSERT_EQ(markdown.code, 0) << markdown.err;
  std::string doc = cli_test::slurp(kOptionsDoc);
  EXPECT_NE(doc.find(std::string(kKeyIndexHeading) + "\n"), std::string::npos);
  EXPECT_NE(doc.find("\n" + markdown.out + "\n"), std::string::npos)
      << "docs/options.md's key index is not `onnxptq options --markdown`'s output";

  cli_test::CliRun help = cli_test::onnxptq("quantize --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("onnxptq options [KEY]"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace onnxptq::quant
