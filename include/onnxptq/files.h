// Reading the text files a user names (configs, ranges, statistics) and writing what the tools
// produce (reports, tables, JSON) the way models are written: never half-written, never over the
// model they came from.
#pragma once

#include <filesystem>
#include <string>

namespace onnxptq {

// The whole file; Error starting with `what` (the option that names it) when it does not exist,
// is not a regular file (a folder) or cannot be read.
std::string read_text_file(const std::filesystem::path& path, const std::string& what);

// Written to a temporary file beside `path`, then renamed. Error naming the file when it cannot be.
void write_text_file(const std::filesystem::path& path, const std::string& text);

// Error when `output` is the file `input` names (compared as files, after links and "./"), so no
// output replaces the model it was made from, or when it exists and is no regular file. `option`
// names the output in the message ("--report", "model_output"). Call it before any work.
void check_output_path(const std::filesystem::path& input, const std::filesystem::path& output,
                       const std::string& option);

}  // namespace onnxptq
