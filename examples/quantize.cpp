// Quantizes a float ONNX model with one of onnxptq's presets, saves it, and compares the float
// and the quantized model's first output on a sample, both run on onnxptq's engine.
//
//   quantize_example MODEL OUTPUT [PRESET [NPY_FOLDER]]
//
// Without NPY_FOLDER the model is calibrated on 8 seeded random samples (fine for a smoke test,
// not for accuracy: give real samples, docs/calibration-data.md).
#include <onnxptq/onnxptq.h>

#include <cmath>
#include <iostream>
#include <memory>

namespace {

// The output's signal to quantization noise ratio in dB.
double sqnr_db(const onnxptq::Tensor& reference, const onnxptq::Tensor& quantized) {
  double signal = 0, noise = 0;
  auto r = reference.values<float>(), q = quantized.values<float>();
  for (size_t i = 0; i < r.size(); ++i) {
    signal += static_cast<double>(r[i]) * r[i];
    noise += (static_cast<double>(r[i]) - q[i]) * (static_cast<double>(r[i]) - q[i]);
  }
  return 10 * std::log10(signal / std::max(noise, 1e-30));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " MODEL OUTPUT [PRESET [NPY_FOLDER]]\n";
    return 2;
  }
  try {
    onnxptq::Model model = onnxptq::Model::load(argv[1]);
    onnxptq::Config config = onnxptq::Config::preset(argc > 3 ? argv[3] : "XINT8");
    std::unique_ptr<onnxptq::DataReader> reader =
        argc > 4 ? onnxptq::npy_folder_reader(argv[4], model) : onnxptq::random_reader(model, {.count = 8});

    onnxptq::QuantizeOptions options;
    options.log = [](const std::string& line) { std::cerr << line << "\n"; };
    onnxptq::QuantizeOutcome quantized = onnxptq::quantize(model, *reader, config, options);
    quantized.model.save(argv[2]);
    std::cout << quantized.summary;

    reader->rewind();
    onnxptq::Feed sample = *reader->next();
    onnxptq::Session float_run(model), quantized_run(quantized.model);
    double db = sqnr_db(float_run.run(sample)[0], quantized_run.run(sample)[0]);
    std::cout << "output " << model.outputs()[0].name << ": SQNR " << db << " dB on one sample\n";
    std::cout << "quantized model written to " << argv[2] << " (onnxptq " << onnxptq::version() << ")\n";
  } catch (const onnxptq::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.kind() == onnxptq::ErrorKind::unsupported ? 3 : 2;
  }
  return 0;
}
