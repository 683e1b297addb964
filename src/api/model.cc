// The public Model, Session and readers over the IR, the engine and calib's readers.
#include "onnxptq/model.h"

#include "calib/data_reader.h"
#include "engine/session.h"
#include "ir/model.h"
#include "onnxptq/readers.h"
#include "onnxptq/session.h"

namespace onnxptq {
namespace {

std::vector<ValueInfo> infos(const std::vector<const ir::Value*>& values) {
  std::vector<ValueInfo> out;
  for (const ir::Value* v : values) {
    ValueInfo info{v->name(), v->type.elem_type, {}};
    for (const ir::Dim& d : v->type.shape) info.dims.push_back(d.has_value ? d.value : -1);
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace

Model::Model(std::shared_ptr<const ir::Model> model) : model_(std::move(model)) {
  if (!model_) throw Error("Model: no model", ErrorKind::internal);
}

Model Model::load(const std::filesystem::path& path) {
  return Model(std::make_shared<const ir::Model>(ir::load_model(path)));
}

Model Model::from_bytes(std::string_view bytes, const std::filesystem::path& base_dir, const std::string& name) {
  return Model(std::make_shared<const ir::Model>(ir::parse_model(bytes, base_dir, name)));
}

std::string Model::to_bytes() const { return ir::serialize_model(*model_); }

void Model::save(const std::filesystem::path& path, bool external_data) const {
  SaveOptions o;
  if (external_data) o.external_data = SaveOptions::ExternalData::Always;
  ir::save_model(*model_, path, o);
}

void Model::save(const std::filesystem::path& path, const SaveOptions& options) const {
  const std::filesystem::path name(options.data_file_name);
  if (!options.data_file_name.empty() && (name.has_parent_path() || name == "." || name == ".."))
    throw Error("SaveOptions::data_file_name '" + options.data_file_name +
                "' must be a file name (the data file is written beside the model)");
  ir::save_model(*model_, path, options);
}

std::vector<ValueInfo> Model::inputs() const { return infos(model_->graph->fed_inputs()); }

std::vector<ValueInfo> Model::outputs() const {
  return infos({model_->graph->outputs().begin(), model_->graph->outputs().end()});
}

int64_t Model::opset() const { return model_->opset(""); }

Session::Session(const Model& model, const SessionOptions& options) {
  engine::SessionOptions o;
  o.threads = options.threads;
  session_ = std::make_unique<engine::Session>(model.ir(), o);
}

Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<std::string> Session::input_names() const {
  std::vector<std::string> names;
  for (const ir::Value* v : session_->inputs()) names.push_back(v->name());
  return names;
}

std::vector<std::string> Session::output_names() const {
  std::vector<std::string> names;
  for (const ir::Value* v : session_->outputs()) names.push_back(v->name());
  return names;
}

int Session::threads() const { return session_->threads(); }

std::vector<Tensor> Session::run(const Feed& feeds) const { return session_->run(feeds); }

std::vector<Tensor> Session::run(const Feed& feeds, std::vector<NodeTime>& times) const {
  const engine::NodeTimer timer = [&times](const ir::Node& node, double seconds) {
    const bool plain = node.domain.empty() || node.domain == "ai.onnx";
    const std::string name = !node.name.empty() || node.outputs().empty() || !node.output(0) ? node.name
                                                                                            : node.output(0)->name();
    times.push_back({name, plain ? node.op_type : node.domain + "." + node.op_type, seconds});
  };
  engine::RunHooks hooks;
  hooks.time_node = &timer;
  return session_->run(feeds, hooks);
}

std::unique_ptr<DataReader> npy_folder_reader(const std::filesystem::path& folder, const Model& model) {
  return calib::make_npy_folder_reader(folder, model.ir().graph->fed_inputs());
}

std::unique_ptr<DataReader> image_folder_reader(const std::filesystem::path& folder, const Model& model,
                                                const std::string& spec) {
  return calib::make_image_folder_reader(folder, model.ir().graph->fed_inputs(), calib::parse_image_spec(spec));
}

std::unique_ptr<DataReader> random_reader(const Model& model, const RandomData& data) {
  calib::RandomReaderOptions o;
  o.count = data.count;
  o.seed = data.seed;
  o.shapes = data.shapes;
  o.ranges = data.ranges;
  return calib::make_random_reader(model.ir().graph->fed_inputs(), o);
}

CallbackReader::CallbackReader(std::function<std::optional<Feed>()> next, std::string description,
                               std::function<void()> rewind, std::optional<size_t> size)
    : next_(std::move(next)), rewind_(std::move(rewind)), description_(std::move(description)), size_(size) {
  if (!next_) throw Error("CallbackReader '" + description_ + "': no function to call");
}

std::optional<Feed> CallbackReader::next() {
  if (replaying_ && replayed_ < kept_.size()) return kept_[replayed_++];
  if (done_) return std::nullopt;
  std::optional<Feed> feed = next_();
  if (!feed) {
    done_ = true;
    return std::nullopt;
  }
  if (!rewind_) {
    kept_.push_back(*feed);  // shares the tensors' data
    replayed_ = kept_.size();
  }
  return feed;
}

void CallbackReader::rewind() {
  if (rewind_) {
    rewind_();
    done_ = false;
    return;
  }
  replaying_ = true;
  replayed_ = 0;
}

}  // namespace onnxptq
