// TfIdfVectorizer (opset 9): counts of the pool's n-grams in each row of a [C] or [N, C] input of
// int32, int64 or strings, as the ONNX operator docs define it.
//
// The pool (pool_int64s or pool_strings) lists the 1-grams, then the 2-grams, ... with
// ngram_counts the start of each length; only lengths in [min_gram_length, max_gram_length] are
// looked for, but every n-gram keeps its place in ngram_indexes, which gives its output column.
// With skip distance d from 1 to max_skip_count + 1, the n-gram of each start position s is
// x[s], x[s + d], x[s + 2d], ...; 1-grams are counted once (at d = 1), not once per distance.
//
// Modes: TF the counts; IDF 1 (or the weight) where the count is positive; TFIDF the counts
// times the weights. The weights are read per output column, weights[j] for column j, as ONNX
// Runtime and the ONNX reference implementation (onnx/reference/ops/op_tfidf_vectorizer.py) read
// them, so there must be at least one for each column.
//
// The pool's n-grams are held in a trie of tokens (a string pool's strings are numbered), so a
// start position stops at the first prefix that is no pool n-gram's.
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "engine/kernels/text.h"

namespace onnxptq::engine::text {
namespace {

enum class TfIdfMode { TF, IDF, TFIDF };

class TfIdfVectorizerKernel : public Kernel {
 public:
  explicit TfIdfVectorizerKernel(const KernelInfo& info) {
    const ir::Node& node = info.node;
    const std::string mode = node.attr_string("mode", "");
    if (mode == "TF") mode_ = TfIdfMode::TF;
    else if (mode == "IDF") mode_ = TfIdfMode::IDF;
    else if (mode == "TFIDF") mode_ = TfIdfMode::TFIDF;
    else throw Error("mode must be TF, IDF or TFIDF, got '" + mode + "'");
    for (const char* required : {"min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts", "ngram_indexes"})
      if (!node.find_attribute(required)) throw Error(std::string(required) + " is required");
    min_gram_ = node.attr_int("min_gram_length", 0);
    max_gram_ = node.attr_int("max_gram_length", 0);
    max_skip_ = node.attr_int("max_skip_count", 0);
    if (min_gram_ < 1 || max_gram_ < min_gram_)
      throw Error("min_gram_length " + std::to_string(min_gram_) + " and max_gram_length " +
                  std::to_string(max_gram_) + " must satisfy 1 <= min_gram_length <= max_gram_length");
    if (max_skip_ < 0) throw Error("max_skip_count must not be negative, got " + std::to_string(max_skip_));

    indexes_ = node.attr_ints("ngram_indexes", {});
    if (indexes_.empty()) throw Error("ngram_indexes must not be empty");
    for (int64_t j : indexes_)
      if (j < 0 || j >= std::numeric_limits<int32_t>::max())
        throw Error("ngram_indexes holds " + std::to_string(j) + ", not a column index");
    columns_ = *std::max_element(indexes_.begin(), indexes_.end()) + 1;
    weights_ = node.attr_floats("weights", {});
    if (mode_ != TfIdfMode::TF && !weights_.empty() && static_cast<int64_t>(weights_.size()) < columns_)
      throw Error("weights has " + std::to_string(weights_.size()) + " values for " + std::to_string(columns_) +
                  " output columns (one per column, read as ONNX Runtime reads them)");

    const bool has_ints = node.find_attribute("pool_int64s") != nullptr;
    const std::vector<std::string> pool_strings = text_strings_attr(node, "pool_strings");
    strings_ = node.find_attribute("pool_strings") != nullptr;
    if (has_ints == strings_) throw Error("exactly one of pool_int64s and pool_strings must be given");
    std::vector<int64_t> pool = node.attr_ints("pool_int64s", {});
    if (strings_) {
      pool.clear();
      for (const std::string& s : pool_strings) pool.push_back(vocabulary_.try_emplace(s, vocabulary_.size()).first->second);
    }
    build_trie(pool, node.attr_ints("ngram_counts", {}));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const DataType type = x.dtype();
    if (type != DataType::Int32 && type != DataType::Int64 && type != DataType::String)
      throw Error("input must be int32, int64 or string, got " + std::string(ir::data_type_name(type)));
    if ((type == DataType::String) != strings_)
      throw Error("input is " + std::string(ir::data_type_name(type)) + " but the pool is " +
                  (strings_ ? "pool_strings" : "pool_int64s"));
    if (x.rank() > 2) throw Error("input must have shape [C] or [N, C], got " + ir::dims_to_string(x.dims()));
    const int64_t rows = x.rank() == 2 ? x.dims()[0] : 1;
    const int64_t c = x.rank() == 0 ? 1 : x.dims().back();

    // The input as tokens: integers as they are, strings as their number in the pool (-1: none).
    std::vector<int64_t> tokens(static_cast<size_t>(x.size()));
    if (type == DataType::Int64) {
      auto v = x.values<int64_t>();
      std::copy(v.begin(), v.end(), tokens.begin());
    } else if (type == DataType::Int32) {
      auto v = x.values<int32_t>();
      std::copy(v.begin(), v.end(), tokens.begin());
    } else {
      const auto& v = x.string_values();
      for (size_t i = 0; i < v.size(); ++i) {
        auto it = vocabulary_.find(v[i]);
        tokens[i] = it == vocabulary_.end() ? -1 : it->second;
      }
    }

    std::vector<int64_t> dims = x.rank() == 2 ? std::vector<int64_t>{rows, columns_} : std::vector<int64_t>{columns_};
    ir::checked_element_count(dims, "TfIdfVectorizer output");
    std::vector<uint32_t> counts(static_cast<size_t>(rows * columns_), 0);
    parallel_for(ctx.threads, rows, 1, [&](int64_t first, int64_t last) {
      for (int64_t r = first; r < last; ++r) count_row(tokens.data() + r * c, c, counts.data() + r * columns_);
    });

    Tensor y = Tensor::uninitialized(DataType::Float, dims);
    auto v = y.mutable_values<float>();
    for (size_t i = 0; i < counts.size(); ++i) {
      const auto column = static_cast<size_t>(static_cast<int64_t>(i) % columns_);
      const float count = static_cast<float>(counts[i]);
      switch (mode_) {
        case TfIdfMode::TF: v[i] = count; break;
        case TfIdfMode::IDF: v[i] = counts[i] > 0 ? (weights_.empty() ? 1.0f : weights_[column]) : 0.0f; break;
        case TfIdfMode::TFIDF: v[i] = weights_.empty() ? count : count * weights_[column]; break;
      }
    }
    out[0] = std::move(y);
  }

 private:
  struct TrieNode {
    std::unordered_map<int64_t, int32_t> next;
    int64_t id = -1;  // the pool n-gram ending here, if any
  };

  void build_trie(const std::vector<int64_t>& pool, const std::vector<int64_t>& starts) {
    if (starts.empty()) throw Error("ngram_counts must not be empty");
    const auto total = static_cast<int64_t>(pool.size());
    const char* pool_name = strings_ ? "pool_strings" : "pool_int64s";
    trie_.emplace_back();
    int64_t id = 0;  // n-grams of every length are numbered, looked for or not
    for (size_t k = 0; k < starts.size(); ++k) {
      const auto length = static_cast<int64_t>(k + 1);
      const int64_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : total;
      if (begin < 0 || end < begin || end > total)
        throw Error("ngram_counts " + std::to_string(begin) + " (" + std::to_string(length) +
                    "-grams) is out of order or past the pool's " + std::to_string(total) + " items");
      if ((end - begin) % length != 0)
        throw Error("the " + std::to_string(end - begin) + " items of the " + std::to_string(length) +
                    "-grams in " + pool_name + " are no whole number of " + std::to_string(length) + "-grams");
      for (int64_t g = begin; g < end; g += length, ++id) {
        if (length < min_gram_ || length > max_gram_) continue;
        int32_t node = 0;
        for (int64_t t = g; t < g + length; ++t) {
          auto [it, added] = trie_[node].next.try_emplace(pool[t], static_cast<int32_t>(trie_.size()));
          const int32_t child = it->second;
          if (added) trie_.emplace_back();
          node = child;
        }
        if (trie_[node].id >= 0)
          throw Error(std::string(pool_name) + " holds the " + std::to_string(length) + "-gram at item " +
                      std::to_string(g) + " twice");
        trie_[node].id = id;
      }
    }
    if (id > static_cast<int64_t>(indexes_.size()))
      throw Error("ngram_indexes has " + std::to_string(indexes_.size()) + " entries for the pool's " +
                  std::to_string(id) + " n-grams");
  }

  void count_row(const int64_t* row, int64_t c, uint32_t* counts) const {
    int64_t first_length = min_gram_;
    for (int64_t d = 1; d <= max_skip_ + 1; ++d) {
      for (int64_t s = 0; s < c; ++s) {
        if (s + d * (first_length - 1) >= c) break;  // no n-gram of a counted length fits any more
        int32_t node = 0;
        for (int64_t length = 1, i = s; length <= max_gram_ && i < c; ++length, i += d) {
          auto it = trie_[node].next.find(row[i]);
          if (it == trie_[node].next.end()) break;
          node = it->second;
          if (length >= first_length && trie_[node].id >= 0) ++counts[indexes_[trie_[node].id]];
        }
      }
      // 1-grams do not depend on the skip distance: counted at d = 1 only.
      if (first_length == 1 && ++first_length > max_gram_) break;
    }
  }

  TfIdfMode mode_ = TfIdfMode::TF;
  int64_t min_gram_ = 1, max_gram_ = 1, max_skip_ = 0;
  std::vector<int64_t> indexes_;
  int64_t columns_ = 0;
  std::vector<float> weights_;
  bool strings_ = false;
  std::unordered_map<std::string, int64_t> vocabulary_;  // pool_strings: each string's token
  std::vector<TrieNode> trie_;                           // trie_[0] is the root
};

}  // namespace

void register_tfidf_kernels(KernelRegistry& r) {
  r.add("", "TfIdfVectorizer", 9, kLatestOpset, kernel_factory<TfIdfVectorizerKernel>());
}

}  // namespace onnxptq::engine::text
