// The image folder reader: images written here with stb_image_write and known pixel values, read
// back through the reader with exact expected values; the bilinear resize against PIL itself
// (Debian's python3-pil, which python3-torchvision depends on) in a script the test runs; and every
// error message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "calib/data_reader.h"
#include "ir/npy.h"
#include "onnxptq/error.h"
#include "support/one_node.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop
// Not into the files a unity build compiles after this one.
#undef STB_IMAGE_WRITE_IMPLEMENTATION
#undef STB_IMAGE_WRITE_STATIC

namespace onnxptq::calib {
namespace {

namespace fs = std::filesystem;

using testing::error_of;

// Pixels of `comp` channels, rows top to bottom, pixel(x, y) giving the channel values.
std::vector<uint8_t> pixels(int width, int height, int comp, const std::function<std::vector<int>(int, int)>& pixel) {
  std::vector<uint8_t> data;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int v : pixel(x, y)) data.push_back(static_cast<uint8_t>(v));
  EXPECT_EQ(data.size(), static_cast<size_t>(width * height * comp));
  return data;
}

void write_image(const fs::path& path, int width, int height, int comp, const std::vector<uint8_t>& data) {
  std::string ext = path.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int ok = 0;
  if (ext == ".png") ok = stbi_write_png(path.c_str(), width, height, comp, data.data(), width * comp);
  if (ext == ".bmp") ok = stbi_write_bmp(path.c_str(), width, height, comp, data.data());
  if (ext == ".jpg" || ext == ".jpeg") ok = stbi_write_jpg(path.c_str(), width, height, comp, data.data(), 100);
  ASSERT_TRUE(ok) << path;
}

class ImageReader : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxptq_image_reader_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A model input of its own graph.
  const ir::Value* input(std::vector<ir::Dim> dims, ir::DataType type = ir::DataType::Float, const std::string& name = "x") {
    graphs_.push_back(std::make_unique<ir::Graph>());
    ir::Value* v = graphs_.back()->add_value(name);
    v->type = ir::ValueType::tensor(type);
    v->type.has_shape = true;
    v->type.shape = std::move(dims);
    return v;
  }
  const ir::Value* image_input(int64_t d1, int64_t d2, int64_t d3) {
    return input({ir::Dim::of(1), ir::Dim::of(d1), ir::Dim::of(d2), ir::Dim::of(d3)});
  }
  // [1,3,H,W] with H and W left open.
  const ir::Value* any_size_input() {
    return input({ir::Dim::of(1), ir::Dim::of(3), ir::Dim::symbol("H"), ir::Dim::symbol("W")});
  }
  // A folder holding one image.
  fs::path folder_with(const std::string& name, int width, int height, int comp, const std::vector<uint8_t>& data) {
    fs::path folder = dir_ / fs::path(name).stem();
    fs::create_directories(folder);
    write_image(folder / name, width, height, comp, data);
    return folder;
  }
  // The one sample of a one-image folder.
  ir::Tensor read_one(const fs::path& folder, const ir::Value* input, const std::string& spec) {
    auto reader = make_image_folder_reader(folder, {input}, parse_image_spec(spec));
    auto feed = reader->next();
    EXPECT_TRUE(feed);
    EXPECT_FALSE(reader->next());
    return feed ? feed->at("x") : ir::Tensor();
  }
  fs::path dir_;
  std::vector<std::unique_ptr<ir::Graph>> graphs_;
};

// 4 wide, 3 high: channel c of pixel (x, y) is 100 c + 10 y + x.
int gradient(int c, int x, int y) { return 100 * c + 10 * y + x; }

TEST_F(ImageReader, NoResizeGivesThePixelsInEachOrderAndLayout) {
  fs::path folder = folder_with("a.png", 4, 3, 3, pixels(4, 3, 3, [](int x, int y) {
                                  return std::vector<int>{gradient(0, x, y), gradient(1, x, y), gradient(2, x, y)};
                                }));
  const ir::Value* nchw = image_input(3, 3, 4);
  ir::Tensor rgb = read_one(folder, nchw, "");
  ASSERT_EQ(rgb.dims(), (std::vector<int64_t>{1, 3, 3, 4}));
  ASSERT_EQ(rgb.dtype(), ir::DataType::Float);
  ir::Tensor bgr = read_one(folder, nchw, "order=bgr");
  const ir::Value* nhwc = image_input(3, 4, 3);
  ir::Tensor rgb_nhwc = read_one(folder, nhwc, "layout=nhwc");
  ASSERT_EQ(rgb_nhwc.dims(), (std::vector<int64_t>{1, 3, 4, 3}));
  ir::Tensor bgr_nhwc = read_one(folder, nhwc, "layout=nhwc,order=bgr");
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 4; ++x) {
        SCOPED_TRACE("c=" + std::to_string(c) + " y=" + std::to_string(y) + " x=" + std::to_string(x));
        EXPECT_EQ(rgb.values<float>()[(c * 3 + y) * 4 + x], gradient(c, x, y));
        EXPECT_EQ(bgr.values<float>()[(c * 3 + y) * 4 + x], gradient(2 - c, x, y));
        EXPECT_EQ(rgb_nhwc.values<float>()[(y * 4 + x) * 3 + c], gradient(c, x, y));
        EXPECT_EQ(bgr_nhwc.values<float>()[(y * 4 + x) * 3 + c], gradient(2 - c, x, y));
      }
}

TEST_F(ImageReader, ScaleMeanAndStdPerChannelOfTheTensor) {
  fs::path folder = folder_with("a.bmp", 2, 2, 3, pixels(2, 2, 3, [](int x, int y) {
                                  return std::vector<int>{10 + x, 20 + y, 40 + x + y};
                                }));
  const ir::Value* x = image_input(3, 2, 2);
  // Exactly representable: x * 0.5 - mean, divided by a power of two.
  ir::Tensor rgb = read_one(folder, x, "scale=0.5,mean=1:2:3,std=2:4:8");
  ir::Tensor bgr = read_one(folder, x, "scale=0.5,mean=1:2:3,std=2:4:8,order=bgr");
  const double mean[3] = {1, 2, 3}, std[3] = {2, 4, 8};
  auto pixel = [](int c, int px, int py) { return c == 0 ? 10 + px : c == 1 ? 20 + py : 40 + px + py; };
  for (int c = 0; c < 3; ++c)
    for (int py = 0; py < 2; ++py)
      for (int px = 0; px < 2; ++px) {
        // mean and std go with the tensor's channel: for bgr channel 0 is blue.
        EXPECT_EQ(rgb.values<float>()[(c * 2 + py) * 2 + px], (pixel(c, px, py) * 0.5 - mean[c]) / std[c]);
        EXPECT_EQ(bgr.values<float>()[(c * 2 + py) * 2 + px], (pixel(2 - c, px, py) * 0.5 - mean[c]) / std[c]);
      }
  // The usual ImageNet form, against the formula written with a division by 255; a single mean and
  // std value applies to every channel.
  ir::Tensor imagenet = read_one(folder, x, "scale=1/255,mean=0.485:0.456:0.406,std=0.229:0.224:0.225");
  ir::Tensor single = read_one(folder, x, "scale=0.00392156862745098,mean=0.5,std=0.25");
  const double im_mean[3] = {0.485, 0.456, 0.406}, im_std[3] = {0.229, 0.224, 0.225};
  for (int c = 0; c < 3; ++c)
    for (int py = 0; py < 2; ++py)
      for (int px = 0; px < 2; ++px) {
        // float32 results of a double computation: within 2 float ulps of values below 4.
        EXPECT_NEAR(imagenet.values<float>()[(c * 2 + py) * 2 + px], (pixel(c, px, py) / 255.0 - im_mean[c]) / im_std[c], 1e-6);
        EXPECT_NEAR(single.values<float>()[(c * 2 + py) * 2 + px], (pixel(c, px, py) / 255.0 - 0.5) / 0.25, 1e-6);
      }
}

TEST_F(ImageReader, ResizeOfAConstantImageKeepsItsValueExactly) {
  auto constant = [](int, int) { return std::vector<int>{12, 34, 56}; };
  fs::path folder = folder_with("a.png", 7, 5, 3, pixels(7, 5, 3, constant));
  const ir::Value* x = any_size_input();
  for (const char* spec : {"resize=3x11", "resize=13x2", "resize=1x1", "resize=5x7", "resize=2"}) {
    SCOPED_TRACE(spec);
    ir::Tensor t = read_one(folder, x, spec);
    ImageSpec s = parse_image_spec(spec);
    if (s.resize == ImageSpec::Resize::Exact)
      EXPECT_EQ(t.dims(), (std::vector<int64_t>{1, 3, s.resize_height, s.resize_width}));
    else
      EXPECT_EQ(t.dims(), (std::vector<int64_t>{1, 3, 2, 2}));  // 7x5 with shorter side 2: int(2 * 7 / 5) = 2
    int64_t plane = t.size() / 3;
    for (int64_t i = 0; i < t.size(); ++i) ASSERT_EQ(t.values<float>()[i], (std::vector<float>{12, 34, 56})[i / plane]) << i;
  }
}

TEST_F(ImageReader, GreyAndAlphaBecomeThreeChannels) {
  const ir::Value* x = image_input(3, 2, 3);
  struct Case {
    const char* name;
    int comp;
    std::vector<int> pixel;
    std::vector<float> expected;
  };
  for (const Case& c : {Case{"grey.png", 1, {77}, {77, 77, 77}}, Case{"grey_alpha.png", 2, {90, 10}, {90, 90, 90}},
                        Case{"rgba.png", 4, {1, 2, 3, 0}, {1, 2, 3}}}) {
    SCOPED_TRACE(c.name);
    ir::Tensor t = read_one(folder_with(c.name, 3, 2, c.comp, pixels(3, 2, c.comp, [&](int, int) { return c.pixel; })), x, "");
    ASSERT_EQ(t.dims(), (std::vector<int64_t>{1, 3, 2, 3}));
    for (int64_t i = 0; i < t.size(); ++i) EXPECT_EQ(t.values<float>()[i], c.expected[i / 6]) << i;
  }
}

TEST_F(ImageReader, CenterCropOffsetsAsTorchvision) {
  // 7 wide, 6 high: red is 10 x, green 10 y.
  fs::path folder = folder_with("a.png", 7, 6, 3, pixels(7, 6, 3, [](int x, int y) {
                                  return std::vector<int>{10 * x, 10 * y, 0};
                                }));
  const ir::Value* x = any_size_input();
  // torchvision: top = int(round((6 - h) / 2.0)), left = int(round((7 - w) / 2.0)), halves to even.
  struct Case {
    const char* spec;
    int64_t height, width, top, left;
  };
  for (const Case& c : {Case{"crop=3x4", 3, 4, 2, 2},  // 1.5 -> 2, 1.5 -> 2
                        Case{"crop=4x2", 4, 2, 1, 2},  // 1.0 -> 1, 2.5 -> 2
                        Case{"crop=1x1", 1, 1, 2, 3},  // 2.5 -> 2, 3.0 -> 3
                        Case{"crop=5", 5, 5, 0, 1},    // 0.5 -> 0, 1.0 -> 1
                        Case{"crop=6x7", 6, 7, 0, 0}}) {
    SCOPED_TRACE(c.spec);
    ir::Tensor t = read_one(folder, x, c.spec);
    ASSERT_EQ(t.dims(), (std::vector<int64_t>{1, 3, c.height, c.width}));
    for (int64_t y = 0; y < c.height; ++y)
      for (int64_t xx = 0; xx < c.width; ++xx) {
        EXPECT_EQ(t.values<float>()[y * c.width + xx], 10 * (c.left + xx));
        EXPECT_EQ(t.values<float>()[(c.height + y) * c.width + xx], 10 * (c.top + y));
      }
  }
}

TEST_F(ImageReader, ShorterSideKeepsTheAspectAsTorchvision) {
  const ir::Value* x = any_size_input();
  auto grey = [](int, int) { return std::vector<int>{5, 5, 5}; };
  // int(10 * 37 / 23) = 16 for the longer side, in either orientation; a square stays square.
  EXPECT_EQ(read_one(folder_with("wide.png", 37, 23, 3, pixels(37, 23, 3, grey)), x, "resize=10").dims(),
            (std::vector<int64_t>{1, 3, 10, 16}));
  EXPECT_EQ(read_one(folder_with("tall.png", 23, 37, 3, pixels(23, 37, 3, grey)), x, "resize=10").dims(),
            (std::vector<int64_t>{1, 3, 16, 10}));
  EXPECT_EQ(read_one(folder_with("square.png", 9, 9, 3, pixels(9, 9, 3, grey)), x, "resize=20").dims(),
            (std::vector<int64_t>{1, 3, 20, 20}));
}

TEST_F(ImageReader, BilinearResizeAndThePipelineMatchPil) {
  // A random 37x23 image; PIL resizes each channel as a float ("F") image with Image.BILINEAR.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> u(0, 255);
  fs::path folder = folder_with("random.png", 37, 23, 3, pixels(37, 23, 3, [&](int, int) {
                                  return std::vector<int>{u(rng), u(rng), u(rng)};
                                }));
  const std::vector<std::pair<int, int>> sizes = {{11, 16}, {50, 61}, {9, 80}, {46, 74}, {7, 12}, {23, 37}, {1, 1}, {23, 5}};
  std::string script = R"(
import numpy as np, os, sys
from PIL import Image
img = np.array(Image.open('random/random.png').convert('RGB'))
assert img.shape == (23, 37, 3)
def resize(a, h, w):
    return np.stack([np.asarray(Image.fromarray(a[:, :, c].astype(np.float32)).resize((w, h), Image.BILINEAR))
                     for c in range(3)], axis=-1)
for h, w in SIZES:
    np.save('pil_%dx%d.npy' % (h, w), np.ascontiguousarray(resize(img, h, w).transpose(2, 0, 1)[None]))
# resize=20 (torchvision's shorter side), crop=15x13, bgr, ImageNet normalisation, nhwc.
h, w = img.shape[:2]
short, long = min(h, w), max(h, w)
nh, nw = (20, int(20 * long / short)) if h <= w else (int(20 * long / short), 20)
r = resize(img, nh, nw)
top, left = int(round((nh - 15) / 2.0)), int(round((nw - 13) / 2.0))
r = r[top:top + 15, left:left + 13, ::-1].astype(np.float64)
mean, std = np.array([0.406, 0.456, 0.485]), np.array([0.225, 0.224, 0.229])
np.save('pipeline.npy', ((r / 255.0 - mean) / std).astype(np.float32)[None])
)";
  std::string list = "[";
  for (auto [h, w] : sizes) list += "(" + std::to_string(h) + ", " + std::to_string(w) + "),";
  script.replace(script.find("SIZES"), 5, list + "]");
  std::ofstream(dir_ / "script.py") << "import os\nos.chdir(" << dir_ << ")\n" << script;
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (dir_ / "script.py").string()).c_str()), 0);

  const ir::Value* x = any_size_input();
  for (auto [h, w] : sizes) {
    std::string spec = "resize=" + std::to_string(h) + "x" + std::to_string(w);
    SCOPED_TRACE(spec);
    ir::Tensor ours = read_one(folder, x, spec);
    ir::Tensor pil = ir::load_npy(dir_ / ("pil_" + std::to_string(h) + "x" + std::to_string(w) + ".npy"));
    ASSERT_EQ(ours.dims(), pil.dims());
    // Values up to 255 held in float32 between the passes (an ulp is 1.5e-5 there). On x86-64 the
    // results are bit-identical to PIL's; the margin is for other float evaluation (FMA). Without the
    // widened filter of downscaling (no antialias) the differences are whole pixel levels.
    for (int64_t i = 0; i < ours.size(); ++i) ASSERT_NEAR(ours.values<float>()[i], pil.values<float>()[i], 1e-4) << i;
  }

  const ir::Value* nhwc = image_input(15, 13, 3);
  ir::Tensor ours = read_one(folder, nhwc, "resize=20,crop=15x13,order=bgr,scale=1/255,mean=0.406:0.456:0.485,std=0.225:0.224:0.229,layout=nhwc");
  ir::Tensor expected = ir::load_npy(dir_ / "pipeline.npy");
  ASSERT_EQ(ours.dims(), expected.dims());
  // The 1e-4 of the resize divided by 255 and by std: below 2e-6.
  for (int64_t i = 0; i < ours.size(); ++i) ASSERT_NEAR(ours.values<float>()[i], expected.values<float>()[i], 1e-5) << i;
}

TEST_F(ImageReader, FolderInFileNameOrderAnyCaseAndRewinds) {
  fs::path folder = dir_ / "calib";
  fs::create_directories(folder / "sub.png");  // a folder, not an image
  auto solid = [](int r) { return pixels(8, 8, 3, [r](int, int) { return std::vector<int>{r, 2 * r, 3 * r}; }); };
  write_image(folder / "b.png", 8, 8, 3, solid(20));
  write_image(folder / "a.BMP", 8, 8, 3, solid(10));
  write_image(folder / "c.JpG", 8, 8, 3, solid(30));
  write_image(folder / "d.jpeg", 8, 8, 3, solid(40));
  std::ofstream(folder / "notes.txt") << "not an image";
  const ir::Value* x = image_input(3, 8, 8);
  auto reader = make_image_folder_reader(folder, {x}, ImageSpec{});
  EXPECT_EQ(reader->size(), 4u);
  EXPECT_EQ(reader->describe(), "image folder " + folder.string() + " (4 images)");
  // Red, green and blue of each solid image are r, 2r and 3r. JPEG is lossy: a solid colour at
  // quality 100 comes back within 2 levels.
  const std::vector<int> reds = {10, 20, 30, 40};
  const std::vector<float> tolerance = {0, 0, 2, 2};
  size_t n = 0;
  while (auto feed = reader->next()) {
    ASSERT_LT(n, reds.size());
    const ir::Tensor& t = feed->at("x");
    ASSERT_EQ(t.dims(), (std::vector<int64_t>{1, 3, 8, 8}));
    for (int64_t i = 0; i < t.size(); ++i) ASSERT_NEAR(t.values<float>()[i], reds[n] * (1 + i / 64), tolerance[n]) << n << " " << i;
    ++n;
  }
  EXPECT_EQ(n, reds.size());
  ASSERT_TRUE(reader->can_rewind());
  reader->rewind();
  EXPECT_EQ(reader->next()->at("x").values<float>()[0], 10);
}

TEST_F(ImageReader, ModelAndSpecShapeErrors) {
  const ir::Value* x224 = image_input(3, 224, 224);
  // Known from the spec: no image is read (the folder does not even exist).
  fs::path none = dir_ / "none";
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {x224}, parse_image_spec("resize=256,crop=256")); }),
            "image spec gives [1,3,256,256] but model input 'x' is float[1,3,224,224]");
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {x224}, parse_image_spec("resize=256x200")); }),
            "image spec gives [1,3,256,200] but model input 'x' is float[1,3,224,224]");
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {x224}, parse_image_spec("crop=224,layout=nhwc")); }),
            "image spec gives [1,224,224,3] but model input 'x' is float[1,3,224,224]");
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {x224}, parse_image_spec("resize=200x300,crop=224")); }),
            "image spec: crop=224x224 is larger than resize=200x300");
  const ir::Value* grey = input({ir::Dim::of(1), ir::Dim::of(1), ir::Dim::symbol("H"), ir::Dim::symbol("W")});
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {grey}, parse_image_spec("resize=28")); }),
            "image spec gives [1,3,H,W] but model input 'x' is float[1,1,H,W]");
  const ir::Value* flat = input({ir::Dim::of(1), ir::Dim::of(784)});
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {flat}, ImageSpec{}); }),
            "model input 'x' is float[1,784]; the image reader makes rank-4 [1,3,H,W] tensors");
  const ir::Value* bytes = input({ir::Dim::of(1), ir::Dim::of(224), ir::Dim::of(224), ir::Dim::of(3)}, ir::DataType::UInt8);
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {bytes}, parse_image_spec("layout=nhwc")); }),
            "model input 'x' is uint8[1,224,224,3]; the image reader makes float tensors");
  const ir::Value* a = image_input(3, 8, 8);
  const ir::Value* b = input({ir::Dim::of(1)}, ir::DataType::Float, "b");
  EXPECT_EQ(error_of([&] { make_image_folder_reader(none, {a, b}, ImageSpec{}); }),
            none.string() + ": an image folder feeds a model with one input; this model has 2 (x, b)");

  // Known only from the image: checked as it is read.
  fs::path folder = folder_with("small.png", 5, 3, 3, pixels(5, 3, 3, [](int, int) { return std::vector<int>{1, 2, 3}; }));
  const ir::Value* x4 = image_input(3, 4, 4);
  auto reader = make_image_folder_reader(folder, {x4}, ImageSpec{});
  EXPECT_EQ(error_of([&] { reader->next(); }),
            (folder / "small.png").string() +
                ": the image (width 5, height 3) gives [1,3,3,5] but model input 'x' is float[1,3,4,4]; set resize or crop in the image spec");
  const ir::Value* any = any_size_input();
  EXPECT_EQ(error_of([&] { make_image_folder_reader(folder, {any}, parse_image_spec("crop=4"))->next(); }),
            (folder / "small.png").string() + ": the image (width 5, height 3) is smaller than crop=4x4");
  EXPECT_EQ(error_of([&] { make_image_folder_reader(folder, {any}, parse_image_spec("resize=2,crop=3x1"))->next(); }),
            (folder / "small.png").string() + ": the image (after resize: width 3, height 2) is smaller than crop=3x1");
}

TEST_F(ImageReader, FolderAndDecodeErrors) {
  const ir::Value* x = any_size_input();
  EXPECT_EQ(error_of([&] { make_image_folder_reader(dir_ / "none", {x}, ImageSpec{}); }), (dir_ / "none").string() + ": no such folder");
  fs::create_directories(dir_ / "empty");
  std::ofstream(dir_ / "empty" / "a.npy") << "x";
  EXPECT_EQ(error_of([&] { make_image_folder_reader(dir_ / "empty", {x}, ImageSpec{}); }),
            (dir_ / "empty").string() + ": no .jpg, .jpeg, .png or .bmp files in the folder");

  fs::create_directories(dir_ / "bad");
  std::ofstream(dir_ / "bad" / "a.png") << "this is text, not an image";
  auto reader = make_image_folder_reader(dir_ / "bad", {x}, ImageSpec{});
  EXPECT_EQ(error_of([&] { reader->next(); }), (dir_ / "bad" / "a.png").string() + ": cannot decode the image: unknown image type");

  // A PNG cut short: stb says what it found.
  write_image(dir_ / "whole.png", 16, 16, 3, pixels(16, 16, 3, [](int x, int y) { return std::vector<int>{x, y, x * y}; }));
  std::ifstream whole(dir_ / "whole.png", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  fs::create_directories(dir_ / "cut");
  std::ofstream(dir_ / "cut" / "a.png", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_EQ(error_of([&] { make_image_folder_reader(dir_ / "cut", {x}, ImageSpec{})->next(); }),
            (dir_ / "cut" / "a.png").string() + ": cannot decode the image: outofdata");
}

TEST(ImageReaderSpec, ParsesTheCommandLineForm) {
  ImageSpec s = parse_image_spec(
      "resize=256,crop=224,order=rgb,scale=0.00392156862745098,mean=0.485:0.456:0.406,std=0.229:0.224:0.225,layout=nchw");
  EXPECT_EQ(s.resize, ImageSpec::Resize::ShorterSide);
  EXPECT_EQ(s.resize_shorter, 256);
  EXPECT_EQ(s.crop, (std::pair<int64_t, int64_t>{224, 224}));
  EXPECT_EQ(s.order, ImageSpec::Order::RGB);
  EXPECT_EQ(s.scale, 0.00392156862745098);
  EXPECT_EQ(s.mean, (std::array<double, 3>{0.485, 0.456, 0.406}));
  EXPECT_EQ(s.stddev, (std::array<double, 3>{0.229, 0.224, 0.225}));
  EXPECT_EQ(s.layout, ImageSpec::Layout::NCHW);
  EXPECT_EQ(s.to_string(),
            "resize=256,crop=224x224,order=rgb,scale=0.00392156862745098,mean=0.485:0.456:0.406,std=0.229:0.224:0.225,layout=nchw");

  ImageSpec t = parse_image_spec(" resize = 224X200 , crop=100x90,order=BGR,scale=1/255,mean=127.5,std=2,layout=nhwc");
  EXPECT_EQ(t.resize, ImageSpec::Resize::Exact);
  EXPECT_EQ(t.resize_height, 224);
  EXPECT_EQ(t.resize_width, 200);
  EXPECT_EQ(t.crop, (std::pair<int64_t, int64_t>{100, 90}));
  EXPECT_EQ(t.order, ImageSpec::Order::BGR);
  EXPECT_EQ(t.scale, 1.0 / 255);
  EXPECT_EQ(t.mean, (std::array<double, 3>{127.5, 127.5, 127.5}));
  EXPECT_EQ(t.stddev, (std::array<double, 3>{2, 2, 2}));
  EXPECT_EQ(t.layout, ImageSpec::Layout::NHWC);
  // The printed form reads back to the same spec.
  EXPECT_EQ(parse_image_spec(t.to_string()).to_string(), t.to_string());
  EXPECT_EQ(parse_image_spec(t.to_string()).scale, t.scale);

  ImageSpec d = parse_image_spec("");
  EXPECT_EQ(d.to_string(), "resize=none,crop=none,order=rgb,scale=1,mean=0:0:0,std=1:1:1,layout=nchw");
  EXPECT_EQ(parse_image_spec("resize=none,crop=none").to_string(), d.to_string());
}

TEST(ImageReaderSpec, CommandLineErrorsNameTheKeyAndValue) {
  const std::string keys = " (keys: resize, crop, order, scale, mean, std, layout)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"resize=256,colour=rgb", "image spec: unknown key 'colour' in 'colour=rgb'" + keys},
      {"resize", "image spec: 'resize' is not KEY=VALUE" + keys},
      {"resize=256,,crop=224", "image spec: '' is not KEY=VALUE" + keys},
      {"resize=256,resize=224", "image spec: 'resize' is given twice"},
      {"scale=abc", "image spec: scale=abc: 'abc' is not a number"},
      {"scale=1/0", "image spec: scale=1/0: '1/0' is not a number"},
      {"scale=nan", "image spec: scale=nan: 'nan' is not a number"},
      {"scale=0", "image spec: scale=0: the scale must not be 0"},
      {"mean=0.1:0.2", "image spec: mean=0.1:0.2: 2 values; give 1 or 3 (one per channel, separated by ':')"},
      {"std=0.2:x:0.3", "image spec: std=0.2:x:0.3: 'x' is not a number"},
      {"std=0.2:0.3:0.4:0.5", "image spec: std=0.2:0.3:0.4:0.5: 4 values; give 1 or 3 (one per channel, separated by ':')"},
      {"std=1:0:1", "image spec: std=1:0:1: std values must be above 0"},
      {"resize=0", "image spec: resize=0: '0' is not a size (a whole number above 0)"},
      {"resize=224x", "image spec: resize=224x: '' is not a size (a whole number above 0)"},
      {"resize=2.5", "image spec: resize=2.5: '2.5' is not a size (a whole number above 0)"},
      {"crop=1x2x3", "image spec: crop=1x2x3: give S or HxW (height x width)"},
      {"crop=-4", "image spec: crop=-4: '-4' is not a size (a whole number above 0)"},
      {"order=rgba", "image spec: order=rgba: give rgb or bgr"},
      {"layout=nch", "image spec: layout=nch: give nchw or nhwc"},
  };
  for (const auto& [spec, message] : cases) EXPECT_EQ(error_of([&] { parse_image_spec(spec); }), message) << spec;
}

TEST(ImageReaderSpec, JsonFormHasTheSameKeys) {
  ImageSpec s = image_spec_from_json(nlohmann::json::parse(R"({"resize": 256, "crop": [224, 200], "order": "bgr",
      "scale": "1/255", "mean": [0.485, 0.456, 0.406], "std": 0.5, "layout": "nhwc"})"));
  EXPECT_EQ(s.to_string(),
            parse_image_spec("resize=256,crop=224x200,order=bgr,scale=1/255,mean=0.485:0.456:0.406,std=0.5,layout=nhwc").to_string());
  EXPECT_EQ(s.scale, 1.0 / 255);
  ImageSpec e = image_spec_from_json(nlohmann::json::parse(R"({"resize": [224, 200], "crop": "none", "scale": 0.00392156862745098})"));
  EXPECT_EQ(e.resize, ImageSpec::Resize::Exact);
  EXPECT_EQ(e.resize_height, 224);
  EXPECT_EQ(e.resize_width, 200);
  EXPECT_FALSE(e.crop);
  EXPECT_EQ(e.scale, 0.00392156862745098);
  EXPECT_EQ(image_spec_from_json(nlohmann::json::object()).to_string(), ImageSpec{}.to_string());

  const std::string keys = " (keys: resize, crop, order, scale, mean, std, layout)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"colour": "rgb"})", "image spec: unknown key 'colour'" + keys},
      {R"({"mean": [0.1, 0.2]})", "image spec: mean=[0.1,0.2]: 2 values; give 1 or 3 (one per channel, separated by ':')"},
      {R"({"scale": true})", "image spec: scale=true: give a string, a number or a list of numbers"},
      {R"({"mean": ["a", "b", "c"]})", R"(image spec: mean=["a","b","c"]: give a string, a number or a list of numbers)"},
      {R"({"resize": 256.5})", "image spec: resize=256.5: '256.5' is not a size (a whole number above 0)"},
      {R"({"order": "rgba"})", R"(image spec: order="rgba": give rgb or bgr)"},
      {R"([1, 2])", "image spec: a JSON object is needed, not [1,2]"},
  };
  for (const auto& [json, message] : cases)
    EXPECT_EQ(error_of([&] { image_spec_from_json(nlohmann::json::parse(json)); }), message) << json;
}

}  // namespace
}  // namespace onnxptq::calib
