// StringNormalizer (opset 10) and the registration of the text family.
//
// StringNormalizer as the ONNX operator docs define it: the elements of a [C] or [1, C] string
// tensor that are stopwords are removed (compared case-insensitively unless is_case_sensitive),
// the rest lowercased, uppercased or kept (case_change_action); when every element is removed the
// output is one empty string, of shape [1] or [1, 1]. Case-insensitive comparison folds both
// sides to upper case when the action is UPPER and to lower case otherwise, so that a kept
// element already has the case it is written in (as ONNX Runtime does).
//
// Case changes are Unicode's simple (one code point to one) mappings of the C.UTF-8 locale
// (glibc's towlower_l / towupper_l), which is what en_US gives too; locale may be absent, "",
// "en_US" or "en_US.UTF-8", and another locale is refused by name. Text must be valid UTF-8
// wherever a case is changed or compared; errors name the element, never its text.
#include "engine/kernels/text.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>
#include <unordered_set>

namespace onnxptq::engine {
namespace text {

std::vector<std::string> text_strings_attr(const ir::Node& node, const std::string& name) {
  const ir::Attribute* a = node.find_attribute(name);
  if (!a) return {};
  if (a->type != ir::AttrType::Strings) throw Error(name + " must be a list of strings");
  return a->strings;
}

namespace {

// Decodes UTF-8 into code points; false on a malformed sequence (overlong forms, surrogates and
// values past U+10FFFF included).
bool text_utf8_decode(const std::string& s, std::u32string& out) {
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    int extra;
    char32_t cp, min;
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    for (int k = 1; k <= extra; ++k) {
      if (i + k >= n || (p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out.push_back(cp);
    i += extra + 1;
  }
  return true;
}

void text_utf8_append(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The locale whose case mappings the op uses, made once: C.UTF-8 (glibc 2.35 and later always
// have it), else en_US.UTF-8; nullptr when the system has neither (then only ASCII text can
// change case).
locale_t text_case_locale() {
  static const locale_t loc = [] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    if (!l) l = newlocale(LC_CTYPE_MASK, "en_US.UTF-8", static_cast<locale_t>(nullptr));
    return l;
  }();
  return loc;
}

enum class CaseAction { None, Lower, Upper };

// `s` in the case of `action`; Error naming `what` when it is not valid UTF-8.
std::string text_change_case(const std::string& s, CaseAction action, const std::string& what) {
  if (action == CaseAction::None) return s;
  const bool upper = action == CaseAction::Upper;
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    std::string out = s;
    for (char& c : out) {
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
  }
  std::u32string points;
  if (!text_utf8_decode(s, points)) throw Error(what + " is not valid UTF-8");
  const locale_t loc = text_case_locale();
  if (!loc) throw Error("changing the case of non-ASCII text needs the C.UTF-8 or en_US.UTF-8 locale, which this system lacks");
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : points) {
    const wint_t mapped = upper ? towupper_l(static_cast<wint_t>(cp), loc) : towlower_l(static_cast<wint_t>(cp), loc);
    text_utf8_append(static_cast<char32_t>(mapped), out);
  }
  return out;
}

class StringNormalizerKernel : public Kernel {
 public:
  explicit StringNormalizerKernel(const KernelInfo& info) {
    const ir::Node& node = info.node;
    const std::string action = node.attr_string("case_change_action", "NONE");
    if (action == "LOWER") action_ = CaseAction::Lower;
    else if (action == "UPPER") action_ = CaseAction::Upper;
    else if (action == "NONE") action_ = CaseAction::None;
    else throw Error("case_change_action must be LOWER, UPPER or NONE, got '" + action + "'");
    case_sensitive_ = node.attr_int("is_case_sensitive", 0) != 0;
    const std::string locale = node.attr_string("locale", "");
    if (!locale.empty() && locale != "en_US" && locale != "en_US.UTF-8" && locale != "en_US.utf8")
      throw unsupported("locale '" + locale + "' is not supported (only en_US)");
    compare_ = case_sensitive_ ? CaseAction::None : action_ == CaseAction::Upper ? CaseAction::Upper : CaseAction::Lower;
    const std::vector<std::string> stopwords = text_strings_attr(node, "stopwords");
    for (size_t i = 0; i < stopwords.size(); ++i)
      stopwords_.insert(text_change_case(stopwords[i], compare_, "stopword " + std::to_string(i)));
  }

  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (x.dtype() != DataType::String)
      throw Error("input must be a string tensor, got " + std::string(ir::data_type_name(x.dtype())));
    const bool two_d = x.rank() == 2;
    if (!(x.rank() == 1 || (two_d && x.dims()[0] == 1)))
      throw Error("input must have shape [C] or [1, C], got " + ir::dims_to_string(x.dims()));
    const std::vector<std::string>& strings = x.string_values();
    std::vector<std::string> kept;
    kept.reserve(strings.size());
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::string what = "input element " + std::to_string(i);
      if (stopwords_.empty() || compare_ == CaseAction::None) {
        if (stopwords_.count(strings[i])) continue;
        kept.push_back(text_change_case(strings[i], action_, what));
        continue;
      }
      std::string folded = text_change_case(strings[i], compare_, what);
      if (stopwords_.count(folded)) continue;
      // Folded to upper for UPPER and to lower otherwise: already the output's case unless NONE.
      kept.push_back(action_ == CaseAction::None ? strings[i] : std::move(folded));
    }
    // Every element removed: one empty string ([1], or [1, 1] for a [1, C] input).
    if (kept.empty()) kept.emplace_back();
    const auto c = static_cast<int64_t>(kept.size());
    std::vector<int64_t> dims = two_d ? std::vector<int64_t>{1, c} : std::vector<int64_t>{c};
    out[0] = Tensor::from_strings(std::move(dims), std::move(kept));
  }

 private:
  CaseAction action_ = CaseAction::None;
  CaseAction compare_ = CaseAction::None;  // the case both sides are folded to before comparing
  bool case_sensitive_ = false;
  std::unordered_set<std::string> stopwords_;
};

}  // namespace
}  // namespace text

void register_text_kernels(KernelRegistry& r) {
  r.add("", "StringNormalizer", 10, kLatestOpset, kernel_factory<text::StringNormalizerKernel>());
  text::register_tfidf_kernels(r);
}

}  // namespace onnxptq::engine
