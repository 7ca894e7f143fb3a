// The optimizer rows as config loading reads them: names, the union of their hyperparameter keys, their docs.
#include "config/optimizer_rows.h"

#include "config/config.h"

#include <deque>
#include <stdexcept>

namespace ddp {
namespace {

bool same_declaration(const HyperparameterKey& a, const HyperparameterKey& b) {
  return a.flag == b.flag && a.default_value == b.default_value && a.key.min == b.key.min && a.key.max == b.key.max &&
         a.key.min_open == b.key.min_open && a.key.max_open == b.key.max_open &&
         a.key.resume_may_change == b.key.resume_may_change;
}

// The union of the rows' keys with docs naming the optimizers; the generated docs live as long as the table.
struct HyperparameterTable {
  std::vector<HyperparameterKey> keys;
  std::deque<std::string> docs;

  HyperparameterTable() {
    // Per key, in first-declared order: each distinct doc and the optimizers that give it.
    std::vector<std::vector<std::pair<std::string, std::vector<std::string>>>> uses;
    for (const OptimizerKeyRow& row : optimizer_rows()) {
      for (const HyperparameterKey& h : row.keys) {
        size_t i = 0;
        while (i < keys.size() && std::string_view(keys[i].key.name) != h.key.name) ++i;
        if (i == keys.size()) {
          keys.push_back(h);
          uses.emplace_back();
        } else if (!same_declaration(keys[i], h)) {
          throw std::logic_error("optimizer." + std::string(h.key.name) + " is declared differently by optimizer " +
                                 std::string(row.name) + " than by another optimizer");
        }
        auto& by_doc = uses[i];
        auto it = by_doc.begin();
        while (it != by_doc.end() && it->first != h.key.doc) ++it;
        if (it == by_doc.end()) it = by_doc.insert(by_doc.end(), {h.key.doc, {}});
        it->second.emplace_back(row.name);
      }
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      std::vector<std::string> parts;
      for (const auto& [doc, names] : uses[i]) parts.push_back(join(names, ", ") + ": " + doc);
      keys[i].key.doc = docs.emplace_back(join(parts, "; ")).c_str();
    }
  }
};

const HyperparameterTable& hyperparameter_table() {
  static const HyperparameterTable table;
  return table;
}

const HyperparameterKey& declared(std::string_view key) {
  for (const HyperparameterKey& h : hyperparameter_keys())
    if (key == h.key.name) return h;
  throw std::logic_error("no optimizer declares optimizer." + std::string(key));
}

}  // namespace

const OptimizerKeyRow& optimizer_row(std::string_view name) { return row_named(optimizer_rows(), name, "optimizer"); }

std::vector<std::string> optimizer_names() { return names_in(optimizer_rows()); }

const std::vector<HyperparameterKey>& hyperparameter_keys() { return hyperparameter_table().keys; }

const char* optimizer_name_doc() {
  static const std::string doc = [] {
    std::vector<std::string> torch_names;
    for (const OptimizerKeyRow& row : optimizer_rows()) torch_names.emplace_back(row.torch_name);
    std::string last = torch_names.back();
    torch_names.pop_back();
    return torch_names.empty() ? last : join(torch_names, ", ") + " or " + last;
  }();
  return doc.c_str();
}

Hyperparameters::Hyperparameters() {
  for (const HyperparameterKey& h : hyperparameter_keys()) {
    if (h.flag)
      flags.emplace(h.key.name, h.default_value != 0);
    else
      numbers.emplace(h.key.name, h.default_value);
  }
}

double Hyperparameters::number(std::string_view key) const {
  auto it = numbers.find(key);
  if (it == numbers.end()) throw std::logic_error("optimizer." + std::string(key) + " is not a float key");
  return it->second;
}

bool Hyperparameters::flag(std::string_view key) const {
  auto it = flags.find(key);
  if (it == flags.end()) throw std::logic_error("optimizer." + std::string(key) + " is not a bool key");
  return it->second;
}

void Hyperparameters::set(std::string_view key, double value) {
  if (declared(key).flag) throw std::logic_error("optimizer." + std::string(key) + " is a bool key");
  numbers.find(key)->second = value;
}

void Hyperparameters::set(std::string_view key, bool value) {
  if (!declared(key).flag) throw std::logic_error("optimizer." + std::string(key) + " is a float key");
  flags.find(key)->second = value;
}

}  // namespace ddp
