// torchvision.transforms.v2.functional's affine, rotate and colour ops on uint8 tensors
// (torchvision/transforms/v2/functional/_geometry.py and _color.py), operation for operation.
#include "data/auto_augment_ops.h"

#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace ddp {
namespace {

// math.radians and math.degrees: CPython multiplies by Py_MATH_PI / 180 and 180 / Py_MATH_PI.
constexpr double kAugPi = 3.14159265358979323846;
double aug_radians(double degrees) { return degrees * (kAugPi / 180.0); }
double aug_degrees(double radians) { return radians * (180.0 / kAugPi); }

// Python's float modulo: the result takes the divisor's sign (CPython's float_rem).
double aug_python_mod(double a, double m) {
  double r = std::fmod(a, m);
  if (r != 0.0) {
    if ((m < 0) != (r < 0)) r += m;
  } else {
    r = std::copysign(0.0, m);
  }
  return r;
}

// _get_inverse_affine_matrix(center, angle, translate, scale, shear, inverted=True).
std::vector<double> aug_inverse_affine_matrix(std::array<double, 2> center, double angle,
                                              std::array<double, 2> translate, double scale,
                                              std::array<double, 2> shear) {
  const double rot = aug_radians(angle), sx = aug_radians(shear[0]), sy = aug_radians(shear[1]);
  const double cx = center[0], cy = center[1], tx = translate[0], ty = translate[1];
  const double cos_sy = std::cos(sy), tan_sx = std::tan(sx), rot_minus_sy = rot - sy;
  const double cx_plus_tx = cx + tx, cy_plus_ty = cy + ty;
  const double a = std::cos(rot_minus_sy) / cos_sy;
  const double b = -(a * tan_sx + std::sin(rot));
  const double c = std::sin(rot_minus_sy) / cos_sy;
  const double d = std::cos(rot) - c * tan_sx;
  std::vector<double> m = {d / scale, -b / scale, 0.0, -c / scale, a / scale, 0.0};
  m[2] += cx - m[0] * cx_plus_tx - m[1] * cy_plus_ty;
  m[5] += cy - m[3] * cx_plus_tx - m[4] * cy_plus_ty;
  return m;
}

// _affine_grid(theta, w, h, ow, oh): the output pixels' centres through theta, normalised by the input's half size.
torch::Tensor aug_affine_grid(const torch::Tensor& theta, int64_t w, int64_t h, int64_t ow, int64_t oh) {
  torch::Tensor base_grid = torch::empty({1, oh, ow, 3}, torch::kFloat32);
  base_grid.select(-1, 0).copy_(torch::linspace((1.0 - static_cast<double>(ow)) * 0.5,
                                                (static_cast<double>(ow) - 1.0) * 0.5, ow, torch::kFloat32));
  base_grid.select(-1, 1).copy_(
      torch::linspace((1.0 - static_cast<double>(oh)) * 0.5, (static_cast<double>(oh) - 1.0) * 0.5, oh, torch::kFloat32)
          .unsqueeze_(-1));
  base_grid.select(-1, 2).fill_(1);
  const torch::Tensor half = torch::tensor({0.5 * static_cast<double>(w), 0.5 * static_cast<double>(h)},
                                           torch::TensorOptions().dtype(torch::kFloat32));
  const torch::Tensor rescaled_theta = theta.transpose(1, 2).div_(half);
  return base_grid.view({1, oh * ow, 3}).bmm(rescaled_theta).view({1, oh, ow, 2});
}

// _apply_grid_transform(img, grid, mode, fill=None): grid_sample of the float32 image with zero padding, rounded.
torch::Tensor aug_apply_grid(const torch::Tensor& image, const torch::Tensor& grid, GridInterpolation interpolation) {
  const int64_t c = image.size(-3), h = image.size(-2), w = image.size(-1);
  const torch::Tensor float_img = image.reshape({-1, c, h, w}).to(torch::kFloat32);
  // torch.nn.functional.grid_sample's mode enum: bilinear 0, nearest 1; padding "zeros" 0.
  const int64_t mode = interpolation == GridInterpolation::Bilinear ? 0 : 1;
  torch::Tensor out = at::grid_sampler(float_img, grid, mode, /*padding_mode=*/0, /*align_corners=*/false);
  return out.round_().to(torch::kUInt8).reshape(image.sizes());
}

torch::Tensor aug_matrix_transform(const torch::Tensor& image, const std::vector<double>& matrix,
                                   GridInterpolation interpolation) {
  const int64_t h = image.size(-2), w = image.size(-1);
  const torch::Tensor theta =
      torch::tensor(matrix, torch::TensorOptions().dtype(torch::kFloat64)).to(torch::kFloat32).reshape({1, 2, 3});
  return aug_apply_grid(image, aug_affine_grid(theta, w, h, w, h), interpolation);
}

// _rgb_to_grayscale_image(image, num_output_channels=1, preserve_dtype=False), floored as the colour ops do for
// integer images.
torch::Tensor aug_floored_grayscale(const torch::Tensor& image) {
  const std::vector<torch::Tensor> rgb = image.unbind(-3);
  return rgb[0].mul(0.2989).add_(rgb[1], 0.587).add_(rgb[2], 0.114).unsqueeze(-3).floor_();
}

// _blend(image1, image2, ratio) for a uint8 image1.
torch::Tensor aug_blend(const torch::Tensor& image1, const torch::Tensor& image2, double ratio) {
  return image1.mul(ratio).add_(image2, 1.0 - ratio).clamp_(0, 255).to(torch::kUInt8);
}

void aug_check_channels(const torch::Tensor& image, const char* op) {
  const int64_t c = image.size(-3);
  if (c != 1 && c != 3)
    throw std::invalid_argument(std::string(op) + ": images of 1 or 3 channels, got " + std::to_string(c));
}

}  // namespace

torch::Tensor affine_op(const torch::Tensor& image, double angle, std::array<double, 2> translate, double scale,
                        std::array<double, 2> shear, GridInterpolation interpolation,
                        std::optional<std::array<double, 2>> center) {
  const auto h = static_cast<double>(image.size(-2)), w = static_cast<double>(image.size(-1));
  // affine_image: the center in pixels, moved so that (0, 0) is the image's center.
  std::array<double, 2> center_f = {0.0, 0.0};
  if (center) center_f = {(*center)[0] - w * 0.5, (*center)[1] - h * 0.5};
  return aug_matrix_transform(image, aug_inverse_affine_matrix(center_f, angle, translate, scale, shear),
                              interpolation);
}

torch::Tensor rotate_op(const torch::Tensor& image, double angle, GridInterpolation interpolation) {
  angle = aug_python_mod(angle, 360.0);
  if (angle == 0) return image.clone();
  if (angle == 180) return torch::rot90(image, 2, {-2, -1});
  if (image.size(-1) == image.size(-2)) {
    if (angle == 90) return torch::rot90(image, 1, {-2, -1});
    if (angle == 270) return torch::rot90(image, 3, {-2, -1});
  }
  // rotate_image: -angle, as affine and rotate turn opposite ways.
  return aug_matrix_transform(image, aug_inverse_affine_matrix({0.0, 0.0}, -angle, {0.0, 0.0}, 1.0, {0.0, 0.0}),
                              interpolation);
}

torch::Tensor brightness_op(const torch::Tensor& image, double factor) {
  aug_check_channels(image, "adjust_brightness");
  return image.mul(factor).clamp_(0, 255).to(torch::kUInt8);
}

torch::Tensor saturation_op(const torch::Tensor& image, double factor) {
  aug_check_channels(image, "adjust_saturation");
  if (image.size(-3) == 1) return image;
  return aug_blend(image, aug_floored_grayscale(image), factor);
}

torch::Tensor contrast_op(const torch::Tensor& image, double factor) {
  aug_check_channels(image, "adjust_contrast");
  const torch::Tensor gray = image.size(-3) == 3 ? aug_floored_grayscale(image) : image.to(torch::kFloat32);
  return aug_blend(image, torch::mean(gray, {-3, -2, -1}, /*keepdim=*/true), factor);
}

torch::Tensor sharpness_op(const torch::Tensor& image, double factor) {
  aug_check_channels(image, "adjust_sharpness");
  const int64_t h = image.size(-2), w = image.size(-1);
  if (image.numel() == 0 || h <= 2 || w <= 2) return image;
  // torchvision blurs with conv2d in float32 (a normalised 3x3 kernel: 1 around a 5 in the middle) and rounds. The
  // exact value is n / 13 for an integer n (the 8 neighbours plus 5 times the centre), never closer than 1 / 26 to a
  // half, and the float32 sum is within 1e-3 of it: round_() gives the nearest integer to n / 13 in any summation
  // order, here (2n + 13) // 26 in integers, the same pixels as conv2d's at a fraction of its cost.
  const torch::Tensor x = image.to(torch::kInt32);
  torch::Tensor n = x.slice(-2, 1, h - 1).slice(-1, 1, w - 1).mul(4);
  for (int64_t dy = 0; dy < 3; ++dy)
    for (int64_t dx = 0; dx < 3; ++dx) n.add_(x.slice(-2, dy, h - 2 + dy).slice(-1, dx, w - 2 + dx));
  torch::Tensor blurred = n.mul_(2).add_(13).div_(26, "floor").to(torch::kFloat32);
  torch::Tensor output = image.to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
  torch::Tensor view = output.slice(-2, 1, -1).slice(-1, 1, -1);
  view.add_(blurred.sub_(view), 1.0 - factor);
  return output.clamp_(0, 255).to(torch::kUInt8);
}

namespace {

// _rgb_to_hsv(image) of a float32 [3, H, W] image in [0, 1], with its in-place operations in its order.
torch::Tensor aug_rgb_to_hsv(const torch::Tensor& image) {
  const std::vector<torch::Tensor> rgb = image.unbind(-3);
  const torch::Tensor& r = rgb[0];
  const torch::Tensor& g = rgb[1];
  auto [minc, maxc] = torch::aminmax(image, -3);
  const torch::Tensor eqc = maxc == minc;
  const torch::Tensor channels_range = maxc - minc;
  const torch::Tensor ones = torch::ones_like(maxc);
  const torch::Tensor s = channels_range / torch::where(eqc, ones, maxc);
  const torch::Tensor channels_range_divisor = torch::where(eqc, ones, channels_range).unsqueeze_(-3);
  const std::vector<torch::Tensor> rgb_c = ((maxc.unsqueeze(-3) - image) / channels_range_divisor).unbind(-3);
  torch::Tensor rc = rgb_c[0], gc = rgb_c[1], bc = rgb_c[2];
  torch::Tensor mask_maxc_neq_r = maxc != r;
  torch::Tensor mask_maxc_eq_g = maxc == g;
  const torch::Tensor hg = rc.add(2.0).sub_(bc).mul_(mask_maxc_eq_g & mask_maxc_neq_r);
  torch::Tensor hr = bc.sub_(gc).mul_(~mask_maxc_neq_r);
  const torch::Tensor hb = gc.add_(4.0).sub_(rc).mul_(mask_maxc_neq_r.logical_and_(mask_maxc_eq_g.logical_not_()));
  torch::Tensor h = hr.add_(hg).add_(hb);
  h = h.mul_(1.0 / 6.0).add_(1.0).fmod_(1.0);
  return torch::stack({h, s, maxc}, -3);
}

// _hsv_to_rgb(img) of a float32 [3, H, W] HSV image.
torch::Tensor aug_hsv_to_rgb(const torch::Tensor& img) {
  const std::vector<torch::Tensor> hsv = img.unbind(-3);
  const torch::Tensor& s = hsv[1];
  const torch::Tensor& v = hsv[2];
  torch::Tensor h6 = hsv[0].mul(6);
  torch::Tensor i = torch::floor(h6);
  const torch::Tensor f = h6.sub_(i);
  i = i.to(torch::kInt32);
  torch::Tensor sxf = s * f;
  torch::Tensor one_minus_s = torch::rsub(s, 1.0);
  const torch::Tensor q = torch::rsub(sxf, 1.0).mul_(v).clamp_(0.0, 1.0);
  const torch::Tensor t = sxf.add_(one_minus_s).mul_(v).clamp_(0.0, 1.0);
  const torch::Tensor p = one_minus_s.mul_(v).clamp_(0.0, 1.0);
  i.remainder_(6);
  const torch::Tensor vpqt = torch::stack({v, p, q, t}, -3);
  // vpqt -> rgb by i: select[:, i], its channel axis moved before H, W for a batch.
  torch::Tensor select =
      torch::tensor({0, 2, 1, 1, 3, 0, 3, 0, 0, 2, 1, 1, 1, 1, 3, 0, 0, 2}, torch::kLong).view({3, 6});
  select = select.index({torch::indexing::Slice(), i});
  if (select.dim() > 3) select = select.moveaxis(0, -3);
  return vpqt.gather(-3, select);
}

}  // namespace

torch::Tensor hue_op(const torch::Tensor& image, double factor) {
  if (!(-0.5 <= factor && factor <= 0.5))
    throw std::invalid_argument("adjust_hue: the factor " + std::to_string(factor) + " is not in [-0.5, 0.5]");
  aug_check_channels(image, "adjust_hue");
  if (image.size(-3) == 1 || image.numel() == 0) return image;
  // to_dtype_image(image, float32, scale=True), then back with scale=True: mul(255 + 1 - 1e-3) and truncation.
  const torch::Tensor hsv = aug_rgb_to_hsv(image.to(torch::kFloat32).mul_(1.0 / 255));
  const std::vector<torch::Tensor> channels = hsv.unbind(-3);
  torch::Tensor h = channels[0];
  h.add_(factor).remainder_(1.0);
  const torch::Tensor adjusted = aug_hsv_to_rgb(torch::stack({h, channels[1], channels[2]}, -3));
  return adjusted.mul(255 + 1.0 - 1e-3).to(torch::kUInt8);
}

torch::Tensor posterize_op(const torch::Tensor& image, int64_t bits) {
  if (bits < 0 || bits > 8) throw std::invalid_argument("posterize: bits in 0..8, got " + std::to_string(bits));
  if (bits >= 8) return image;
  const int64_t mask = ((int64_t{1} << bits) - 1) << (8 - bits);
  return image.bitwise_and(mask);
}

torch::Tensor solarize_op(const torch::Tensor& image, double threshold) {
  if (threshold > 255) throw std::invalid_argument("solarize: the threshold is above 255");
  // `image >= threshold` compares in float32: for uint8 values, image >= ceil(float(threshold)) in integers.
  const double at_least = std::ceil(static_cast<double>(static_cast<float>(threshold)));
  if (at_least <= 0) return invert_op(image);
  // torch.where(image >= threshold, invert(image), image) as image XOR 255 where it holds, XOR 0 elsewhere.
  return image.bitwise_xor(image.ge(static_cast<int64_t>(at_least)).to(torch::kUInt8).mul_(255));
}

torch::Tensor autocontrast_op(const torch::Tensor& image) {
  aug_check_channels(image, "autocontrast");
  if (image.numel() == 0) return image;
  torch::Tensor float_image = image.to(torch::kFloat32);
  torch::Tensor minimum = float_image.amin({-2, -1}, /*keepdim=*/true);
  torch::Tensor maximum = float_image.amax({-2, -1}, /*keepdim=*/true);
  const torch::Tensor eq_idxs = maximum == minimum;
  torch::Tensor inv_scale = maximum.sub_(minimum).mul_(1.0 / 255.0);
  minimum.index_put_({eq_idxs}, 0.0);
  inv_scale.index_put_({eq_idxs}, 1.0);
  return float_image.sub_(minimum).div_(inv_scale).clamp_(0, 255).to(torch::kUInt8);
}

torch::Tensor equalize_op(const torch::Tensor& image) {
  if (image.numel() == 0) return image;
  // The histogram per channel by scatter_add, its cumulative sum, and PIL's lookup table
  // lut[k] = (cum_hist[k - 1] + step // 2) // step with step = (pixels not of the largest value present) // 255.
  std::vector<int64_t> batch_shape(image.sizes().begin(), image.sizes().end() - 2);
  const torch::Tensor flat_image = image.flatten(-2).to(torch::kLong);
  std::vector<int64_t> hist_shape = batch_shape;
  hist_shape.push_back(256);
  torch::Tensor hist = flat_image.new_zeros(hist_shape, torch::TensorOptions().dtype(torch::kInt32));
  hist.scatter_add_(-1, flat_image, hist.new_ones({1}).expand_as(flat_image));
  torch::Tensor cum_hist = hist.cumsum(-1);
  const torch::Tensor index = cum_hist.argmax(-1);
  const torch::Tensor num_non_max_pixels = torch::rsub(hist.gather(-1, index.unsqueeze(-1)), flat_image.size(-1));
  const torch::Tensor step = num_non_max_pixels.div_(255, "floor");
  const torch::Tensor valid_equalization = step.ne(0).unsqueeze_(-1);
  cum_hist = cum_hist.slice(-1, 0, -1);
  const torch::Tensor half_step = step.floor_divide(2);
  cum_hist.add_(half_step).div_(step.clamp_(1), "floor").clamp_(0, 255);
  torch::Tensor lut = cum_hist.to(torch::kUInt8);
  std::vector<int64_t> zero_shape = batch_shape;
  zero_shape.push_back(1);
  lut = torch::cat({lut.new_zeros({1}).expand(zero_shape), lut}, -1);
  const torch::Tensor equalized = lut.gather(-1, flat_image).view_as(image);
  return torch::where(valid_equalization, equalized, image);
}

torch::Tensor invert_op(const torch::Tensor& image) { return image.bitwise_not(); }

std::string_view aug_op_name(AugOp op) {
  switch (op) {
    case AugOp::Identity:
      return "Identity";
    case AugOp::ShearX:
      return "ShearX";
    case AugOp::ShearY:
      return "ShearY";
    case AugOp::TranslateX:
      return "TranslateX";
    case AugOp::TranslateY:
      return "TranslateY";
    case AugOp::Rotate:
      return "Rotate";
    case AugOp::Brightness:
      return "Brightness";
    case AugOp::Color:
      return "Color";
    case AugOp::Contrast:
      return "Contrast";
    case AugOp::Sharpness:
      return "Sharpness";
    case AugOp::Posterize:
      return "Posterize";
    case AugOp::Solarize:
      return "Solarize";
    case AugOp::AutoContrast:
      return "AutoContrast";
    case AugOp::Equalize:
      return "Equalize";
    case AugOp::Invert:
      return "Invert";
  }
  return "?";
}

torch::Tensor apply_aug_op(const torch::Tensor& image, AugOp op, double magnitude, GridInterpolation interpolation) {
  switch (op) {
    case AugOp::Identity:
      return image;
    case AugOp::ShearX:
      return affine_op(image, 0.0, {0.0, 0.0}, 1.0, {aug_degrees(std::atan(magnitude)), 0.0}, interpolation,
                       std::array<double, 2>{0.0, 0.0});
    case AugOp::ShearY:
      return affine_op(image, 0.0, {0.0, 0.0}, 1.0, {0.0, aug_degrees(std::atan(magnitude))}, interpolation,
                       std::array<double, 2>{0.0, 0.0});
    case AugOp::TranslateX:
      return affine_op(image, 0.0, {static_cast<double>(static_cast<int64_t>(magnitude)), 0.0}, 1.0, {0.0, 0.0},
                       interpolation, std::nullopt);
    case AugOp::TranslateY:
      return affine_op(image, 0.0, {0.0, static_cast<double>(static_cast<int64_t>(magnitude))}, 1.0, {0.0, 0.0},
                       interpolation, std::nullopt);
    case AugOp::Rotate:
      return rotate_op(image, magnitude, interpolation);
    case AugOp::Brightness:
      return brightness_op(image, 1.0 + magnitude);
    case AugOp::Color:
      return saturation_op(image, 1.0 + magnitude);
    case AugOp::Contrast:
      return contrast_op(image, 1.0 + magnitude);
    case AugOp::Sharpness:
      return sharpness_op(image, 1.0 + magnitude);
    case AugOp::Posterize:
      return posterize_op(image, static_cast<int64_t>(magnitude));
    case AugOp::Solarize:
      return solarize_op(image, 255.0 * magnitude);
    case AugOp::AutoContrast:
      return autocontrast_op(image);
    case AugOp::Equalize:
      return equalize_op(image);
    case AugOp::Invert:
      return invert_op(image);
  }
  throw std::invalid_argument("apply_aug_op: unknown op");
}

}  // namespace ddp
