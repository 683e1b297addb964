// .npy files against numpy itself (Debian's python3-numpy): what numpy writes we read, what we
// write numpy reads, across dtypes, byte orders, Fortran order and scalars.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ir/npy.h"
#include "onnxptq/error.h"

namespace onnxptq::ir {
namespace {

namespace fs = std::filesystem;

class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_npy_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int python(const std::string& code) {
    std::ofstream(dir_ / "script.py") << "import numpy as np, os\nos.chdir(" << dir_ << ")\n" << code;
    return std::system(("/usr/bin/python3 " + (dir_ / "script.py").string()).c_str());
  }
  fs::path dir_;
};

TEST_F(Npy, ReadsWhatNumpyWrites) {
  ASSERT_EQ(python(R"(
a = np.arange(24).reshape(2, 3, 4)
for t in ['<f4', '>f4', '<f8', '<f2', '|i1', '|u1', '<i2', '>u2', '<i4', '<u4', '<i8', '>i8', '<u8']:
    np.save('c_' + t[1:] + ('_be' if t[0] == '>' else '') + '.npy', a.astype(t))
np.save('fortran.npy', np.asfortranarray(a.astype('<f4')))
np.save('bool.npy', np.array([True, False, True]))
np.save('scalar.npy', np.float32(2.5))
np.save('empty.npy', np.zeros((0, 3), np.float32))
)"), 0);
  auto check_arange = [](const Tensor& t, auto type_tag) {
    using T = decltype(type_tag);
    ASSERT_EQ(t.dims(), (std::vector<int64_t>{2, 3, 4}));
    auto v = t.values<T>();
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<T>(i)) << i;
  };
  check_arange(load_npy(dir_ / "c_f4.npy"), float{});
  check_arange(load_npy(dir_ / "c_f4_be.npy"), float{});
  check_arange(load_npy(dir_ / "c_f8.npy"), double{});
  check_arange(load_npy(dir_ / "c_i1.npy"), int8_t{});
  check_arange(load_npy(dir_ / "c_u1.npy"), uint8_t{});
  check_arange(load_npy(dir_ / "c_i2.npy"), int16_t{});
  check_arange(load_npy(dir_ / "c_u2_be.npy"), uint16_t{});
  check_arange(load_npy(dir_ / "c_i4.npy"), int32_t{});
  check_arange(load_npy(dir_ / "c_u4.npy"), uint32_t{});
  check_arange(load_npy(dir_ / "c_i8.npy"), int64_t{});
  check_arange(load_npy(dir_ / "c_i8_be.npy"), int64_t{});
  check_arange(load_npy(dir_ / "c_u8.npy"), uint64_t{});
  check_arange(load_npy(dir_ / "fortran.npy"), float{});
  EXPECT_EQ(load_npy(dir_ / "c_f2.npy").dtype(), DataType::Float16);
  EXPECT_EQ(load_npy(dir_ / "c_f2.npy").values<uint16_t>()[1], 0x3c00);  // 1.0 in half
  Tensor b = load_npy(dir_ / "bool.npy");
  EXPECT_EQ(b.dtype(), DataType::Bool);
  EXPECT_EQ(b.values<bool>()[1], false);
  Tensor s = load_npy(dir_ / "scalar.npy");
  EXPECT_EQ(s.rank(), 0u);
  EXPECT_EQ(s.values<float>()[0], 2.5f);
  EXPECT_EQ(load_npy(dir_ / "empty.npy").dims(), (std::vector<int64_t>{0, 3}));
}

TEST_F(Npy, NumpyReadsWhatWeWrite) {
  std::vector<float> values(7 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.25f - 3;
  save_npy(Tensor::from_values<float>({7, 5}, values), dir_ / "ours.npy");
  save_npy(Tensor::from_values<int64_t>({3}, std::vector<int64_t>{-1, 0, 1LL << 40}), dir_ / "ints.npy");
  save_npy(Tensor::from_values<float>({}, std::vector<float>{4.0f}), dir_ / "scalar.npy");
  save_npy(Tensor::from_values<int8_t>({1}, std::vector<int8_t>{-7}), dir_ / "one.npy");
  EXPECT_EQ(python(R"(
a = np.load('ours.npy')
assert a.dtype == np.float32 and a.shape == (7, 5), (a.dtype, a.shape)
assert (a == np.arange(35, dtype=np.float32).reshape(7, 5) * 0.25 - 3).all()
b = np.load('ints.npy')
assert b.dtype == np.int64 and list(b) == [-1, 0, 1 << 40]
c = np.load('scalar.npy')
assert c.shape == () and c == 4.0
d = np.load('one.npy')
assert d.shape == (1,) and d.dtype == np.int8 and d[0] == -7
for f in ['ours.npy', 'ints.npy', 'scalar.npy']:
    assert (10 + int.from_bytes(open(f, 'rb').read()[8:10], 'little')) % 64 == 0, f  # data aligned
)"), 0);
}

TEST_F(Npy, BadFilesAreOneLineErrors) {
  auto error_of = [&](const std::string& name) {
    try {
      load_npy(dir_ / name);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of("missing.npy"), (dir_ / "missing.npy").string() + ": no such file");
  fs::create_directories(dir_ / "folder.npy");
  EXPECT_EQ(error_of("folder.npy"), (dir_ / "folder.npy").string() + ": not a file");
  std::ofstream(dir_ / "text.npy") << "hello there, not numpy";
  EXPECT_EQ(error_of("text.npy"), (dir_ / "text.npy").string() + ": not a .npy file");
  ASSERT_EQ(python("np.save('full.npy', np.zeros((4, 4), np.float32))\n"
                   "b = open('full.npy', 'rb').read(); open('cut.npy', 'wb').write(b[:-10])\n"
                   "np.save('obj.npy', np.array(['a', 'b']))\n"),
            0);
  EXPECT_EQ(error_of("cut.npy"), (dir_ / "cut.npy").string() +
                                     ": truncated: shape [4,4] of float needs 64 bytes of data, the file has 54");
  EXPECT_EQ(error_of("obj.npy"), (dir_ / "obj.npy").string() + ": unsupported .npy dtype '<U1' (numbers and bools only)");
}

}  // namespace
}  // namespace onnxptq::ir
