// The one signature every graph pass has (shared/DESIGN.md): it rewrites the model in place and
// says whether it changed anything. Passes that need options take them from PassContext.
#pragma once

#include <string>
#include <vector>

#include "ir/model.h"

namespace onnxptq::passes {

// What a pipeline hands to its passes: options shared by several passes, and where they say
// what they did (one line each; the CLI prints them under --verbose).
struct PassContext {
  int64_t target_opset = 13;  // opset_upgrade: models below this opset are converted to it
  bool verbose = false;
  std::vector<std::string> log;
};

using PassFunction = bool (*)(ir::Model& model, PassContext& context);

struct PassInfo {
  const char* name;     // as on the command line and in pipelines: "fold_batch_norm"
  const char* purpose;  // one line
  PassFunction run;
};

}  // namespace onnxptq::passes
