// RowChoice: the value of a choice key whose names are rows declared above config/ (optimizer.name, model.name,
// data.dataset), kept as the name; what the config's docs and errors say of such rows.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddp {

// A rule of a row's that a config breaks: the keys it concerns (the error points at the first one the config set) and
// what to change.
struct BrokenRule {
  std::vector<std::string> keys;
  std::string message;
};

// The names of Row's rows, in the order --help lists them: each row header specialises it.
template <class Row>
std::vector<std::string> row_names();

template <class Row>
struct RowChoice {
  using RowType = Row;
  std::string name;
  bool operator==(std::string_view other) const { return name == other; }
  bool operator!=(std::string_view other) const { return name != other; }
};

// The row named `name`; throws std::logic_error for a name without one (the config refused it before).
template <class Row>
const Row& row_named(const std::vector<Row>& rows, std::string_view name, const char* kind) {
  for (const Row& row : rows)
    if (row.name == name) return row;
  throw std::logic_error("no " + std::string(kind) + " row is named \"" + std::string(name) + "\"");
}

// The names of the rows `pick` selects (every row by default), in row order.
template <class Row, class Pick>
std::vector<std::string> names_in(const std::vector<Row>& rows, Pick&& pick) {
  std::vector<std::string> out;
  for (const Row& row : rows)
    if (pick(row)) out.emplace_back(row.name);
  return out;
}
template <class Row>
std::vector<std::string> names_in(const std::vector<Row>& rows) {
  return names_in(rows, [](const Row&) { return true; });
}

// The names of the rows `pick` selects, each in double quotes, in row order.
template <class Row, class Pick>
std::vector<std::string> quoted_names(const std::vector<Row>& rows, Pick&& pick) {
  std::vector<std::string> out = names_in(rows, pick);
  for (std::string& name : out) name = "\"" + name + "\"";
  return out;
}

// For the registries above config/, whose kinds each hold a row (Kind::*row):
// the rows of `kinds`, in their order;
template <class Kind, class Row>
std::vector<Row> rows_of(const std::vector<const Kind*>& kinds, Row Kind::*row) {
  std::vector<Row> out;
  for (const Kind* kind : kinds) out.push_back(kind->*row);
  return out;
}
// the kind whose row is named `name`; throws std::invalid_argument naming `key` for a name without one.
template <class Kind, class Row>
const Kind& kind_named(const std::vector<const Kind*>& kinds, Row Kind::*row, std::string_view name, const char* key) {
  for (const Kind* kind : kinds)
    if ((kind->*row).name == name) return *kind;
  throw std::invalid_argument(std::string(key) + " \"" + std::string(name) + "\" has no row");
}

// "a", "a and b", "a, b and c" (with `last` = "and").
inline std::string spoken_list(const std::vector<std::string>& items, const std::string& last) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " " + last + " " : ", ") + items[i];
  return out;
}

// A key's doc made of its rows' docs: each distinct doc after the names that give it, in row order
// ("net: the classic MNIST CNN; resnet18, resnet34: torchvision's ResNets").
template <class Row>
std::string docs_by_name(const std::vector<Row>& rows) {
  std::vector<std::pair<std::string_view, std::string>> parts;  // doc, names
  for (const Row& row : rows) {
    size_t i = 0;
    while (i < parts.size() && parts[i].first != row.doc) ++i;
    if (i == parts.size()) parts.push_back({row.doc, ""});
    parts[i].second += (parts[i].second.empty() ? "" : ", ") + std::string(row.name);
  }
  std::string out;
  for (const auto& [doc, names] : parts) out += (out.empty() ? "" : "; ") + names + ": " + std::string(doc);
  return out;
}

}  // namespace ddp
