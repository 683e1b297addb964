// `onnxptq run`: a model on the built-in CPU engine, inputs from files or seeded random data,
// outputs written as .npy, latencies on request.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "onnxptq/error.h"
#include "onnxptq/model.h"
#include "onnxptq/random_inputs.h"
#include "onnxptq/session.h"
#include "onnxptq/tensor_files.h"

namespace onnxptq::cli {
namespace {

namespace fs = std::filesystem;

struct RunOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::string outputs;
  std::optional<uint32_t> random_seed;
  std::vector<std::string> shapes;
  int repeat = 1;
  int warmup = -1;
  bool time = false;
  bool json = false;
  bool profile = false;
  int threads = 0;
};

Tensor load_input(const fs::path& file) { return file.extension() == ".pb" ? load_tensor(file) : load_npy(file); }

// `name=file` pairs, or plain files matched to the model's inputs in order.
Feed feeds_from_files(const std::vector<std::string>& args, const Session& session) {
  const std::vector<std::string> inputs = session.input_names();
  Feed feeds;
  size_t position = 0;
  for (const std::string& arg : args) {
    size_t eq = arg.find('=');
    std::string name, file = arg;
    if (eq != std::string::npos && !fs::exists(arg)) {
      name = arg.substr(0, eq);
      file = arg.substr(eq + 1);
    } else {
      if (position >= inputs.size())
        throw Error("more input files than the model has inputs (" + std::to_string(inputs.size()) + ")");
      name = inputs[position++];
    }
    if (feeds.count(name)) throw Error("input '" + name + "' is given twice");
    feeds[name] = load_input(file);
  }
  return feeds;
}

// '/' and ':' are common in ONNX value names but not in file names (as in tests/oracle/ort_run.js).
std::string file_name_for(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  std::replace(name.begin(), name.end(), ':', '_');
  return name + ".npy";
}

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// Each node's mean time over the timed runs, in the order the nodes ran.
struct Profile {
  std::vector<NodeTime> nodes;
  std::vector<std::pair<std::string, std::pair<int, double>>> op_types;  // op type -> (nodes, seconds), slowest first
  double total = 0;
};

Profile profile_of(const std::vector<NodeTime>& times, int runs) {
  Profile p;
  const size_t per_run = times.size() / static_cast<size_t>(runs);  // every run runs the same nodes
  for (size_t i = 0; i < per_run; ++i) {
    NodeTime mean = times[i];
    for (int r = 1; r < runs; ++r) mean.seconds += times[r * per_run + i].seconds;
    mean.seconds /= runs;
    p.total += mean.seconds;
    p.nodes.push_back(std::move(mean));
  }
  std::map<std::string, std::pair<int, double>> by_type;
  for (const NodeTime& n : p.nodes) {
    by_type[n.op_type].first += 1;
    by_type[n.op_type].second += n.seconds;
  }
  p.op_types.assign(by_type.begin(), by_type.end());
  std::stable_sort(p.op_types.begin(), p.op_types.end(),
                   [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  return p;
}

void print_profile(const Profile& p) {
  auto share = [&](double s) { return p.total > 0 ? 100 * s / p.total : 0.0; };
  std::cout << std::fixed << std::setprecision(3) << "   ms/run   share  nodes  op type\n";
  for (const auto& [type, entry] : p.op_types)
    std::cout << std::setw(9) << 1000 * entry.second << std::setw(7) << std::setprecision(1) << share(entry.second)
              << " %" << std::setw(7) << entry.first << "  " << type << "\n"
              << std::setprecision(3);
  std::vector<const NodeTime*> slowest;
  for (const NodeTime& n : p.nodes) slowest.push_back(&n);
  std::stable_sort(slowest.begin(), slowest.end(), [](auto* a, auto* b) { return a->seconds > b->seconds; });
  slowest.resize(std::min<size_t>(slowest.size(), 10));
  std::cout << "slowest nodes (ms/run, op type, node)\n";
  for (const NodeTime* n : slowest)
    std::cout << std::setw(9) << 1000 * n->seconds << "  " << n->op_type << "  " << n->node << "\n";
  std::cout << "nodes in all " << 1000 * p.total << " ms per run\n" << std::defaultfloat;
}

void run_command(const RunOptions& o) {
  if (o.inputs.empty() && !o.random_seed) throw Error("give --inputs FILE... or --random SEED");
  if (!o.inputs.empty() && o.random_seed) throw Error("--inputs and --random exclude each other");
  if (o.repeat < 1) throw Error("--repeat must be at least 1");
  Model model = Model::load(o.model);
  Session session(model, {.threads = o.threads});
  const std::vector<std::string> output_names = session.output_names();

  Feed feeds;
  if (o.random_seed) {
    std::map<std::string, std::vector<int64_t>> shapes;
    for (const std::string& s : o.shapes) {
      size_t eq = s.find('=');
      if (eq == std::string::npos) throw Error("--shape '" + s + "' is not NAME=AxBx...");
      shapes[s.substr(0, eq)] = parse_dims(s.substr(eq + 1), "--shape " + s.substr(0, eq));
    }
    feeds = random_inputs(model, *o.random_seed, shapes);
  } else {
    if (!o.shapes.empty()) throw Error("--shape goes with --random (file inputs have their own shapes)");
    feeds = feeds_from_files(o.inputs, session);
  }

  int warmup = o.warmup >= 0 ? o.warmup : (o.repeat > 1 || o.time ? 1 : 0);
  std::vector<Tensor> outputs;
  for (int i = 0; i < warmup; ++i) outputs = session.run(feeds);
  std::vector<double> latencies;
  std::vector<NodeTime> times;
  for (int i = 0; i < o.repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    outputs = o.profile ? session.run(feeds, times) : session.run(feeds);
    latencies.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }

  if (!o.outputs.empty()) {
    fs::create_directories(o.outputs);
    if (o.random_seed) {
      fs::create_directories(fs::path(o.outputs) / "inputs");
      for (const auto& [name, t] : feeds) save_npy(t, fs::path(o.outputs) / "inputs" / file_name_for(name));
    }
    for (size_t i = 0; i < outputs.size(); ++i)
      save_npy(outputs[i], fs::path(o.outputs) / file_name_for(output_names[i]));
  }

  std::vector<double> sorted = latencies;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];
  if (sorted.size() % 2 == 0) median = (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  if (o.json) {
    nlohmann::ordered_json j;
    j["model"] = o.model;
    j["threads"] = session.threads();
    j["latencies_ms"] = latencies;
    j["median_ms"] = median;
    j["peak_rss_mb"] = peak_rss_mb();
    if (o.profile) {
      const Profile p = profile_of(times, o.repeat);
      nlohmann::ordered_json& jp = j["profile"];
      jp["op_types"] = nlohmann::ordered_json::array();
      for (const auto& [type, entry] : p.op_types)
        jp["op_types"].push_back({{"op_type", type}, {"nodes", entry.first}, {"ms", 1000 * entry.second}});
      jp["nodes"] = nlohmann::ordered_json::array();
      for (const NodeTime& n : p.nodes)
        jp["nodes"].push_back({{"node", n.node}, {"op_type", n.op_type}, {"ms", 1000 * n.seconds}});
    }
    j["outputs"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < outputs.size(); ++i)
      j["outputs"].push_back({{"name", output_names[i]},
                              {"dtype", std::string(data_type_name(outputs[i].dtype()))},
                              {"shape", outputs[i].dims()}});
    std::cout << j.dump() << "\n";
    return;
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    std::cout << output_names[i] << "  " << data_type_name(outputs[i].dtype()) << dims_to_string(outputs[i].dims())
              << (o.outputs.empty() ? "" : "  -> " + (fs::path(o.outputs) / file_name_for(output_names[i])).string())
              << "\n";
  if (o.time) {
    std::cout << "latency ms:";
    for (double l : latencies) std::cout << " " << l;
    std::cout << "\nmedian " << median << " ms over " << latencies.size() << " runs, peak RSS " << peak_rss_mb()
              << " MB\n";
  }
  if (o.profile) print_profile(profile_of(times, o.repeat));
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model with the built-in CPU engine and write its outputs as .npy");
  cmd->add_option("MODEL", o->model, "ONNX model file")->required();
  cmd->add_option("--inputs", o->inputs,
                  "Input tensors: NAME=FILE or FILE (.npy, or .pb TensorProto), in the model's input order");
  cmd->add_option("--outputs", o->outputs,
                  "Folder for the outputs, one NAME.npy each ('/' and ':' in names become '_')");
  cmd->add_option("--random", o->random_seed,
                  "Feed seeded random floats in [0,1) instead (the generator of tests/oracle/ort_run.js); with "
                  "--outputs they are written to OUTPUTS/inputs/");
  cmd->add_option("--shape", o->shapes, "NAME=AxBx... for an input whose shape is dynamic (with --random)");
  cmd->add_option("--repeat", o->repeat, "Timed runs (default 1)")->check(non_negative());
  cmd->add_option("--warmup", o->warmup, "Untimed runs first (default 1 with --repeat > 1 or --time, else 0)")
      ->check(non_negative());
  cmd->add_flag("--time", o->time, "Print the latency of each run, the median and the peak RSS");
  cmd->add_flag("--json", o->json,
                "Print one JSON line: model, threads, latencies_ms, median_ms, peak_rss_mb, outputs");
  cmd->add_option("--threads", o->threads, "Threads to use (default: every hardware thread)")->check(non_negative());
  cmd->add_flag("--profile", o->profile,
                "Time each node the engine runs, averaged over the timed runs: the time of each op type and the "
                "slowest nodes (with --json: \"profile\", every node)");
  cmd->callback([o] { run_command(*o); });
}

}  // namespace onnxptq::cli
