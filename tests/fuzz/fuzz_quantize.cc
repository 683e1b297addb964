// Fuzz target: bytes of a mutated tiny model -> quantize_static on one random calibration sample,
// with the default configuration or one of the presets that apply (the input's length picks it,
// so mutations that change the length try another). The quantized model must load again.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "small_inputs.h"

using namespace onnxptq;

namespace {

// The default configuration, then every preset the core takes.
std::vector<quant::QuantConfig> configs() {
  std::vector<quant::QuantConfig> all(1);
  for (const quant::Preset& p : quant::presets()) {
    if (!quant::check_preset(p).empty()) continue;
    quant::apply_preset(all.emplace_back(), p.name);
  }
  for (quant::QuantConfig& c : all) c.calib.threads = 1;
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<quant::QuantConfig> kConfigs = configs();
  try {
    ir::Model model = ir::parse_model({reinterpret_cast<const char*>(data), size}, "/nonexistent", "fuzz input");
    auto shapes = fuzz::small_input_shapes(model);
    if (!shapes) return 0;
    calib::RandomReaderOptions random;
    random.seed = 1;
    random.shapes = *shapes;
    auto reader = calib::make_random_reader(model.graph->fed_inputs(), random);
    quant::QuantizeResult result = quant::quantize_static(model, *reader, kConfigs[size % kConfigs.size()]);
    try {
      ir::parse_model(ir::serialize_model(result.model), "/nonexistent", "quantized fuzz input");
    } catch (const Error& e) {  // what onnxptq writes, it must read back
      fprintf(stderr, "fuzz_quantize: the quantized model does not load: %s\n", e.what());
      abort();
    }
  } catch (const Error&) {
  }
  return 0;
}
