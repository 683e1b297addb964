// Writing what the tools produce (reports, tables, JSON) the way models are written: never
// half-written, never over the model they came from.
#pragma once

#include <filesystem>
#include <string>

namespace onnxptq {

// Written to a temporary file beside `path`, then renamed. Error naming the file when it cannot be.
void write_text_file(const std::filesystem::path& path, const std::string& text);

// Error when `output` is the file `input` names (compared as files, after links and "./"), so no
// output replaces the model it was made from, or when it exists and is no regular file. `option`
// names the output in the message ("--report", "model_output"). Call it before any work.
void check_output_path(const std::filesystem::path& input, const std::filesystem::path& output,
                       const std::string& option);

}  // namespace onnxptq
