// Loading torch.optim's state_dict() form (state + param_groups) into an optimizer: the parameter order and the
// hyperparameters checked here, each parameter's entry read by the optimizer's own form (TorchStateForm).
#include "optim/optimizer_state.h"

#include "base/python_kind.h"
#include "optim/param_state_access.h"
#include "optim/torch_state_form.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

namespace ddp {
namespace {

// A hyperparameter as a double (Python may hold a float, an int, a bool or a 1-element tensor); NaN if not a number.
double hyper_number(const c10::IValue& v) {
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
  return std::nan("");
}

std::string hyper_text(const c10::IValue& v) {
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isTuple()) {
    std::string s = "(";
    for (const auto& x : v.toTupleRef().elements()) s += (s.size() > 1 ? ", " : "") + hyper_text(x);
    return s + ")";
  }
  if (v.isNone()) return "None";
  const double x = hyper_number(v);
  if (std::isnan(x)) return "(" + v.tagKind() + ")";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

bool hyper_equal(const c10::IValue& ours, const c10::IValue& theirs) {
  if (ours.isNone() || theirs.isNone()) return ours.isNone() && theirs.isNone();
  if (ours.isTuple()) {
    if (!theirs.isTuple() && !theirs.isList()) return false;
    const auto& a = ours.toTupleRef().elements();
    const auto b = theirs.isTuple() ? theirs.toTupleRef().elements().vec() : theirs.toListRef().vec();
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!hyper_equal(a[i], b[i])) return false;
    return true;
  }
  const double x = hyper_number(ours), y = hyper_number(theirs);
  return std::abs(x - y) <= 1e-12 * std::max(1.0, std::abs(x));
}

// Hyperparameters of param group `group` that change the update (lr excepted: ddptrain's schedule sets it from
// global_step).
std::vector<GroupField> update_hyperparameters(const torch::optim::Optimizer& opt, size_t group) {
  std::vector<GroupField> out;
  for (GroupField& f : torch_state_form(opt).group_fields(opt.param_groups().at(group).options()))
    if (f.changes_update) out.push_back(std::move(f));
  return out;
}

// `prefix` names the group where the optimizer has several ("param_groups[1] ").
void compare_param_group_hyperparameters(const std::vector<GroupField>& ours, const c10::impl::GenericDict& group,
                                         const std::string& prefix, std::vector<std::string>& differences) {
  for (const auto& [key, value, changes_update] : ours) {
    auto it = group.find(key);
    if (it == group.end() || hyper_equal(value, it->value())) continue;
    differences.push_back(prefix + key + " " + hyper_text(it->value()) + " (config " + hyper_text(value) + ")");
  }
}

// The "params" list of each param_groups entry, checked: a list of dicts each holding a list of ints.
std::vector<c10::ArrayRef<c10::IValue>> param_group_ids(const c10::IValue& groups) {
  if (!groups.isList()) throw std::runtime_error("optimizer.param_groups is " + python_kind(groups) + ", not a list");
  std::vector<c10::ArrayRef<c10::IValue>> out;
  for (size_t gi = 0; gi < groups.toListRef().size(); ++gi) {
    const std::string where = "optimizer.param_groups[" + std::to_string(gi) + "]";
    const c10::IValue& g = groups.toListRef()[gi];
    if (!g.isGenericDict()) throw std::runtime_error(where + " is not a dict");
    const c10::IValue& ids = state_field(g.toGenericDict(), "params", where);
    if (!ids.isList()) throw std::runtime_error(where + "[\"params\"] is not a list");
    for (const c10::IValue& id : ids.toListRef())
      if (!id.isInt()) throw std::runtime_error(where + "[\"params\"] holds " + python_kind(id) + ", not an int");
    out.push_back(ids.toListRef());
  }
  return out;
}

std::string group_sizes_text(const std::vector<size_t>& sizes) {
  std::string s = std::to_string(sizes.size()) + (sizes.size() == 1 ? " param group of " : " param groups of ");
  for (size_t i = 0; i < sizes.size(); ++i)
    s += (i == 0 ? "" : i + 1 == sizes.size() ? " and " : ", ") + std::to_string(sizes[i]);
  return s + " parameters";
}

// param_group_layout_difference for the checked "params" lists.
std::string layout_difference(const torch::optim::Optimizer& opt, const std::vector<c10::ArrayRef<c10::IValue>>& ids) {
  std::vector<size_t> theirs, ours;
  for (const auto& group : ids) theirs.push_back(group.size());
  for (const auto& group : opt.param_groups()) ours.push_back(group.params().size());
  if (theirs == ours) return "";
  return "optimizer.param_groups list " + group_sizes_text(theirs) + ", the optimizer has " + group_sizes_text(ours);
}

// param_groups' parameter ids -> position in the optimizer's parameter order (torch.optim's load_state_dict pairs
// the listed ids group by group with the optimizer's parameters); records hyperparameter differences, group by group.
std::map<int64_t, size_t> param_group_positions(const torch::optim::Optimizer& opt, const c10::IValue& groups,
                                                std::vector<std::string>& differences) {
  const std::vector<c10::ArrayRef<c10::IValue>> ids = param_group_ids(groups);
  if (const std::string layout = layout_difference(opt, ids); !layout.empty()) throw std::runtime_error(layout);
  std::map<int64_t, size_t> position;
  size_t next = 0;
  for (size_t gi = 0; gi < ids.size(); ++gi) {
    const std::string where = "optimizer.param_groups[" + std::to_string(gi) + "]";
    for (const c10::IValue& id : ids[gi])
      if (!position.emplace(id.toInt(), next++).second)
        throw std::runtime_error(where + "[\"params\"] lists parameter " + std::to_string(id.toInt()) + " twice");
    compare_param_group_hyperparameters(update_hyperparameters(opt, gi), groups.toListRef()[gi].toGenericDict(),
                                        ids.size() > 1 ? "param_groups[" + std::to_string(gi) + "] " : "", differences);
  }
  return position;
}

}  // namespace

std::vector<size_t> param_group_sizes(const c10::impl::GenericDict& state) {
  std::vector<size_t> sizes;
  for (const auto& ids : param_group_ids(state_field(state, "param_groups", "optimizer"))) sizes.push_back(ids.size());
  return sizes;
}

std::string param_group_layout_difference(const torch::optim::Optimizer& opt, const c10::impl::GenericDict& state) {
  return layout_difference(opt, param_group_ids(state_field(state, "param_groups", "optimizer")));
}

std::vector<std::string> load_optimizer_state_dict(torch::optim::Optimizer& opt, const c10::impl::GenericDict& state) {
  const auto params = optimizer_params(opt);
  std::vector<std::string> differences;
  const auto position = param_group_positions(opt, state_field(state, "param_groups", "optimizer"), differences);
  const c10::IValue& per_param = state_field(state, "state", "optimizer");
  if (!per_param.isGenericDict())
    throw std::runtime_error("optimizer.state is " + python_kind(per_param) + ", not a dict");
  std::vector<std::pair<void*, std::unique_ptr<torch::optim::OptimizerParamState>>> loaded;
  for (const auto& item : per_param.toGenericDict()) {
    if (!item.key().isInt())
      throw std::runtime_error("optimizer.state has a key that is " + python_kind(item.key()) + ", not an int");
    const std::string where = "optimizer.state[" + std::to_string(item.key().toInt()) + "]";
    auto pos = position.find(item.key().toInt());
    if (pos == position.end()) throw std::runtime_error(where + " is for a parameter param_groups do not list");
    if (!item.value().isGenericDict()) throw std::runtime_error(where + " is not a dict");
    const torch::Tensor& p = params[pos->second];
    auto s = torch_state_form(opt).param_state_from(item.value().toGenericDict(), p, where);
    if (s) loaded.emplace_back(param_state_key(p), std::move(s));
  }
  const auto& groups = state_field(state, "param_groups", "optimizer").toListRef();
  for (size_t gi = 0; gi < groups.size(); ++gi)
    torch_state_form(opt).group_state_from(groups[gi].toGenericDict(), opt.param_groups()[gi].options(),
                                           "optimizer.param_groups[" + std::to_string(gi) + "]");
  opt.state().clear();
  for (auto& [key, s] : loaded) opt.state()[key] = std::move(s);
  return differences;
}

}  // namespace ddp
