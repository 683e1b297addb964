// onnxptq's public C++ API, all of it: load a float ONNX model, feed calibration samples,
// quantize it with a configuration of vai_q_onnx / Quark for ONNX, save the result.
//
//   onnxptq::Model model = onnxptq::Model::load("model.onnx");
//   auto reader = onnxptq::npy_folder_reader("calib/", model);
//   onnxptq::QuantizeOutcome q = onnxptq::quantize(model, *reader, onnxptq::Config::preset("XINT8"));
//   q.model.save("model.q.onnx");
//
// Link with the CMake target onnxptq::onnxptq (find_package(onnxptq)) or pkg-config's onnxptq.
#pragma once

#include "onnxptq/calibrate.h"
#include "onnxptq/check_npu.h"
#include "onnxptq/compare.h"
#include "onnxptq/config.h"
#include "onnxptq/convert.h"
#include "onnxptq/data_reader.h"
#include "onnxptq/data_type.h"
#include "onnxptq/dump_model.h"
#include "onnxptq/error.h"
#include "onnxptq/evaluate.h"
#include "onnxptq/files.h"
#include "onnxptq/inspect.h"
#include "onnxptq/model.h"
#include "onnxptq/preprocess.h"
#include "onnxptq/quantize.h"
#include "onnxptq/random_inputs.h"
#include "onnxptq/readers.h"
#include "onnxptq/sample_ranks.h"
#include "onnxptq/sensitivity.h"
#include "onnxptq/session.h"
#include "onnxptq/tensor.h"
#include "onnxptq/tensor_files.h"

namespace onnxptq {

// "0.1.0"
const char* version();

}  // namespace onnxptq
