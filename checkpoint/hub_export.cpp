// model.safetensors, model_ema.safetensors and config.json of an output folder.
#include "checkpoint/hub_export.h"

#include "base/atomic_file.h"
#include "base/json_record.h"
#include "checkpoint/safetensors.h"

namespace ddp {
namespace {

std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& item : items) out += (out.size() > 1 ? ", " : "") + item;
  return out + "]";
}

// data.mean or data.std, one value per input channel.
std::string per_channel(const PerChannel& values, int64_t channels) {
  std::vector<std::string> out;
  for (int64_t c = 0; c < channels; ++c)
    out.push_back(json_number(values.size() == 1 ? values[0] : values[static_cast<size_t>(c)]));
  return json_array(out);
}

}  // namespace

std::string hub_config_json(const Config& cfg, const ModelCard& card) {
  const DataConfig& data = cfg.data;
  const int64_t crop = data.val_crop_size ? data.val_crop_size : data.image_size;
  const int64_t resize = data.val_resize_size ? data.val_resize_size : crop;
  const std::string torchvision(model_row(cfg.model.name.name).torchvision);
  std::vector<std::string> labels;
  for (const std::string& name : card.classes) labels.push_back(json_quote(name));
  std::string out = "{\n  \"architecture\": " + json_quote(cfg.model.name.name) + ",\n";
  out += "  \"num_classes\": " + std::to_string(cfg.model.num_classes) + ",\n";
  out += "  \"in_chans\": " + std::to_string(cfg.model.in_channels) + ",\n";
  if (!labels.empty()) out += "  \"label_names\": " + json_array(labels) + ",\n";
  if (!torchvision.empty()) out += "  \"torchvision_model\": " + json_quote(torchvision) + ",\n";
  out += "  \"library_name\": \"ddptrain\",\n";
  out += "  \"pretrained_cfg\": {\n";
  out += "    \"input_size\": [" + std::to_string(cfg.model.in_channels) + ", " + std::to_string(crop) + ", " +
         std::to_string(crop) + "],\n";
  out += "    \"interpolation\": " + json_quote(choice_name(data.interpolation)) + ",\n";
  out += "    \"mean\": " + per_channel(data.mean, cfg.model.in_channels) + ",\n";
  out += "    \"std\": " + per_channel(data.std, cfg.model.in_channels) + ",\n";
  out += "    \"crop_pct\": " + json_number(static_cast<double>(crop) / static_cast<double>(resize)) + ",\n";
  out += "    \"crop_mode\": \"center\",\n";
  if (!card.head.empty()) out += "    \"classifier\": " + json_quote(card.head) + ",\n";
  out += "    \"num_classes\": " + std::to_string(cfg.model.num_classes) + "\n  }\n}\n";
  return out;
}

void write_hub_files(AtomicFileSet& files, const std::string& out_dir, const NamedTensors& model,
                     const NamedTensors* ema, const std::string& config_json) {
  write_safetensors(files, out_dir + "/" + HubFiles::kModel, model);
  if (ema) write_safetensors(files, out_dir + "/" + HubFiles::kEma, *ema);
  files.write(out_dir + "/" + HubFiles::kConfig, std::vector<char>(config_json.begin(), config_json.end()));
}

}  // namespace ddp
