// The ops of torchvision's automatic augmentation policies and ColorJitter at fixed parameters, on uint8 [C, H, W]
// tensors (torchvision.transforms.v2.functional's tensor kernels, computed with the same ATen operations).
#pragma once

#include <torch/types.h>

#include <array>
#include <optional>
#include <string_view>

namespace ddp {

// InterpolationMode.NEAREST or BILINEAR of the geometric ops (grid_sample's modes).
enum class GridInterpolation { Nearest, Bilinear };

// F.affine(image, angle, translate, scale, shear, interpolation, fill=None, center): _get_inverse_affine_matrix,
// _affine_grid and _apply_grid_transform (grid_sample in float32 with zero padding, rounded back to uint8). center:
// in pixels, None = the image's center. Angles and shears in degrees.
torch::Tensor affine_op(const torch::Tensor& image, double angle, std::array<double, 2> translate, double scale,
                        std::array<double, 2> shear, GridInterpolation interpolation,
                        std::optional<std::array<double, 2>> center);

// F.rotate(image, angle, interpolation, expand=False, center=None, fill=None): counter-clockwise degrees; 0 and 180
// (and 90 and 270 on a square image) are exact pixel moves, as torchvision's fast path.
torch::Tensor rotate_op(const torch::Tensor& image, double angle, GridInterpolation interpolation);

// F.adjust_brightness, F.adjust_saturation, F.adjust_contrast, F.adjust_sharpness (factor >= 0).
torch::Tensor brightness_op(const torch::Tensor& image, double factor);
torch::Tensor saturation_op(const torch::Tensor& image, double factor);
torch::Tensor contrast_op(const torch::Tensor& image, double factor);
torch::Tensor sharpness_op(const torch::Tensor& image, double factor);
// F.adjust_hue (factor in [-0.5, 0.5]): through HSV in float32 (_rgb_to_hsv, _hsv_to_rgb) and back to uint8 as
// to_dtype scales; a 1-channel image is returned as it is.
torch::Tensor hue_op(const torch::Tensor& image, double factor);

// F.posterize (bits 0..8), F.solarize (threshold in 0..255), F.autocontrast, F.equalize, F.invert.
torch::Tensor posterize_op(const torch::Tensor& image, int64_t bits);
torch::Tensor solarize_op(const torch::Tensor& image, double threshold);
torch::Tensor autocontrast_op(const torch::Tensor& image);
torch::Tensor equalize_op(const torch::Tensor& image);
torch::Tensor invert_op(const torch::Tensor& image);

// The ops by the names torchvision's policies use (_AutoAugmentBase._apply_image_or_video_transform).
enum class AugOp {
  Identity,
  ShearX,
  ShearY,
  TranslateX,
  TranslateY,
  Rotate,
  Brightness,
  Color,
  Contrast,
  Sharpness,
  Posterize,
  Solarize,
  AutoContrast,
  Equalize,
  Invert
};

std::string_view aug_op_name(AugOp op);

// _apply_image_or_video_transform(image, op, magnitude, interpolation, fill=None): the op with its magnitude turned
// into the functional op's parameter (shear: degrees(atan(magnitude)) about the top-left corner; translate:
// int(magnitude) pixels; colour factors 1 + magnitude; posterize: int(magnitude) bits; solarize: 255 * magnitude).
torch::Tensor apply_aug_op(const torch::Tensor& image, AugOp op, double magnitude, GridInterpolation interpolation);

}  // namespace ddp
