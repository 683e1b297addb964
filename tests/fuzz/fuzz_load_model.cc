// Fuzz target: model bytes -> the loader; a model that loads is saved and loaded again, goes
// through libonnx's shape inference, and runs in the engine on small random inputs.
#include <cstdio>
#include <cstdlib>

#include "engine/session.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "passes/onnx_bridge.h"
#include "small_inputs.h"
#include "tools/random_inputs.h"

using namespace onnxptq;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ir::Model model;
  try {
    // No external data: a location resolves in a folder that does not exist.
    model = ir::parse_model({reinterpret_cast<const char*>(data), size}, "/nonexistent", "fuzz input");
  } catch (const Error&) {
    return 0;
  }
  try {
    ir::parse_model(ir::serialize_model(model), "/nonexistent", "saved fuzz input");
  } catch (const Error& e) {  // what onnxptq writes, it must read back
    fprintf(stderr, "fuzz_load_model: a loaded model does not load once saved: %s\n", e.what());
    abort();
  }
  try {
    passes::onnx_infer_shapes(model);
  } catch (const Error&) {
  }
  try {
    if (auto shapes = fuzz::small_input_shapes(model)) {
      engine::SessionOptions options;
      options.threads = 1;
      engine::Session session(model, options);
      session.run(tools::random_inputs(model.graph->fed_inputs(), 1, *shapes));
    }
  } catch (const Error&) {
  }
  return 0;
}
