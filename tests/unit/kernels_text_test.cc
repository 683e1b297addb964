// The text family on what the ONNX backend tests leave out. StringNormalizer: every element
// removed, case-insensitive stopwords keeping the input's case, non-ASCII case changes, refusals.
// TfIdfVectorizer: the docs' skip-gram example, skip distances counted apart, 1-grams counted once,
// lengths outside [min, max] keeping their columns, weights in IDF and TFIDF, string and int32
// input, empty input, refusals.
#include <gtest/gtest.h>

#include "support/kernel_run.h"

namespace onnxptq::engine {
namespace {

using kernel_test::Attr;
using kernel_test::f32;
using kernel_test::i32;
using kernel_test::i64;
using kernel_test::Op;
using kernel_test::op_error;
using kernel_test::run_op;

bool text_error_has(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

Tensor text_strings(std::vector<int64_t> dims, std::vector<std::string> v) {
  return Tensor::from_strings(std::move(dims), std::move(v));
}

// ---- StringNormalizer

Tensor text_normalize(const Tensor& x, std::vector<Attr> attrs) { return run_op({"StringNormalizer", 10, std::move(attrs)}, {x}); }

TEST(TextKernels, StringNormalizerOfOnlyStopwordsIsOneEmptyString) {
  std::vector<Attr> attrs = {{"stopwords", std::vector<std::string>{"a", "the"}}, {"is_case_sensitive", int64_t{1}}};
  Tensor y = text_normalize(text_strings({1, 3}, {"the", "a", "the"}), attrs);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(y.string_values(), (std::vector<std::string>{""}));
  Tensor flat = text_normalize(text_strings({2}, {"a", "a"}), attrs);
  EXPECT_EQ(flat.dims(), (std::vector<int64_t>{1}));
  EXPECT_EQ(flat.string_values(), (std::vector<std::string>{""}));
  // No elements at all: the same rule.
  EXPECT_EQ(text_normalize(text_strings({0}, {}), attrs).dims(), (std::vector<int64_t>{1}));
}

TEST(TextKernels, StringNormalizerCaseInsensitiveStopwordsKeepTheInputsCase) {
  std::vector<Attr> attrs = {{"stopwords", std::vector<std::string>{"monday", "ÉLAN"}}};
  Tensor y = text_normalize(text_strings({5}, {"Monday", "Tuesday", "MONDAY", "élan", "Élan2"}), attrs);
  EXPECT_EQ(y.string_values(), (std::vector<std::string>{"Tuesday", "Élan2"}));
  // Case-sensitive: only the exact spelling goes.
  attrs.push_back({"is_case_sensitive", int64_t{1}});
  EXPECT_EQ(text_normalize(text_strings({3}, {"Monday", "monday", "ÉLAN"}), attrs).string_values(),
            (std::vector<std::string>{"Monday"}));
}

TEST(TextKernels, StringNormalizerChangesTheCaseOfNonAsciiText) {
  Tensor x = text_strings({4}, {"ÉCOLE", "straße", "Ωmega", "abc"});
  EXPECT_EQ(text_normalize(x, {{"case_change_action", std::string("LOWER")}}).string_values(),
            (std::vector<std::string>{"école", "straße", "ωmega", "abc"}));
  // Simple mappings: ß has no one-letter upper case and stays.
  EXPECT_EQ(text_normalize(x, {{"case_change_action", std::string("UPPER")}, {"locale", std::string("en_US")}}).string_values(),
            (std::vector<std::string>{"ÉCOLE", "STRAßE", "ΩMEGA", "ABC"}));
  // UPPER with case-insensitive stopwords: the folded text is the output.
  EXPECT_EQ(text_normalize(x, {{"case_change_action", std::string("UPPER")}, {"stopwords", std::vector<std::string>{"École"}}})
                .string_values(),
            (std::vector<std::string>{"STRAßE", "ΩMEGA", "ABC"}));
}

TEST(TextKernels, StringNormalizerRefusesBadInput) {
  Tensor x = text_strings({1}, {"a"});
  EXPECT_TRUE(text_error_has(op_error({"StringNormalizer", 10, {{"locale", std::string("de_DE")}}}, {x}),
                                    "locale 'de_DE' is not supported (only en_US)"));
  EXPECT_TRUE(text_error_has(op_error({"StringNormalizer", 10, {{"case_change_action", std::string("TITLE")}}}, {x}),
                                    "case_change_action must be LOWER, UPPER or NONE, got 'TITLE'"));
  EXPECT_TRUE(text_error_has(op_error({"StringNormalizer", 10}, {text_strings({2, 2}, {"a", "b", "c", "d"})}),
                                    "input must have shape [C] or [1, C], got [2,2]"));
  EXPECT_TRUE(text_error_has(op_error({"StringNormalizer", 10}, {i64({1}, {1})}), "input must be a string tensor"));
  EXPECT_TRUE(text_error_has(
      op_error({"StringNormalizer", 10, {{"case_change_action", std::string("LOWER")}}}, {text_strings({2}, {"ok", "bad\xC3"})}),
      "input element 1 is not valid UTF-8"));
  EXPECT_TRUE(text_error_has(
      op_error({"StringNormalizer", 10, {{"stopwords", std::vector<std::string>{"\xE0\x80\x80"}}}}, {x}),
      "stopword 0 is not valid UTF-8"));
}

// ---- TfIdfVectorizer

// A TfIdfVectorizer of int64 pool `pool` (ngram_counts `counts`, ngram_indexes `indexes`).
Op text_tfidf(std::string mode, int64_t min_gram, int64_t max_gram, int64_t max_skip, std::vector<int64_t> pool,
         std::vector<int64_t> counts, std::vector<int64_t> indexes, std::vector<float> weights = {}) {
  Op op{"TfIdfVectorizer", 9,
        {{"mode", std::move(mode)}, {"min_gram_length", min_gram}, {"max_gram_length", max_gram},
         {"max_skip_count", max_skip}, {"pool_int64s", std::move(pool)}, {"ngram_counts", std::move(counts)},
         {"ngram_indexes", std::move(indexes)}}};
  if (!weights.empty()) op.attrs.push_back({"weights", std::move(weights)});
  return op;
}

TEST(TextKernels, TfIdfVectorizerSkipGramsOfTheDocsExample) {
  // The docs: in [94, 17, 36, 12, 28] two skips make the 2-grams [94, 12] and [17, 28].
  Tensor x = i64({5}, {94, 17, 36, 12, 28});
  Op two_skips = text_tfidf("TF", 2, 2, 2, {94, 12, 17, 28}, {0, 0}, {0, 1});
  EXPECT_EQ(kernel_test::floats(run_op(two_skips, {x})), (std::vector<float>{1, 1}));
  Op one_skip = text_tfidf("TF", 2, 2, 1, {94, 12, 17, 28}, {0, 0}, {0, 1});
  EXPECT_EQ(kernel_test::floats(run_op(one_skip, {x})), (std::vector<float>{0, 0}));
  // int32 input reads the same.
  EXPECT_EQ(kernel_test::floats(run_op(two_skips, {i32({5}, {94, 17, 36, 12, 28})})), (std::vector<float>{1, 1}));
}

TEST(TextKernels, TfIdfVectorizerCountsEachSkipDistanceButOneGramsOnce) {
  // [1, 1, 1]: the 2-gram [1, 1] twice at distance 1 and once at distance 2; the 1-gram [1]
  // three times, whatever max_skip_count.
  Op op = text_tfidf("TF", 1, 2, 3, {1, 1, 1}, {0, 1}, {0, 1});
  EXPECT_EQ(kernel_test::floats(run_op(op, {i64({3}, {1, 1, 1})})), (std::vector<float>{3, 3}));
}

TEST(TextKernels, TfIdfVectorizerLengthsOutsideMinMaxKeepTheirColumns) {
  // Pool: 1-grams 1, 2; 2-gram [1, 2]; columns 2, 0, 1. Only 2-grams are looked for.
  Op op = text_tfidf("TF", 2, 2, 0, {1, 2, 1, 2}, {0, 2}, {2, 0, 1});
  EXPECT_EQ(kernel_test::floats(run_op(op, {i64({4}, {1, 2, 1, 2})})), (std::vector<float>{0, 2, 0}));
}

TEST(TextKernels, TfIdfVectorizerWeightsInIdfAndTfIdf) {
  // 1-grams 5, 6, 7 in columns 0, 1, 2; a batch of two rows.
  Tensor x = i64({2, 4}, {5, 5, 6, 9, 7, 7, 7, 5});
  const std::vector<float> w = {0.5f, 2.0f, 4.0f};
  EXPECT_EQ(kernel_test::floats(run_op(text_tfidf("TF", 1, 1, 0, {5, 6, 7}, {0}, {0, 1, 2}, w), {x})),
            (std::vector<float>{2, 1, 0, 1, 0, 3}));
  EXPECT_EQ(kernel_test::floats(run_op(text_tfidf("IDF", 1, 1, 0, {5, 6, 7}, {0}, {0, 1, 2}, w), {x})),
            (std::vector<float>{0.5f, 2, 0, 0.5f, 0, 4}));
  EXPECT_EQ(kernel_test::floats(run_op(text_tfidf("IDF", 1, 1, 0, {5, 6, 7}, {0}, {0, 1, 2}), {x})),
            (std::vector<float>{1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(kernel_test::floats(run_op(text_tfidf("TFIDF", 1, 1, 0, {5, 6, 7}, {0}, {0, 1, 2}, w), {x})),
            (std::vector<float>{1, 2, 0, 0.5f, 0, 12}));
  // Weights go by output column, as ONNX Runtime reads them: pool 5 -> column 2 takes weights[2].
  EXPECT_EQ(kernel_test::floats(run_op(text_tfidf("TFIDF", 1, 1, 0, {5, 6, 7}, {0}, {2, 1, 0}, w), {x})),
            (std::vector<float>{0, 2, 8, 1.5f, 0, 4}));
}

TEST(TextKernels, TfIdfVectorizerOfStringsAndOfEmptyInput) {
  Op op{"TfIdfVectorizer", 9,
        {{"mode", std::string("TF")}, {"min_gram_length", int64_t{1}}, {"max_gram_length", int64_t{2}},
         {"max_skip_count", int64_t{0}}, {"pool_strings", std::vector<std::string>{"a", "b", "a", "b"}},
         {"ngram_counts", std::vector<int64_t>{0, 2}}, {"ngram_indexes", std::vector<int64_t>{0, 1, 2}}}};
  Tensor y = run_op(op, {text_strings({2, 3}, {"a", "b", "x", "b", "a", "b"})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(kernel_test::floats(y), (std::vector<float>{1, 1, 1, 1, 2, 1}));
  Tensor empty = run_op(op, {text_strings({0}, {})});
  EXPECT_EQ(empty.dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(kernel_test::floats(empty), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(run_op(op, {text_strings({2, 0}, {})}).dims(), (std::vector<int64_t>{2, 3}));
}

TEST(TextKernels, TfIdfVectorizerRefusesBadInput) {
  Tensor x = i64({2}, {1, 2});
  auto error = [&](const Op& op, const Tensor& in) { return op_error(op, {in}); };
  EXPECT_TRUE(text_error_has(error(text_tfidf("BM25", 1, 1, 0, {1}, {0}, {0}), x), "mode must be TF, IDF or TFIDF"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 2, 1, 0, {1}, {0}, {0}), x), "must satisfy 1 <= min_gram_length"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 1, -1, {1}, {0}, {0}), x), "max_skip_count must not be negative"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TFIDF", 1, 1, 0, {1, 2}, {0}, {0, 3}, {1, 1}), x),
                                    "weights has 2 values for 4 output columns"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 1, 0, {1, 1}, {0}, {0, 1}), x), "holds the 1-gram at item 1 twice"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 2, 0, {1, 2, 3}, {0, 2}, {0, 1, 2}), x),
                                    "are no whole number of 2-grams"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 2, 0, {1, 2, 3}, {2, 1}, {0, 1, 2}), x), "out of order"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 1, 0, {1, 2}, {0}, {0}), x),
                                    "ngram_indexes has 1 entries for the pool's 2 n-grams"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 1, 0, {1}, {0}, {0}), text_strings({1}, {"a"})),
                                    "input is string but the pool is pool_int64s"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 1, 0, {1}, {0}, {0}), i64({1, 1, 1}, {1})),
                                    "input must have shape [C] or [N, C]"));
  EXPECT_TRUE(text_error_has(error(text_tfidf("TF", 1, 1, 0, {1}, {0}, {0}), f32({1}, {1})),
                                    "input must be int32, int64 or string"));
  Op both = text_tfidf("TF", 1, 1, 0, {1}, {0}, {0});
  both.attrs.push_back({"pool_strings", std::vector<std::string>{"a"}});
  EXPECT_TRUE(text_error_has(error(both, x), "exactly one of pool_int64s and pool_strings"));
}

}  // namespace
}  // namespace onnxptq::engine
