// Loading and saving: every field survives, external data in and out, and every kind of bad
// file gives its own one-line error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "support/proto_compare.h"

namespace onnxptq::ir {
namespace {

namespace fs = std::filesystem;

class LoadSave : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("onnxptq_ls_" + std::to_string(getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path path(const std::string& name) const { return dir_ / name; }

  static void write_file(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
  }
  static std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  static void write_proto(const fs::path& p, const onnx::ModelProto& proto) { write_file(p, proto.SerializeAsString()); }

  // The error message of loading `p`, or "" if it loads.
  static std::string load_error(const fs::path& p) {
    try {
      load_model(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  // y = Relu(x) + w, with w = [1, 2, 3].
  static Model small_model() {
    Model m;
    m.set_opset("", 13);
    Graph& g = *m.graph;
    g.name = "small";
    Value* x = g.add_value("x");
    x->type = ValueType::tensor(DataType::Float, {3});
    Value* w = g.add_value("w");
    g.set_initializer(w, Tensor::from_values<float>({3}, std::vector<float>{1, 2, 3}));
    Value* r = g.add_value("r");
    Value* y = g.add_value("y");
    y->type = ValueType::tensor(DataType::Float, {3});
    g.add_input(x);
    g.add_node("Relu", {x}, {r}, "relu");
    g.add_node("Add", {r, w}, {y}, "add");
    g.add_output(y);
    return m;
  }

  fs::path dir_;
};

// A model using the fields the backend test data leaves out.
onnx::ModelProto model_with_every_field() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("test");
  m.set_producer_version("1.0");
  m.set_domain("org.example");
  m.set_model_version(42);
  m.set_doc_string("a model");
  auto* op = m.add_opset_import();
  op->set_version(13);
  auto* custom = m.add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(1);
  auto* prop = m.add_metadata_props();
  prop->set_key("author");
  prop->set_value("someone");

  auto* g = m.mutable_graph();
  g->set_name("main");
  g->set_doc_string("main graph");
  auto* x = g->add_input();
  x->set_name("x");
  x->set_doc_string("the input");
  auto* xt = x->mutable_type();
  xt->set_denotation("TENSOR");
  xt->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* d0 = xt->mutable_tensor_type()->mutable_shape()->add_dim();
  d0->set_dim_param("batch");
  d0->set_denotation("DATA_BATCH");
  xt->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  xt->mutable_tensor_type()->mutable_shape()->add_dim();  // a dimension nothing is known of
  auto* cond = g->add_input();
  cond->set_name("cond");
  cond->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);

  auto* w = g->add_initializer();  // typed-field storage, as older exporters write
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT16);
  w->add_dims(2);
  w->add_int32_data(0x3c00);
  w->add_int32_data(0xc000);
  w->set_doc_string("half weights");
  auto* sparse = g->add_sparse_initializer();
  sparse->add_dims(10);
  sparse->mutable_values()->set_name("sp");
  sparse->mutable_values()->set_data_type(onnx::TensorProto::FLOAT);
  sparse->mutable_values()->add_dims(1);
  sparse->mutable_values()->add_float_data(5.0f);
  sparse->mutable_indices()->set_data_type(onnx::TensorProto::INT64);
  sparse->mutable_indices()->add_dims(1);
  sparse->mutable_indices()->add_int64_data(3);

  auto* custom_node = g->add_node();
  custom_node->set_op_type("Frobnicate");
  custom_node->set_domain("com.example");
  custom_node->set_name("frob");
  custom_node->set_doc_string("custom op");
  custom_node->add_input("x");
  custom_node->add_input("");  // an omitted optional input
  custom_node->add_output("f");
  custom_node->add_output("");
  auto* a = custom_node->add_attribute();
  a->set_name("strings");
  a->set_type(onnx::AttributeProto::STRINGS);
  a->add_strings("one");
  a->add_strings("two");
  auto* tp = custom_node->add_attribute();
  tp->set_name("tp");
  tp->set_type(onnx::AttributeProto::TYPE_PROTO);
  tp->mutable_tp()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT8);
  auto* floats = custom_node->add_attribute();
  floats->set_name("floats");
  floats->set_type(onnx::AttributeProto::FLOATS);
  floats->add_floats(0.5f);
  floats->set_doc_string("attribute doc");

  auto* if_node = g->add_node();
  if_node->set_op_type("If");
  if_node->set_name("if");
  if_node->add_input("cond");
  if_node->add_output("y");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* attr = if_node->add_attribute();
    attr->set_name(branch);
    attr->set_type(onnx::AttributeProto::GRAPH);
    auto* sub = attr->mutable_g();
    sub->set_name(std::string(branch) + "_graph");
    auto* n = sub->add_node();
    n->set_op_type("Add");
    n->add_input("f");  // from the enclosing graph
    n->add_input("w");
    n->add_output(std::string(branch) + "_out");
    auto* out = sub->add_output();
    out->set_name(std::string(branch) + "_out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* seq = g->add_value_info();
  seq->set_name("f");
  seq->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  auto* annotation = g->add_quantization_annotation();
  annotation->set_tensor_name("f");
  auto* qp = annotation->add_quant_parameter_tensor_names();
  qp->set_key("SCALE_TENSOR");
  qp->set_value("w");

  auto* fn = m.add_functions();
  fn->set_name("MyFunc");
  fn->set_domain("com.example");
  fn->add_input("a");
  fn->add_output("b");
  auto* fn_node = fn->add_node();
  fn_node->set_op_type("Neg");
  fn_node->add_input("a");
  fn_node->add_output("b");
  auto* fn_op = fn->add_opset_import();
  fn_op->set_version(13);

  auto* training = m.add_training_info();
  training->mutable_algorithm()->set_name("step");
  auto* binding = training->add_update_binding();
  binding->set_key("w");
  binding->set_value("w_new");
  return m;
}

TEST_F(LoadSave, EveryFieldSurvivesARoundTrip) {
  onnx::ModelProto original = model_with_every_field();
  write_proto(path("in.onnx"), original);
  Model model = load_model(path("in.onnx"));
  EXPECT_EQ(model.opset("com.example"), 1);
  EXPECT_EQ(model.opset("ai.onnx"), 13);
  const Value* w = model.graph->find_value("w");
  ASSERT_TRUE(w && w->has_initializer());
  EXPECT_EQ(w->initializer().values<uint16_t>()[1], 0xc000);
  save_model(model, path("out.onnx"));
  EXPECT_EQ(testing::model_difference(original, testing::read_model_proto(path("out.onnx"))), "");
}

TEST_F(LoadSave, ABuiltModelSavesAndLoads) {
  save_model(small_model(), path("m.onnx"));
  Model m = load_model(path("m.onnx"));
  EXPECT_EQ(m.graph->node_count(), 2u);
  const Value* w = m.graph->find_value("w");
  EXPECT_EQ(w->initializer().values<float>()[2], 3.0f);
  EXPECT_EQ(m.graph->find_value("x")->type.to_string(), "float[3]");
  EXPECT_FALSE(m.uses_external_data);
  EXPECT_EQ(m.path, path("m.onnx"));
}

TEST_F(LoadSave, ExternalDataGoesToOneFileAndComesBack) {
  Model m = small_model();
  std::vector<float> big(1000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  Value* b = m.graph->add_value("big");
  m.graph->set_initializer(b, Tensor::from_values<float>({10, 100}, big));
  SaveOptions always;
  always.external_data = SaveOptions::ExternalData::Always;
  save_model(m, path("m.onnx"), always);
  ASSERT_TRUE(fs::exists(path("m.onnx.data")));
  EXPECT_EQ(fs::file_size(path("m.onnx.data")), 4000u);  // only tensors over the threshold
  onnx::ModelProto proto = testing::read_model_proto(path("m.onnx"));
  EXPECT_EQ(proto.graph().initializer(1).data_location(), onnx::TensorProto::EXTERNAL);
  EXPECT_EQ(proto.graph().initializer(0).data_location(), onnx::TensorProto::DEFAULT);  // small: inline

  Model back = load_model(path("m.onnx"));
  EXPECT_TRUE(back.uses_external_data);
  auto values = back.graph->find_value("big")->initializer().values<float>();
  EXPECT_TRUE(std::equal(values.begin(), values.end(), big.begin()));
  // Saved again to another place (Auto keeps external data for a model loaded with it).
  fs::create_directories(path("copy"));
  save_model(back, path("copy/n.onnx"));
  EXPECT_TRUE(fs::exists(path("copy/n.onnx.data")));
  EXPECT_EQ(load_model(path("copy/n.onnx")).graph->find_value("big")->initializer().values<float>()[999], 499.5f);
}

TEST_F(LoadSave, SavingElsewhereNeverChangesTheInput) {
  save_model(small_model(), path("in.onnx"));
  std::string before = read_file(path("in.onnx"));
  Model m = load_model(path("in.onnx"));
  m.graph->find_value("w")->mutable_initializer().mutable_values<float>()[0] = 100;
  m.graph->name = "changed";
  save_model(m, path("out.onnx"));
  EXPECT_EQ(read_file(path("in.onnx")), before);
  EXPECT_EQ(load_model(path("out.onnx")).graph->find_value("w")->initializer().values<float>()[0], 100);
}

TEST_F(LoadSave, AFailedSaveLeavesNothingBehind) {
  fs::create_directories(path("occupied.onnx"));  // the target is a directory: rename fails
  EXPECT_THROW(save_model(small_model(), path("occupied.onnx")), Error);
  EXPECT_THROW(save_model(small_model(), path("no/such/dir/m.onnx")), Error);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1u);  // only the directory made above: no temporary file left
}

// The searches' folder for candidate models, where TMPDIR names no folder: an Error that says
// so, not the standard library's exception.
TEST(TemporaryFolder, ATmpdirThatIsNoFolderIsAnError) {
  const char* saved = std::getenv("TMPDIR");
  const std::string previous = saved ? saved : "";
  setenv("TMPDIR", "/nonexistent-onnxptq-tmpdir", 1);
  EXPECT_THROW(
      {
        try {
          TemporaryFolder folder("onnxptq-test");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("TMPDIR"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  if (saved) setenv("TMPDIR", previous.c_str(), 1);
  else unsetenv("TMPDIR");
}

TEST_F(LoadSave, MissingFile) {
  EXPECT_EQ(load_error(path("missing.onnx")), path("missing.onnx").string() + ": no such file");
}

TEST_F(LoadSave, Directory) {
  EXPECT_EQ(load_error(dir_), dir_.string() + ": is a directory, not a model file");
}

TEST_F(LoadSave, EmptyFile) {
  write_file(path("empty.onnx"), "");
  EXPECT_EQ(load_error(path("empty.onnx")), path("empty.onnx").string() + ": the file is empty");
}

TEST_F(LoadSave, NotProtobuf) {
  write_file(path("text.onnx"), "this is a text file, not a model\n");
  EXPECT_EQ(load_error(path("text.onnx")),
            path("text.onnx").string() +
                ": not an ONNX model (bytes at offset 0 are not a field of an ONNX ModelProto)");
}

TEST_F(LoadSave, TruncatedFile) {
  save_model(small_model(), path("m.onnx"));
  std::string bytes = read_file(path("m.onnx"));
  write_file(path("cut.onnx"), bytes.substr(0, bytes.size() / 2));
  std::string error = load_error(path("cut.onnx"));
  EXPECT_EQ(error.rfind(path("cut.onnx").string() + ": the file is truncated", 0), 0u) << error;
}

TEST_F(LoadSave, NoGraph) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  write_proto(path("m.onnx"), m);
  EXPECT_EQ(load_error(path("m.onnx")), path("m.onnx").string() + ": not an ONNX model: it has no graph");
}

TEST_F(LoadSave, InputThatNothingProduces) {
  Model m = small_model();
  Value* ghost = m.graph->add_value("ghost");
  Value* out = m.graph->add_value("out");
  m.graph->add_node("Relu", {ghost}, {out}, "uses_ghost");
  save_model(m, path("m.onnx"));
  EXPECT_EQ(load_error(path("m.onnx")),
            path("m.onnx").string() +
                ": node 'uses_ghost' (Relu): input 'ghost' is not produced by any node, nor a graph input or initializer");
}

TEST_F(LoadSave, Cycle) {
  Model m = small_model();
  Graph& g = *m.graph;
  Value* a = g.add_value("a");
  Value* b = g.add_value("b");
  g.add_node("Neg", {b}, {a}, "first");
  g.add_node("Neg", {a}, {b}, "second");
  save_model(m, path("m.onnx"));
  std::string error = load_error(path("m.onnx"));
  EXPECT_EQ(error.rfind(path("m.onnx").string() + ": graph 'small' has a cycle through node '", 0), 0u) << error;
}

TEST_F(LoadSave, ValueProducedTwice) {
  onnx::ModelProto m = testing::read_model_proto((save_model(small_model(), path("m.onnx")), path("m.onnx")));
  auto* dup = m.mutable_graph()->add_node();
  dup->set_op_type("Neg");
  dup->set_name("again");
  dup->add_input("x");
  dup->add_output("r");
  write_proto(path("dup.onnx"), m);
  EXPECT_EQ(load_error(path("dup.onnx")),
            path("dup.onnx").string() + ": value 'r' is produced twice, by node 'relu' (Relu) and by node 'again' (Neg)");
}

TEST_F(LoadSave, RawDataOfTheWrongSize) {
  save_model(small_model(), path("m.onnx"));
  onnx::ModelProto m = testing::read_model_proto(path("m.onnx"));
  m.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(8, '\0'));
  write_proto(path("bad.onnx"), m);
  EXPECT_EQ(load_error(path("bad.onnx")),
            path("bad.onnx").string() + ": tensor 'w' has 8 bytes of raw data for shape [3] of float (12 bytes expected)");
}

TEST_F(LoadSave, UnknownDataType) {
  save_model(small_model(), path("m.onnx"));
  onnx::ModelProto m = testing::read_model_proto(path("m.onnx"));
  m.mutable_graph()->mutable_initializer(0)->set_data_type(99);
  write_proto(path("bad.onnx"), m);
  EXPECT_EQ(load_error(path("bad.onnx")), path("bad.onnx").string() + ": tensor 'w' has unknown data type 99");
}

class ExternalDataErrors : public LoadSave {
 protected:
  // A model whose tensor 'big' (4000 bytes) lives in m.onnx.data.
  void SetUp() override {
    LoadSave::SetUp();
    Model m = small_model();
    m.graph->set_initializer(m.graph->add_value("big"), Tensor(DataType::Float, {1000}));
    SaveOptions always;
    always.external_data = SaveOptions::ExternalData::Always;
    save_model(m, path("m.onnx"), always);
  }
};

TEST_F(ExternalDataErrors, MissingDataFile) {
  fs::remove(path("m.onnx.data"));
  EXPECT_EQ(load_error(path("m.onnx")), path("m.onnx").string() +
                                            ": tensor 'big' stores its data in 'm.onnx.data', which does not exist (looked for " +
                                            path("m.onnx.data").string() + ")");
}

TEST_F(ExternalDataErrors, DataFileTooShort) {
  fs::resize_file(path("m.onnx.data"), 1000);
  EXPECT_EQ(load_error(path("m.onnx")),
            path("m.onnx").string() +
                ": external data file 'm.onnx.data' is too short: it has 1000 bytes, tensor 'big' needs bytes 0 to 4000");
}

TEST_F(ExternalDataErrors, LocationOutsideTheModelFolder) {
  onnx::ModelProto m = testing::read_model_proto(path("m.onnx"));
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    for (auto& entry : *t.mutable_external_data())
      if (entry.key() == "location") entry.set_value("../../etc/passwd");
  write_proto(path("m.onnx"), m);
  EXPECT_EQ(load_error(path("m.onnx")),
            path("m.onnx").string() + ": tensor 'big': external data location '../../etc/passwd' is outside the model's folder");
}

// A model over protobuf's 2 GB limit must be written with external data, unasked.
TEST_F(LoadSave, ModelsOver2GBSaveWithExternalData) {
  Model m = small_model();
  const int64_t per_tensor = 180'000'000;  // floats: 720 MB each, 2.16 GB in all
  for (int i = 0; i < 3; ++i) {
    Tensor t(DataType::Float, {per_tensor});
    auto values = t.mutable_values<float>();
    values[0] = static_cast<float>(i + 1);
    values[per_tensor - 1] = static_cast<float>(-(i + 1));
    m.graph->set_initializer(m.graph->add_value("huge" + std::to_string(i)), std::move(t));
  }
  save_model(m, path("big.onnx"));
  ASSERT_TRUE(fs::exists(path("big.onnx.data")));
  EXPECT_LT(fs::file_size(path("big.onnx")), 10'000u);
  EXPECT_GE(fs::file_size(path("big.onnx.data")), 3u * per_tensor * 4);
  m = Model();  // free the memory before loading back
  Model back = load_model(path("big.onnx"));
  EXPECT_TRUE(back.uses_external_data);
  for (int i = 0; i < 3; ++i) {
    auto values = back.graph->find_value("huge" + std::to_string(i))->initializer().values<float>();
    EXPECT_EQ(values[0], static_cast<float>(i + 1));
    EXPECT_EQ(values[per_tensor - 1], static_cast<float>(-(i + 1)));
  }
}

}  // namespace
}  // namespace onnxptq::ir

namespace onnxptq::testing {
namespace {

// The comparison behind the round-trip tests must see real differences.
TEST(ModelDifference, SeesChangedValuesAttributesAndFieldsButNotEncodings) {
  onnx::ModelProto a;
  auto* t = a.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->add_float_data(1.0f);
  t->add_float_data(2.0f);
  auto* n = a.mutable_graph()->add_node();
  n->set_op_type("Relu");
  auto* attr = n->add_attribute();
  attr->set_name("alpha");
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(0.5f);

  onnx::ModelProto raw = a;  // same values, stored as raw bytes
  float values[2] = {1.0f, 2.0f};
  raw.mutable_graph()->mutable_initializer(0)->clear_float_data();
  raw.mutable_graph()->mutable_initializer(0)->set_raw_data(values, sizeof values);
  EXPECT_EQ(model_difference(a, raw), "");

  onnx::ModelProto changed_value = raw;
  values[1] = 2.5f;
  changed_value.mutable_graph()->mutable_initializer(0)->set_raw_data(values, sizeof values);
  EXPECT_NE(model_difference(a, changed_value), "");

  onnx::ModelProto changed_attr = a;
  changed_attr.mutable_graph()->mutable_node(0)->mutable_attribute(0)->set_f(0.25f);
  EXPECT_NE(model_difference(a, changed_attr), "");

  onnx::ModelProto changed_doc = a;
  changed_doc.mutable_graph()->mutable_node(0)->set_doc_string("x");
  EXPECT_NE(model_difference(a, changed_doc), "");
}

}  // namespace
}  // namespace onnxptq::testing
