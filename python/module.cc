// onnxptq._core: the C++ quantizer and evaluate tool for Python (the package python/onnxptq gives
// them the vai_q_onnx and Quark names). Numpy arrays from a reader become tensors without a copy
// where their layout allows; the GIL is released while the core works and taken back only to
// pull the next sample from a Python reader.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "onnxptq/onnxptq.h"

namespace py = pybind11;

namespace onnxptq::python {
namespace {

// Keeps a Python object alive as long as a tensor views its memory. The last tensor may be
// freed on any thread of the core, so the reference is dropped under the GIL.
std::shared_ptr<const void> hold(py::object object) {
  PyObject* p = object.release().ptr();
  return std::shared_ptr<const void>(p, [](const void* q) {
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(const_cast<void*>(q)));
  });
}

// The element type of a numpy dtype; Undefined for types ONNX has no name for here.
DataType data_type_of(const py::dtype& dtype) {
  char kind = dtype.kind();
  size_t size = static_cast<size_t>(dtype.itemsize());
  if (kind == 'f') {
    if (size == 2) return DataType::Float16;
    if (size == 4) return DataType::Float;
    if (size == 8) return DataType::Double;
  } else if (kind == 'i') {
    if (size == 1) return DataType::Int8;
    if (size == 2) return DataType::Int16;
    if (size == 4) return DataType::Int32;
    if (size == 8) return DataType::Int64;
  } else if (kind == 'u') {
    if (size == 1) return DataType::UInt8;
    if (size == 2) return DataType::UInt16;
    if (size == 4) return DataType::UInt32;
    if (size == 8) return DataType::UInt64;
  } else if (kind == 'b') {
    return DataType::Bool;
  }
  return DataType::Undefined;
}

void warn(const std::string& message) {
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw py::error_already_set();
}

// progress(phase, unit, done, total), called with the GIL taken; none for None.
ProgressFunction progress_function(py::object progress) {
  if (progress.is_none()) return {};
  auto function = std::make_shared<py::object>(std::move(progress));
  return [function](const Progress& p) {
    py::gil_scoped_acquire gil;
    (*function)(std::string(p.phase), std::string(p.unit), p.done, p.total);
  };
}

// The seeds' calibration data reader protocol over any Python object with get_next() returning
// a dict of input name to numpy array, or None (or an empty dict) at the end. A reader with
// rewind() (or reset()) is asked to start over; any other is read once and its samples (the
// arrays themselves, not copies) are replayed for the quantizer's later passes.
class PythonReader final : public DataReader {
 public:
  PythonReader(py::object reader, const std::vector<ValueInfo>& inputs) : reader_(std::move(reader)) {
    for (const ValueInfo& v : inputs) inputs_[v.name] = v.dtype;
    name_ = py::str(py::type::of(reader_).attr("__name__"));
    if (!py::hasattr(reader_, "get_next"))
      throw Error("calibration_data_reader: a " + name_ + " has no get_next() method");
    for (const char* method : {"rewind", "reset"})
      if (py::hasattr(reader_, method) && PyCallable_Check(reader_.attr(method).ptr())) {
        rewind_method_ = method;
        break;
      }
    if (py::hasattr(reader_, "__len__")) {
      try {
        size_ = py::len(reader_);
      } catch (const py::error_already_set&) {
        PyErr_Clear();  // a length it cannot tell is no length
      }
    }
  }

  std::optional<Feed> next() override {
    if (rewind_method_.empty() && position_ < cache_.size()) return cache_[position_++];
    if (done_) return std::nullopt;
    py::gil_scoped_acquire gil;
    // Ctrl-C while the core was working arrives here, as KeyboardInterrupt.
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    py::object sample = reader_.attr("get_next")();
    if (sample.is_none() || (PyDict_Check(sample.ptr()) && py::len(sample) == 0)) {
      done_ = true;
      return std::nullopt;
    }
    Feed feed = to_feed(sample);
    ++pulled_;
    if (rewind_method_.empty()) {
      cache_.push_back(feed);
      ++position_;
    }
    return feed;
  }

  std::optional<size_t> size() const override { return size_; }
  bool can_rewind() const override { return true; }

  void rewind() override {
    position_ = 0;
    if (rewind_method_.empty()) return;
    py::gil_scoped_acquire gil;
    reader_.attr(rewind_method_.c_str())();
    done_ = false;
    pulled_ = 0;
  }

  std::string describe() const override { return "Python reader " + name_; }

 private:
  Feed to_feed(const py::object& sample) {
    std::string where = "calibration_data_reader " + name_ + ", sample " + std::to_string(pulled_);
    if (!PyDict_Check(sample.ptr()))
      throw Error(where + ": get_next() returned a " + std::string(py::str(py::type::of(sample).attr("__name__"))) +
                  "; expected a dict of input name to numpy array, or None at the end");
    py::module_ numpy = py::module_::import("numpy");
    Feed feed;
    for (auto [key, value] : py::reinterpret_borrow<py::dict>(sample)) {
      if (!py::isinstance<py::str>(key)) throw Error(where + ": a key of the dict is not a string");
      std::string name = py::str(key);
      auto input = inputs_.find(name);
      if (input == inputs_.end()) throw Error(where + ": '" + name + "' is not an input of the model" + known_inputs());
      feed[name] = to_tensor(name, input->second, py::reinterpret_borrow<py::object>(value), numpy, where);
    }
    for (const auto& [name, type] : inputs_)
      if (!feed.count(name)) throw Error(where + ": no array for the model input '" + name + "'" + known_inputs());
    return feed;
  }

  Tensor to_tensor(const std::string& name, DataType expected, py::object value, py::module_& numpy,
                   const std::string& where) {
    py::array array = numpy.attr("asarray")(value);
    DataType got = data_type_of(array.dtype());
    if (got != expected) {
      bool widened = got == DataType::Double && expected == DataType::Float;
      if (!widened)
        throw Error(where + ", input '" + name + "': array of " + std::string(py::str(array.dtype())) +
                    ", the model wants " + std::string(data_type_name(expected)));
      if (!warned_double_) {
        warn(where + ", input '" + name + "': float64 array converted to float32 (the model input's type)");
        warned_double_ = true;
      }
      array = array.attr("astype")("float32");
    }
    bool native = py::bool_(array.dtype().attr("isnative"));
    if (!native) array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
    if (!(array.flags() & py::array::c_style)) {
      if (!warned_layout_) {
        warn(where + ", input '" + name + "': array is not C-contiguous; copied to C order");
        warned_layout_ = true;
      }
      array = numpy.attr("ascontiguousarray")(array);
    }
    std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
    auto data = static_cast<const std::byte*>(array.data());
    size_t bytes = static_cast<size_t>(array.nbytes());
    // Read again after the whole first pass: a reader that refills one array would change
    // the samples already cached.
    if (rewind_method_.empty() && bytes > 0) {
      auto [it, fresh] = cached_data_.emplace(data, pulled_);
      if (!fresh)
        throw Error(where + ", input '" + name + "': the same array as sample " + std::to_string(it->second) +
                    "; a reader without rewind() must return a new array for each sample");
    }
    return Tensor(expected, std::move(dims), Bytes::view(hold(array), data, bytes));
  }

  std::string known_inputs() const {
    std::string known;
    for (const auto& [name, type] : inputs_) known += (known.empty() ? "" : ", ") + name;
    return " (model inputs: " + known + ")";
  }

  py::object reader_;
  std::string name_;
  std::map<std::string, DataType> inputs_;
  std::string rewind_method_;
  std::optional<size_t> size_;
  std::vector<Feed> cache_;
  std::map<const std::byte*, size_t> cached_data_;
  size_t position_ = 0;
  size_t pulled_ = 0;
  bool done_ = false;
  bool warned_double_ = false;
  bool warned_layout_ = false;
};

std::vector<int64_t> shape_of(const py::handle& shape, const std::string& what) {
  std::vector<int64_t> dims;
  size_t i = 0;
  for (py::handle d : shape) {
    bool is_int = py::isinstance<py::int_>(d) && !py::isinstance<py::bool_>(d);
    int64_t v = is_int ? d.cast<int64_t>() : 0;
    // The seeds' rule: a batch dimension that is not a positive integer becomes 1.
    if (v <= 0) {
      if (i != 0) throw Error(what + ": dimension " + std::to_string(i) + " must be a positive integer");
      v = 1;
    }
    dims.push_back(v);
    ++i;
  }
  return dims;
}

bool is_sequence(const py::handle& h) { return py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h); }

// random_data_reader_input_shape: one shape for every input, a list of shapes by input
// position, or a dict of input name to shape.
std::map<std::string, std::vector<int64_t>> random_shapes(const py::object& spec,
                                                          const std::vector<ValueInfo>& inputs) {
  const std::string what = "random_data_reader_input_shape";
  std::map<std::string, std::vector<int64_t>> shapes;
  if (spec.is_none()) return shapes;
  if (py::isinstance<py::dict>(spec)) {
    for (auto [key, shape] : spec.cast<py::dict>()) {
      std::string name = py::str(key);
      bool known = false;
      for (const ValueInfo& v : inputs) known = known || v.name == name;
      if (!known) throw Error(what + ": '" + name + "' is not an input of the model");
      shapes[name] = shape_of(shape, what + "['" + name + "']");
    }
    return shapes;
  }
  if (!is_sequence(spec)) throw Error(what + ": expected a list, a tuple or a dict of input name to shape");
  py::sequence seq = spec.cast<py::sequence>();
  if (py::len(seq) == 0) return shapes;
  if (is_sequence(seq[0])) {
    if (py::len(seq) != inputs.size())
      throw Error(what + ": " + std::to_string(py::len(seq)) + " shapes for " + std::to_string(inputs.size()) +
                  " model inputs");
    for (size_t i = 0; i < inputs.size(); ++i)
      shapes[inputs[i].name] = shape_of(seq[i], what + "[" + std::to_string(i) + "]");
  } else {
    for (const ValueInfo& v : inputs) shapes[v.name] = shape_of(seq, what);
  }
  return shapes;
}

std::map<std::string, std::pair<double, double>> random_ranges(const py::object& spec) {
  std::map<std::string, std::pair<double, double>> ranges;
  if (spec.is_none()) return ranges;
  if (!py::isinstance<py::dict>(spec))
    throw Error("RandomDataReaderInputDataRange: expected a dict of input name to [low, high]");
  for (auto [key, range] : spec.cast<py::dict>()) {
    std::string name = py::str(key);
    if (!is_sequence(range) || py::len(range) != 2)
      throw Error("RandomDataReaderInputDataRange['" + name + "']: expected [low, high]");
    py::sequence r = py::reinterpret_borrow<py::sequence>(range);
    ranges[name] = {r[0].cast<double>(), r[1].cast<double>()};
  }
  return ranges;
}

// A Python metric (model path -> number), called with the GIL; none: no function.
EvaluateFunction metric_function(const py::object& f, const std::string& what) {
  if (f.is_none()) return {};
  if (!PyCallable_Check(f.ptr())) throw Error(what + " must be callable");
  auto function = std::make_shared<py::object>(f);
  return [function, what](const std::filesystem::path& model, const std::string& trial) {
    py::gil_scoped_acquire gil;
    try {
      return (*function)(model.string()).cast<double>();
    } catch (py::error_already_set& e) {
      throw Error(trial + ": " + what + " raised " + e.what());
    } catch (const py::cast_error&) {
      throw Error(trial + ": " + what + " returned something that is not a number");
    }
  };
}

// The accuracy_target dict of quantize_static (docs/python.md): the search's target, and its
// evaluate_function(model_path) -> float called under the GIL.
std::pair<AccuracyTarget, EvaluateFunction> accuracy_target(const py::dict& target) {
  static const std::set<std::string> keys = {
      "evaluate_function", "lower_is_better", "max_loss",           "max_relative_loss", "min_sqnr",
      "max_trials",        "time_limit",      "stop_at_first_pass", "held_out",          "output_index",
      "fallback_order",    "fallback_type",   "finetune_recipe"};
  for (auto [key, value] : target)
    if (!keys.count(py::str(key))) throw Error("accuracy_target: unknown key '" + std::string(py::str(key)) + "'");
  auto get = [&](const char* key) -> py::object {
    if (!target.contains(key)) return py::none();
    return target[key];
  };
  auto number = [&](const char* key) -> std::optional<double> {
    py::object v = get(key);
    if (v.is_none()) return std::nullopt;
    return v.cast<double>();
  };
  AccuracyTarget t;
  t.lower_is_better = !get("lower_is_better").is_none() && get("lower_is_better").cast<bool>();
  t.max_loss = number("max_loss");
  t.max_relative_loss = number("max_relative_loss");
  t.min_sqnr = number("min_sqnr");
  if (auto v = number("max_trials")) t.max_trials = static_cast<size_t>(*v);
  if (auto v = number("time_limit")) t.time_limit = *v;
  t.stop_at_first_pass = !get("stop_at_first_pass").is_none() && get("stop_at_first_pass").cast<bool>();
  t.finetune_recipe = get("finetune_recipe").is_none() || get("finetune_recipe").cast<bool>();
  if (auto v = number("held_out")) t.held_out = static_cast<size_t>(*v);
  if (auto v = number("output_index")) t.output_index = static_cast<size_t>(*v);
  if (py::object v = get("fallback_order"); !v.is_none()) t.fallback_order = py::str(v);
  if (py::object v = get("fallback_type"); !v.is_none()) t.fallback_type = py::str(v);
  return {t, metric_function(get("evaluate_function"), "evaluate_function")};
}

// The model a call names: a file path (str), or a serialized onnx.ModelProto (bytes), parsed
// from the bytes object's own buffer with the GIL released (the caller holds the object).
Model model_of(const py::object& model_input) {
  if (py::isinstance<py::bytes>(model_input)) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(model_input.ptr(), &data, &size) != 0) throw py::error_already_set();
    py::gil_scoped_release nogil;
    return Model::from_bytes(std::string_view(data, static_cast<size_t>(size)), {}, "model_input (ModelProto)");
  }
  std::string path = model_input.cast<std::string>();
  py::gil_scoped_release nogil;
  return Model::load(path);
}

// [(name, ONNX element type number, dims)] of the inputs a run feeds.
py::list input_list(const Model& model) {
  py::list out;
  for (const ValueInfo& v : model.inputs()) out.append(py::make_tuple(v.name, static_cast<int>(v.dtype), v.dims));
  return out;
}

// quantize_static of the core with a config in the JSON form of `onnxptq quantize --config`;
// with `target` (a dict, or None), the accuracy-target search. `model_input` is a path or the
// bytes of a ModelProto; with `model_output` "" the quantized model comes back as bytes.
// `make_reader`, when not None, is called with the model's inputs (input_list) and returns the
// reader to use. Returns {"summary": text, "warnings": [...], "report": {...}, "model": bytes or
// None} (the report with "accuracy_target" after a search).
py::dict quantize_static(const py::object& model_input, const std::string& model_output, py::object reader,
                         const std::string& config_json, py::object shapes, py::object ranges, bool external_data,
                         bool log_progress, py::object target, py::object auto_mp_evaluate, py::object progress,
                         py::object make_reader) {
  QuantizeOptions options;
  options.progress = progress_function(progress);
  if (!target.is_none()) {
    if (!py::isinstance<py::dict>(target)) throw Error("accuracy_target: expected a dict");
    std::tie(options.target, options.evaluate) = accuracy_target(target.cast<py::dict>());
  } else {
    options.evaluate = metric_function(auto_mp_evaluate, "AutoMixprecision's EvaluateFunction");
  }
  bool from_file = !py::isinstance<py::bytes>(model_input);
  if (from_file) options.model_path = model_input.cast<std::string>();
  Config config = Config::from_json(config_json);
  config.check();  // before reading any data
  if (from_file && !model_output.empty()) check_output_path(options.model_path, model_output, "model_output");
  std::optional<Model> model = model_of(model_input);
  if (!make_reader.is_none()) reader = make_reader(input_list(*model));
  std::vector<std::string> warnings;
  std::unique_ptr<DataReader> data;
  if (reader.is_none()) {
    if (!config.uses_dynamic_quant()) warnings.push_back(kNoCalibrationData);
    RandomData r;  // the seeds' RandomDataReader: one sample (seed 0 here)
    std::vector<ValueInfo> inputs = model->inputs();
    r.shapes = random_shapes(shapes, inputs);
    r.ranges = random_ranges(ranges);
    data = random_reader(*model, r);
  } else if (!config.uses_random_data()) {
    if (!shapes.is_none() && !(is_sequence(shapes) && py::len(shapes) == 0) &&
        !(py::isinstance<py::dict>(shapes) && py::len(shapes) == 0))
      throw Error("random_data_reader_input_shape is for the random data reader (calibration_data_reader=None)");
    if (!ranges.is_none())
      throw Error("RandomDataReaderInputDataRange is for the random data reader (calibration_data_reader=None)");
    data = std::make_unique<PythonReader>(reader, model->inputs());
  } else {  // UseRandomData: the core calibrates on its random sample
    warnings.push_back("UseRandomData: calibrating on its random sample; the calibration_data_reader is not read");
    data = std::make_unique<PythonReader>(reader, model->inputs());
  }

  std::mutex log_mutex;
  options.log = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mutex);
    if (line.rfind("warning: ", 0) == 0) warnings.push_back(line.substr(9));
    if (log_progress) std::cerr << "onnxptq: " << line << std::endl;
  };
  std::string summary, report, bytes;
  {
    py::gil_scoped_release nogil;
    QuantizeOutcome result = quantize(*model, *data, config, options);
    if (!result.search_summary.empty()) options.log((result.target_met ? "" : "warning: ") + result.search_summary);
    if (model_output.empty())
      bytes = result.model.to_bytes();
    else
      result.model.save(model_output, external_data);
    summary = result.summary;
    report = result.report_json;
  }
  py::dict out;
  out["summary"] = summary;
  out["warnings"] = warnings;
  out["report"] = py::module_::import("json").attr("loads")(report);
  out["model"] = model_output.empty() ? py::object(py::bytes(bytes)) : py::object(py::none());
  return out;
}

// The sensitivity analysis (onnxptq/sensitivity.h) of the model file with `config`: a preset's
// name, or quantize_static's arguments in the JSON form of `onnxptq quantize --config`. Returns
// the JSON form of `onnxptq sensitivity --json`; `html_path`, when not empty, gets the page.
py::object sensitivity(const std::string& model_input, py::object reader, const std::string& config, size_t samples,
                       size_t output_index, bool split, bool left_float, const std::string& html_path,
                       py::object progress) {
  Config c = Config::has_preset(config) ? Config::preset(config) : Config::from_json(config);
  c.check();  // before the model is read
  if (!html_path.empty()) check_output_path(model_input, html_path, "html_path");
  std::optional<Model> model;
  {
    py::gil_scoped_release nogil;
    model = Model::load(model_input);
  }
  std::unique_ptr<DataReader> data;
  if (reader.is_none())
    data = random_reader(*model);
  else
    data = std::make_unique<PythonReader>(reader, model->inputs());
  SensitivityOptions options;
  options.samples = samples;
  options.output_index = output_index;
  options.split = split;
  options.left_float = left_float;
  options.progress = progress_function(progress);  // under the GIL: it holds a Python object
  std::string json;
  {
    py::gil_scoped_release nogil;
    SensitivityReport report = analyze_sensitivity(*model, *data, c, options);
    json = report.to_json();
    if (!html_path.empty()) write_text_file(html_path, report.to_html(model_input));
  }
  return py::module_::import("json").attr("loads")(json);
}

// The checks quantize_static makes on its arguments before reading anything (for presets).
void check_config(const std::string& config_json) { Config::from_json(config_json).check(); }

// The preset table: [{"name", "description", "config": JSON text}, ...].
py::list presets() {
  py::list out;
  for (const PresetInfo& p : Config::presets()) {
    py::dict d;
    d["name"] = p.name;
    d["description"] = p.description;
    d["config"] = p.config_json;
    out.append(d);
  }
  return out;
}

py::dict evaluate(const std::string& baseline, const std::string& quantized) {
  EvaluateReport report;
  {
    py::gil_scoped_release nogil;
    report = evaluate_folders(baseline, quantized);
  }
  py::dict out = py::module_::import("json").attr("loads")(report.to_json());
  out["text"] = report.to_table();
  return out;
}

py::dict convert_result(const ConvertResult& r) {
  py::dict out;
  out["changed"] = r.changed;
  out["log"] = r.log;
  return out;
}

// The model tools (onnxptq/convert.h) by name, file to file: `options` holds a tool's own
// arguments (fix_shapes: "fix_shapes"; fp32_to_fp16: "keep_io_types", "op_block_list",
// "node_block_list"; the bf16 tools: "format"). Returns {"changed", "log"}.
py::dict convert(const std::string& tool, const std::string& model_input, const std::string& model_output,
                 const py::dict& options, bool external_data) {
  auto text = [&](const char* key, const std::string& fallback) {
    return options.contains(key) && !options[key].is_none() ? options[key].cast<std::string>() : fallback;
  };
  std::map<std::string, std::vector<int64_t>> shapes;
  if (tool == "fix_shapes" && !text("fix_shapes", "").empty()) shapes = parse_fix_shapes(text("fix_shapes", ""));
  Fp16Options fp16;
  if (options.contains("keep_io_types")) fp16.keep_io_types = options["keep_io_types"].cast<bool>();
  if (options.contains("op_block_list") && !options["op_block_list"].is_none())
    fp16.op_block_list = options["op_block_list"].cast<std::vector<std::string>>();
  if (options.contains("node_block_list") && !options["node_block_list"].is_none())
    fp16.node_block_list = options["node_block_list"].cast<std::vector<std::string>>();
  Bf16Format format = parse_bf16_format(text("format", "with_cast"));
  std::function<Converted(const Model&)> run;
  if (tool == "remove_qdq")
    run = [](const Model& m) { return remove_qdq(m); };
  else if (tool == "qdq_to_qop")
    run = [](const Model& m) { return qdq_to_qop(m); };
  else if (tool == "fix_shapes")
    run = [shapes](const Model& m) { return fix_shapes(m, shapes); };
  else if (tool == "a8w8_npu_to_cpu")
    run = [](const Model& m) { return a8w8_npu_to_cpu(m); };
  else if (tool == "u16u8_to_u8u8")
    run = [](const Model& m) { return u16u8_to_u8u8(m); };
  else if (tool == "block_to_standard_ops")
    run = [](const Model& m) { return block_to_standard_ops(m); };
  else if (tool == "bias_int32_to_int16")
    run = [](const Model& m) { return bias_int32_to_int16(m); };
  else if (tool == "lstm_to_customlstm")
    run = [](const Model& m) { return lstm_to_customlstm(m); };
  else if (tool == "fp32_to_fp16")
    run = [fp16](const Model& m) { return fp32_to_fp16(m, fp16); };
  else if (tool == "fp32_to_bf16")
    run = [format](const Model& m) { return fp32_to_bf16(m, format); };
  else if (tool == "fp16_to_bf16")
    run = [format](const Model& m) { return fp16_to_bf16(m, format); };
  else
    throw Error("unknown model tool '" + tool + "'", ErrorKind::internal);
  check_output_path(model_input, model_output, "output_model_path");
  ConvertResult result;
  {
    py::gil_scoped_release nogil;
    Model model = Model::load(model_input);
    Converted c = run(model);
    c.model.save(model_output, external_data);
    result = std::move(c.result);
  }
  return convert_result(result);
}

// Quark's dump_model: the first sample of `reader` (None: the seeds' random sample, `shapes` as
// random_data_reader_input_shape) through the model; returns {"quantized", "float_tensors", "warnings"}.
py::dict dump(const std::string& model_input, py::object reader, py::object shapes, bool dump_float,
              const std::string& output_dir) {
  std::optional<Model> model;
  {
    py::gil_scoped_release nogil;
    model = Model::load(model_input);
  }
  std::unique_ptr<DataReader> data;
  if (reader.is_none()) {
    RandomData r;
    r.shapes = random_shapes(shapes, model->inputs());
    data = random_reader(*model, r);
  } else {
    data = std::make_unique<PythonReader>(reader, model->inputs());
  }
  DumpOptions options;
  options.dump_float = dump_float;
  options.output_dir = output_dir;
  DumpResult result;
  {
    py::gil_scoped_release nogil;
    result = dump_model(*model, *data, options);
  }
  py::dict out;
  out["quantized"] = result.quantized;
  out["float_tensors"] = result.float_tensors;
  out["warnings"] = result.warnings;
  return out;
}

}  // namespace
}  // namespace onnxptq::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "onnxptq's C++ core: quantize_static, the evaluate tool and the model tools (use the onnxptq package)";
  // onnxptq.Error (a ValueError) for bad input; UnsupportedError (also a NotImplementedError)
  // and InternalError (also a RuntimeError) are kinds of it, as ErrorKind says.
  static PyObject* error = PyErr_NewException("onnxptq._core.Error", PyExc_ValueError, nullptr);
  static PyObject* unsupported = PyErr_NewException(
      "onnxptq._core.UnsupportedError",
      py::make_tuple(py::handle(error), py::handle(PyExc_NotImplementedError)).release().ptr(), nullptr);
  static PyObject* internal =
      PyErr_NewException("onnxptq._core.InternalError",
                         py::make_tuple(py::handle(error), py::handle(PyExc_RuntimeError)).release().ptr(), nullptr);
  m.attr("Error") = py::handle(error);
  m.attr("UnsupportedError") = py::handle(unsupported);
  m.attr("InternalError") = py::handle(internal);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const onnxptq::Error& e) {
      PyObject* type = e.kind() == onnxptq::ErrorKind::unsupported ? unsupported
                       : e.kind() == onnxptq::ErrorKind::internal  ? internal
                                                                   : error;
      PyErr_SetString(type, e.what());
    }
  });
  m.def("quantize_static", &onnxptq::python::quantize_static, py::arg("model_input"), py::arg("model_output"),
        py::arg("reader"), py::arg("config_json"), py::arg("random_shapes"), py::arg("random_ranges"),
        py::arg("external_data"), py::arg("log_progress"), py::arg("target") = py::none(),
        py::arg("auto_mp_evaluate") = py::none(), py::arg("progress") = py::none(),
        py::arg("make_reader") = py::none());
  m.def("sensitivity", &onnxptq::python::sensitivity, py::arg("model_input"), py::arg("reader"), py::arg("config"),
        py::arg("samples"), py::arg("output_index"), py::arg("split"), py::arg("left_float"), py::arg("html_path"),
        py::arg("progress") = py::none());
  m.def("check_config", &onnxptq::python::check_config, py::arg("config_json"));
  m.def("presets", &onnxptq::python::presets);
  m.def("evaluate", &onnxptq::python::evaluate, py::arg("baseline"), py::arg("quantized"));
  m.def("convert", &onnxptq::python::convert, py::arg("tool"), py::arg("model_input"), py::arg("model_output"),
        py::arg("options"), py::arg("external_data"));
  m.def("dump_model", &onnxptq::python::dump, py::arg("model_input"), py::arg("reader"), py::arg("shapes"),
        py::arg("dump_float"), py::arg("output_dir"));
}
