// The layering of the source tree, checked on its #include lines: a folder includes only its own
// headers, lower layers' and the public ones (include/onnxptq/), never a higher layer's; and a
// folder's private headers (those in a subfolder, like src/engine/kernels/, and *_detail.h) stay
// inside it. Tests are exempt: they test private parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace onnxptq {
namespace {

namespace fs = std::filesystem;

// Each folder's layer, lowest first (docs/ARCHITECTURE.md): a folder may include folders of a
// lower layer only. Folders of one layer are independent of each other.
const std::map<std::string, int>& layers() {
  static const std::map<std::string, int> kLayers = {
      {"ir", 0},       {"qmath", 1},    {"engine", 2}, {"passes", 3}, {"calib", 3},  {"quant", 4},
      {"finetune", 5}, {"accuracy", 6}, {"tools", 7},  {"api", 8},    {"cli", 9},   {"python", 9},
  };
  return kLayers;
}

struct Include {
  std::string file;    // relative to the source root
  std::string folder;  // the folder it belongs to: src/<folder>/..., cli, python
  std::string target;  // the included path, as written
  int line = 0;
};

std::vector<Include> project_includes() {
  const fs::path root = ONNXPTQ_SOURCE_DIR;
  std::vector<Include> found;
  const std::regex include_line(R"(^\s*#\s*include\s+"([^"]+)\")");
  for (const char* top : {"src", "cli", "python"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      if (rel.rfind("python/tests/", 0) == 0) continue;
      std::string folder = top;
      if (folder == "src") folder = rel.substr(4, rel.find('/', 4) - 4);
      std::ifstream in(entry.path());
      std::string text;
      int number = 0;
      while (std::getline(in, text)) {
        ++number;
        std::smatch m;
        if (std::regex_search(text, m, include_line)) found.push_back({rel, folder, m[1], number});
      }
    }
  }
  return found;
}

std::string where(const Include& i) {
  return i.file + ":" + std::to_string(i.line) + ": #include \"" + i.target + "\"";
}

TEST(Layering, EveryFolderHasALayer) {
  for (const Include& i : project_includes())
    EXPECT_TRUE(layers().count(i.folder)) << where(i) << ": folder " << i.folder;
}

TEST(Layering, NoFolderIncludesAHigherOrSiblingLayer) {
  size_t checked = 0;
  for (const Include& i : project_includes()) {
    const std::string to = i.target.substr(0, i.target.find('/'));
    if (to == i.target || to == "onnxptq" || to == i.folder) continue;  // same folder or public API
    ASSERT_TRUE(layers().count(to)) << where(i) << ": unknown folder " << to;
    EXPECT_LT(layers().at(to), layers().at(i.folder)) << where(i) << ": " << i.folder << " is below " << to;
    ++checked;
  }
  EXPECT_GT(checked, 100u) << "the scan found too few includes across folders";
}

TEST(Layering, PrivateHeadersStayInTheirFolder) {
  for (const Include& i : project_includes()) {
    const std::string to = i.target.substr(0, i.target.find('/'));
    if (to == i.folder || to == "onnxptq") continue;
    const bool in_subfolder = std::count(i.target.begin(), i.target.end(), '/') > 1;
    const bool detail = i.target.size() > 9 && i.target.compare(i.target.size() - 9, 9, "_detail.h") == 0;
    EXPECT_FALSE(in_subfolder || detail) << where(i) << ": a private header of " << to;
  }
}

// The command line and the Python module are programs on the public API: they include only
// include/onnxptq/ and their own headers (their build sees no src/ either).
TEST(Layering, CommandLineAndPythonUseOnlyThePublicApi) {
  size_t checked = 0;
  for (const Include& i : project_includes()) {
    if (i.folder != "cli" && i.folder != "python") continue;
    const std::string to = i.target.substr(0, i.target.find('/'));
    EXPECT_TRUE(to == "onnxptq" || to == i.folder) << where(i) << ": not the public API";
    ++checked;
  }
  EXPECT_GT(checked, 40u) << "the scan found too few includes in cli/ and python/";
}

}  // namespace
}  // namespace onnxptq
