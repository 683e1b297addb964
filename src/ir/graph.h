// The graph IR: values with one producer and their uses, nodes with attributes, graphs
// (with subgraphs for If/Loop/Scan). Editing goes through Graph so the links stay consistent.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/tensor.h"

namespace onnxptq::ir {

class Graph;
class Node;

// One dimension of a value's shape: a known size, a symbol ("batch"), or nothing known.
struct Dim {
  bool has_value = false;
  int64_t value = 0;
  std::string param;
  std::string denotation;

  static Dim of(int64_t size) { return Dim{true, size, {}, {}}; }
  static Dim symbol(std::string name) { return Dim{false, 0, std::move(name), {}}; }
};

// The type of a value as far as it is known. Tensors are described field by field; the rare
// other kinds (sequence, map, optional, sparse tensor) are kept as a serialized TypeProto.
struct ValueType {
  enum class Kind { None, Tensor, Other };
  Kind kind = Kind::None;
  DataType elem_type = DataType::Undefined;
  bool has_shape = false;  // rank known
  std::vector<Dim> shape;
  std::string denotation;
  std::string other;       // Kind::Other: serialized onnx.TypeProto
  std::string other_name;  // Kind::Other, when loaded: ONNX's name of it, "seq(tensor(float))", "optional(...)"

  static ValueType tensor(DataType elem_type);
  static ValueType tensor(DataType elem_type, const std::vector<int64_t>& dims);
  bool is_tensor() const { return kind == Kind::Tensor; }
  // The dimensions when all of them are known sizes.
  std::optional<std::vector<int64_t>> static_shape() const;
  // "float[1,3,?,W]", "float[?...]" when the rank is unknown, "seq(tensor(float))" (or "(not a
  // tensor)" when not loaded from a file), "(unknown)"
  std::string to_string() const;
};

struct Use {
  Node* node;
  size_t input;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  Graph* graph() const { return graph_; }
  Node* producer() const { return producer_; }
  size_t producer_output() const { return producer_output_; }
  const std::vector<Use>& uses() const { return uses_; }

  bool has_initializer() const { return initializer_.has_value(); }
  const Tensor& initializer() const { return *initializer_; }
  Tensor& mutable_initializer() { return *initializer_; }

  ValueType type;
  std::string doc_string;  // ValueInfoProto.doc_string

 private:
  friend class Graph;
  std::string name_;
  Graph* graph_ = nullptr;
  Node* producer_ = nullptr;
  size_t producer_output_ = 0;
  std::vector<Use> uses_;
  std::optional<Tensor> initializer_;
};

// Numbers as in AttributeProto.AttributeType.
enum class AttrType : int32_t {
  Undefined = 0,
  Float = 1,
  Int = 2,
  String = 3,
  Tensor = 4,
  Graph = 5,
  Floats = 6,
  Ints = 7,
  Strings = 8,
  Tensors = 9,
  Graphs = 10,
  SparseTensor = 11,
  SparseTensors = 12,
  TypeProto = 13,
  TypeProtos = 14,
};

struct Attribute {
  std::string name;
  AttrType type = AttrType::Undefined;
  std::string ref_attr_name;  // set in function bodies: the attribute refers to the caller's
  std::string doc_string;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::unique_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::unique_ptr<Graph>> graphs;
  // SparseTensor(s) and TypeProto(s), kept as serialized protobuf messages.
  std::vector<std::string> serialized;

  static Attribute of_int(std::string name, int64_t value);
  static Attribute of_float(std::string name, float value);
  static Attribute of_string(std::string name, std::string value);
  static Attribute of_ints(std::string name, std::vector<int64_t> values);
  static Attribute of_floats(std::string name, std::vector<float> values);
  static Attribute of_tensor(std::string name, Tensor value);
};

class Node {
 public:
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain
  std::string doc_string;
  std::vector<Attribute> attributes;

  Graph* graph() const { return graph_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // nullptr when the input is omitted ("") or past the end.
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }

  const Attribute* find_attribute(std::string_view attr_name) const;
  Attribute* find_attribute(std::string_view attr_name);
  // Typed reads with the spec's default; a present attribute of another type is an Error.
  int64_t attr_int(std::string_view attr_name, int64_t fallback) const;
  float attr_float(std::string_view attr_name, float fallback) const;
  std::string attr_string(std::string_view attr_name, std::string fallback) const;
  std::vector<int64_t> attr_ints(std::string_view attr_name, std::vector<int64_t> fallback) const;
  std::vector<float> attr_floats(std::string_view attr_name, std::vector<float> fallback) const;
  // Adds, or replaces the attribute of the same name.
  void set_attribute(Attribute attribute);

  // Subgraphs held by this node's attributes (If branches, Loop and Scan bodies).
  std::vector<Graph*> subgraphs() const;
  // "node 'conv1' (Conv)", or with the domain "node 'q' (com.microsoft.QLinearAdd)"
  std::string describe() const;

 private:
  friend class Graph;
  const Attribute& typed_attribute(std::string_view attr_name, AttrType type) const;
  Graph* graph_ = nullptr;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
};

class Graph {
 public:
  explicit Graph(Graph* parent = nullptr) : parent_(parent) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  std::string name;
  std::string doc_string;
  // Kept for round trips: serialized SparseTensorProto and TensorAnnotation messages.
  std::vector<std::string> sparse_initializers;
  std::vector<std::string> quantization_annotation;

  Graph* parent() const { return parent_; }

  // --- values
  // In this graph only, or nullptr.
  Value* find_value(std::string_view value_name) const;
  // In this graph, then in the enclosing graphs (the scope rule of subgraphs), or nullptr.
  Value* lookup(std::string_view value_name) const;
  // In this graph, then in the subgraphs nested in it (If branches, Loop and Scan bodies, at any
  // depth), or nullptr: where a name is unique across the model, the value of that name.
  Value* find_value_nested(std::string_view value_name) const;
  // The subgraphs of this graph's nodes and theirs, depth first, in node order.
  std::vector<Graph*> nested_graphs() const;
  // A new value; Error if this graph already has one of that name.
  Value* add_value(const std::string& value_name);
  // A new value named after `base`, with a name used nowhere in the model.
  Value* add_unique_value(std::string_view base);
  // A name used by no value and no node anywhere in the model; reserved once returned.
  std::string fresh_name(std::string_view base);
  // Removes a value nothing refers to (no producer, no use, not an input or output).
  void remove_value(Value* value);
  void rename_value(Value* value, const std::string& new_name);
  size_t value_count() const { return values_.size(); }

  // --- the graph's interface
  const std::vector<Value*>& inputs() const { return inputs_; }
  // The inputs a run must feed: initializers listed as inputs are optional overrides.
  std::vector<const Value*> fed_inputs() const;
  const std::vector<Value*>& outputs() const { return outputs_; }
  void add_input(Value* value) { inputs_.push_back(value); }
  void add_output(Value* value) { outputs_.push_back(value); }
  void remove_input(Value* value);
  void set_output(size_t index, Value* value) { outputs_.at(index) = value; }
  bool is_input(const Value* value) const;
  bool is_output(const Value* value) const;

  // --- initializers (in file order) and value_info (in file order)
  const std::vector<Value*>& initializers() const { return initializers_; }
  void set_initializer(Value* value, Tensor tensor);
  void remove_initializer(Value* value);
  const std::vector<Value*>& value_info() const { return value_info_; }
  void add_value_info(Value* value);

  // --- nodes, in file order (which need not be topological)
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t node_count() const { return nodes_.size(); }
  // Appends a node; its outputs must not have a producer yet. nullptr entries are omitted
  // optional inputs or outputs. An empty name stays empty (ONNX allows it).
  Node* add_node(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs,
                 std::string node_name = {}, std::string domain = {});
  // Same, placed just before `position` in the node list.
  Node* insert_node_before(const Node* position, std::string op_type, std::vector<Value*> inputs,
                           std::vector<Value*> outputs, std::string node_name = {}, std::string domain = {});
  // Removes a node: its inputs lose the use, its outputs lose their producer.
  void remove_node(Node* node);
  void set_node_input(Node* node, size_t index, Value* value);  // grows the list if needed
  void set_node_output(Node* node, size_t index, Value* value);
  // Every use of `from` (here and in subgraphs) becomes a use of `to`. Graph outputs are not
  // touched: they are part of the model's interface.
  void replace_uses(Value* from, Value* to);

  // Nodes in an order where every value is produced before it is used (file order where it
  // already is). Error naming a node on a cycle when there is none.
  std::vector<Node*> topological_order() const;
  // That order with each If/Loop/Scan preceded by the nodes of its bodies in that order too, at
  // any depth: a body runs inside its node, after every value of the enclosing graph it reads.
  std::vector<Node*> topological_order_with_bodies() const;
  // Puts the node list in that order (as ONNX requires of a saved graph).
  void sort_nodes();
  // Values from enclosing graphs that `node`'s subgraphs use (what an If needs to run).
  std::vector<Value*> implicit_inputs(const Node* node) const;

 private:
  Graph* root();
  static void detach_subgraph_uses(const Node* node);
  void reserve_name(const std::string& used);
  Node* make_node(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs, std::string node_name,
                  std::string domain);

  Graph* parent_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Value>> values_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> initializers_;
  std::vector<Value*> value_info_;
  std::unordered_set<std::string> taken_names_;  // used at the root graph only
  uint64_t name_counter_ = 0;                    // idem
};

}  // namespace onnxptq::ir
