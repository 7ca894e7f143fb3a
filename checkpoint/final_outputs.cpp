// write_final_outputs: model.pt, model_ema.pt, model_scripted.pt and the Hub files, replaced together.
#include "checkpoint/final_outputs.h"

#include "checkpoint/hub_export.h"

namespace ddp {

std::vector<std::string> FinalOutputs::names() {
  return {kModel, kEma, kScripted, HubFiles::kModel, HubFiles::kEma, HubFiles::kConfig};
}

void write_final_outputs(const std::string& out_dir, const FinalState& state) {
  AtomicFileSet files;
  if (state.scripted) state.scripted(files, out_dir + "/" + FinalOutputs::kScripted);
  if (state.ema) save_state_dict(files, out_dir + "/" + FinalOutputs::kEma, *state.ema);
  write_hub_files(files, out_dir, state.model, state.ema, state.config_json);
  save_state_dict(files, out_dir + "/" + FinalOutputs::kModel, state.model);  // renamed last
  for (const std::string& name : FinalOutputs::names())
    if (!files.holds(out_dir + "/" + name)) files.remove(out_dir + "/" + name);
  files.commit();
}

}  // namespace ddp
