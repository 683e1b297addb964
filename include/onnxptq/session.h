// Running a model on onnxptq's CPU engine (ONNX Runtime's numbers for the ops it has, oneDNN
// underneath).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"
#include "onnxptq/tensor.h"

namespace onnxptq {

namespace engine {
class Session;  // the engine's, not part of the API
}

struct SessionOptions {
  int threads = 0;  // 0: every hardware thread
};

// The time one node took in a run. The nodes are those the engine runs: a Conv and the activation
// it fused are one node "FusedConv" ("NhwcConv" when it runs channels-last; domain onnxptq.engine)
// under the Conv's name, and the Transposes of its channels-last layout are nodes of their own; an
// If, Loop or Scan node's time includes its bodies'.
struct NodeTime {
  std::string node;     // its name, or for a node without one the name of its first output
  std::string op_type;  // "domain.OpType" outside the default ONNX domain
  double seconds = 0;
};

class Session {
 public:
  // Error naming the node, op type and opset when a node has no kernel or bad attributes.
  explicit Session(const Model& model, const SessionOptions& options = {});
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // The inputs a run must feed, in the model's order, and the outputs run() returns, in order.
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  // The threads a run uses: SessionOptions::threads, or the hardware threads for 0.
  int threads() const;

  // The outputs in order. Thread-safe: several runs may go at once. Error for a missing or
  // unknown input, or one whose type or shape contradicts the model.
  std::vector<Tensor> run(const Feed& feeds) const;
  // run() with each node's time appended to `times`, in the order the nodes ran.
  std::vector<Tensor> run(const Feed& feeds, std::vector<NodeTime>& times) const;

 private:
  std::unique_ptr<engine::Session> session_;
};

}  // namespace onnxptq
