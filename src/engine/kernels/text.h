// Private header of the text family (the string ops of ai.onnx): text.cc has StringNormalizer and
// the registration, text_tfidf.cc TfIdfVectorizer.
#pragma once

#include <string>
#include <vector>

#include "engine/kernel.h"

namespace onnxptq::engine::text {

void register_tfidf_kernels(KernelRegistry& r);  // TfIdfVectorizer

// A strings attribute (empty when absent); Error when the attribute has another type.
std::vector<std::string> text_strings_attr(const ir::Node& node, const std::string& name);

}  // namespace onnxptq::engine::text
