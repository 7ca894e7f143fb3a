// Strict reader for torch.save zip files: a small pickle machine for state-dict objects, storages from data/<key>.
#include "checkpoint/torch_save/pickle_reader.h"

#include "checkpoint/torch_save/zip_bounds.h"

#include <ATen/ops/empty.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

namespace ddp {
namespace {

using Error = TorchSaveFormatError;

// A Python object as far as a state dict needs: plain values, containers, a global (callable) or a storage.
// Objects live in the unpickler's arena (PyObjArena) and refer to each other by plain pointers, so freeing them is
// flat: a pickle of a million nested tuples (or a self-referencing list) cannot recurse or leak on teardown.
struct PyObj;
using Ref = PyObj*;
struct KeyHash;
struct KeyEq;
using DictIndex = std::unordered_map<const PyObj*, size_t, KeyHash, KeyEq>;  // key -> position in items
enum class Kind { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor };

struct PyObj {
  Kind kind = Kind::None;
  bool ordered_dict = false;              // a collections.OrderedDict instance (accepts BUILD of its __dict__)
  int64_t i = 0;                          // Bool, Int
  double f = 0;                           // Float
  std::string s;                          // Str; Global: "module.name"
  std::vector<Ref> items;                 // Tuple, List; Dict: key0, value0, key1, value1, ...
  std::unique_ptr<DictIndex> dict_index;  // Dict, once it has an item
  at::Tensor tensor;                      // Storage: 1-D tensor over the whole storage; Tensor
  size_t key_hash = 0;                    // Str, Int, Bool used as a dict key: hash of its value, computed once
  bool key_hashed = false;
  enum class Visit : uint8_t { No, Converting, Done } visit = Visit::No;  // Tuple, List, Dict: to_ivalue's progress
  c10::IValue converted;  // Tuple, List, Dict: the IValue once Done (shared like the Python object)
};

// Dict keys by value (Python: True == 1), hashed once per key object: a key reused through the memo costs O(1).
struct KeyHash {
  size_t operator()(const PyObj* k) const { return k->key_hash; }
};
struct KeyEq {
  bool operator()(const PyObj* a, const PyObj* b) const {
    if (a == b) return true;
    if ((a->kind == Kind::Str) != (b->kind == Kind::Str)) return false;
    return a->kind == Kind::Str ? a->s == b->s : a->i == b->i;
  }
};

// Owns every object of one unpickling; a deque keeps their addresses stable.
class PyObjArena {
 public:
  Ref make(Kind kind) {
    objects_.emplace_back();
    objects_.back().kind = kind;
    return &objects_.back();
  }

 private:
  std::deque<PyObj> objects_;
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::Str:
      return "str";
    case Kind::Tuple:
      return "tuple";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Global:
      return "global";
    case Kind::Storage:
      return "storage";
    case Kind::Tensor:
      return "tensor";
  }
  return "?";
}

std::string describe(const Ref& r) {
  return r->kind == Kind::Global ? "Python object " + r->s : std::string(kind_name(r->kind));
}

void hash_key(PyObj& k) {
  if (k.key_hashed) return;
  switch (k.kind) {
    case Kind::Str:
      k.key_hash = std::hash<std::string>{}(k.s);
      break;
    case Kind::Int:
    case Kind::Bool:
      k.key_hash = std::hash<int64_t>{}(k.i);
      break;
    default:
      throw Error("dict key of type " + describe(&k) + " is not supported (expected str or int)");
  }
  k.key_hashed = true;
}

void dict_set(PyObj& dict, const Ref& key, const Ref& value) {
  hash_key(*key);
  if (!dict.dict_index) dict.dict_index = std::make_unique<DictIndex>();
  auto [it, inserted] = dict.dict_index->emplace(key, dict.items.size());
  if (inserted) {
    dict.items.push_back(key);
    dict.items.push_back(value);
  } else {
    dict.items[it->second + 1] = value;  // Python keeps the first key object
  }
}

const std::map<std::string, at::ScalarType>& storage_dtypes() {
  static const std::map<std::string, at::ScalarType> m = {{"DoubleStorage", at::kDouble},
                                                          {"FloatStorage", at::kFloat},
                                                          {"HalfStorage", at::kHalf},
                                                          {"BFloat16Storage", at::kBFloat16},
                                                          {"LongStorage", at::kLong},
                                                          {"IntStorage", at::kInt},
                                                          {"ShortStorage", at::kShort},
                                                          {"CharStorage", at::kChar},
                                                          {"ByteStorage", at::kByte},
                                                          {"BoolStorage", at::kBool},
                                                          {"ComplexFloatStorage", at::kComplexFloat},
                                                          {"ComplexDoubleStorage", at::kComplexDouble}};
  return m;
}

std::vector<int64_t> int_tuple(const Ref& r, const char* what) {
  if (r->kind != Kind::Tuple) throw Error(std::string(what) + ": expected a tuple of ints, found " + describe(r));
  std::vector<int64_t> out;
  for (const Ref& x : r->items) {
    if (x->kind != Kind::Int) throw Error(std::string(what) + ": expected ints, found " + describe(x));
    out.push_back(x->i);
  }
  return out;
}

// torch._utils._rebuild_tensor: storage.set_(storage, offset, size, stride), bounds checked without overflow;
// a view may not hold more elements than its storage (an expanded or overlapping view could make a few bytes
// stand for terabytes once copied).
Ref rebuild_tensor(PyObjArena& arena, const std::vector<Ref>& args) {
  if (args[0]->kind != Kind::Storage) throw Error("_rebuild_tensor: expected a storage, found " + describe(args[0]));
  if (args[1]->kind != Kind::Int) throw Error("_rebuild_tensor: expected an int offset, found " + describe(args[1]));
  const at::Tensor& storage = args[0]->tensor;
  const int64_t offset = args[1]->i;
  const std::vector<int64_t> size = int_tuple(args[2], "_rebuild_tensor size");
  const std::vector<int64_t> stride = int_tuple(args[3], "_rebuild_tensor stride");
  if (size.size() != stride.size()) throw Error("_rebuild_tensor: size and stride have different lengths");
  if (size.size() > 64) throw Error("_rebuild_tensor: " + std::to_string(size.size()) + " dimensions (at most 64)");
  const int64_t storage_numel = storage.numel();
  const std::string past = "_rebuild_tensor: view (offset " + std::to_string(offset) +
                           ") reaches past its storage of " + std::to_string(storage_numel) + " elements";
  if (offset < 0 || offset > storage_numel) throw Error(past);
  int64_t last = offset, numel = 1;
  bool empty = false;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0 || stride[d] < 0) throw Error("_rebuild_tensor: negative size or stride");
    empty = empty || size[d] == 0;
  }
  for (size_t d = 0; d < size.size() && !empty; ++d) {
    int64_t extent = 0;
    if (__builtin_mul_overflow(size[d] - 1, stride[d], &extent) || __builtin_add_overflow(last, extent, &last) ||
        __builtin_mul_overflow(numel, size[d], &numel) || last >= storage_numel)
      throw Error(past);
  }
  if (empty) numel = 0;
  if (numel > storage_numel)
    throw Error("_rebuild_tensor: view of " + std::to_string(numel) + " elements over a storage of " +
                std::to_string(storage_numel) + " (expanded or overlapping views are not supported)");
  auto r = arena.make(Kind::Tensor);
  r->tensor = storage.as_strided(size, stride, offset);
  return r;
}

class StateDictUnpickler {
 public:
  using StorageLoader = std::function<at::Tensor(const std::string& key, at::ScalarType dtype, int64_t numel)>;
  StateDictUnpickler(const std::string& data, StorageLoader load) : data_(data), load_storage_(std::move(load)) {
    none_ = arena_.make(Kind::None);
    empty_tuple_ = arena_.make(Kind::Tuple);
  }

  // The unpickled object; it and everything it holds live as long as this unpickler.
  Ref run() {
    while (true) {
      const size_t at = pos_;
      const uint8_t op = u8();
      if (op == '.') break;
      try {
        step(op);
      } catch (const Error& e) {
        throw Error("data.pkl offset " + std::to_string(at) + ": " + e.what());
      }
    }
    if (stack_.size() != 1 || !marks_.empty()) throw Error("data.pkl: malformed pickle (stack not balanced at STOP)");
    return stack_.back();
  }

 private:
  const std::string& data_;
  StorageLoader load_storage_;
  PyObjArena arena_;        // declared before everything that points into it
  Ref none_, empty_tuple_;  // shared like Python's: the cheapest opcodes allocate nothing
  size_t pos_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::map<std::string, at::Tensor> storages_;

  void need(size_t n) {
    if (n > data_.size() - pos_) throw Error("truncated pickle data");
  }
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint64_t le(size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  std::string bytes(uint64_t n) {
    if (n > data_.size() - pos_) throw Error("truncated pickle data");
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) throw Error("truncated pickle data");
    std::string s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  Ref pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      throw Error("malformed pickle (pop from an empty stack)");
    Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  std::vector<Ref> pop_mark() {
    if (marks_.empty()) throw Error("malformed pickle (no MARK)");
    std::vector<Ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Ref& top() {
    if (stack_.empty()) throw Error("malformed pickle (empty stack)");
    return stack_.back();
  }
  void push_int(int64_t v) {
    auto r = arena_.make(Kind::Int);
    r->i = v;
    stack_.push_back(r);
  }
  void push_str(std::string s) {
    auto r = arena_.make(Kind::Str);
    r->s = std::move(s);
    stack_.push_back(r);
  }
  void push_global(const std::string& module, const std::string& name) {
    auto r = arena_.make(Kind::Global);
    r->s = module + "." + name;
    stack_.push_back(r);
  }
  void push_tuple(std::vector<Ref> items) {
    if (items.empty()) {
      stack_.push_back(empty_tuple_);
      return;
    }
    auto r = arena_.make(Kind::Tuple);
    r->items = std::move(items);
    stack_.push_back(r);
  }
  void memo_get(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) throw Error("malformed pickle (memo " + std::to_string(id) + " unset)");
    stack_.push_back(it->second);
  }
  void set_items(const Ref& dict, const std::vector<Ref>& kv) {
    if (dict->kind != Kind::Dict) throw Error("SETITEM on a " + describe(dict));
    if (kv.size() % 2) throw Error("malformed pickle (odd SETITEMS)");
    for (size_t k = 0; k < kv.size(); k += 2) dict_set(*dict, kv[k], kv[k + 1]);
  }
  void append(const Ref& list, const std::vector<Ref>& xs) {
    if (list->kind != Kind::List) throw Error("APPEND on a " + describe(list));
    list->items.insert(list->items.end(), xs.begin(), xs.end());
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t p = u8();
        if (p < 2 || p > 5) throw Error("pickle protocol " + std::to_string(p) + " not supported");
        break;
      }
      case 0x95:
        le(8);
        break;  // FRAME: a length hint only
      case 'c': {
        std::string module = line();
        push_global(module, line());
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        Ref name = pop(), module = pop();
        if (name->kind != Kind::Str || module->kind != Kind::Str) throw Error("STACK_GLOBAL needs two strings");
        push_global(module->s, name->s);
        break;
      }
      case 'q':
        memo_[u8()] = top();
        break;
      case 'r':
        memo_[le(4)] = top();
        break;
      case 0x94:
        memo_[memo_.size()] = top();
        break;  // MEMOIZE
      case 'h':
        memo_get(u8());
        break;
      case 'j':
        memo_get(le(4));
        break;
      case '}':
        stack_.push_back(arena_.make(Kind::Dict));
        break;
      case ']':
        stack_.push_back(arena_.make(Kind::List));
        break;
      case ')':
        push_tuple({});
        break;
      case '(':
        marks_.push_back(stack_.size());
        break;
      case 't':
        push_tuple(pop_mark());
        break;
      case 0x85: {
        Ref a = pop();
        push_tuple({a});
        break;
      }
      case 0x86: {
        Ref b = pop(), a = pop();
        push_tuple({a, b});
        break;
      }
      case 0x87: {
        Ref c = pop(), b = pop(), a = pop();
        push_tuple({a, b, c});
        break;
      }
      case 'X':
        push_str(bytes(le(4)));
        break;
      case 0x8c:
        push_str(bytes(u8()));
        break;
      case 0x8d:
        push_str(bytes(le(8)));
        break;
      case 'K':
        push_int(u8());
        break;
      case 'M':
        push_int(static_cast<int64_t>(le(2)));
        break;
      case 'J':
        push_int(static_cast<int32_t>(static_cast<uint32_t>(le(4))));
        break;
      case 0x8a: {  // LONG1: little-endian two's complement
        uint8_t n = u8();
        if (n > 8) throw Error("integer wider than 64 bits");
        uint64_t v = n ? le(n) : 0;
        if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        push_int(static_cast<int64_t>(v));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        need(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(data_[pos_ + k]);
        pos_ += 8;
        auto r = arena_.make(Kind::Float);
        std::memcpy(&r->f, &bits, sizeof bits);
        stack_.push_back(r);
        break;
      }
      case 0x88:
      case 0x89: {
        auto r = arena_.make(Kind::Bool);
        r->i = op == 0x88;
        stack_.push_back(r);
        break;
      }
      case 'N':
        stack_.push_back(none_);
        break;
      case 's': {
        Ref v = pop(), k = pop();
        set_items(top(), {k, v});
        break;
      }
      case 'u': {
        std::vector<Ref> kv = pop_mark();
        set_items(top(), kv);
        break;
      }
      case 'a': {
        Ref v = pop();
        append(top(), {v});
        break;
      }
      case 'e': {
        std::vector<Ref> xs = pop_mark();
        append(top(), xs);
        break;
      }
      case 'R': {
        Ref args = pop(), callable = pop();
        stack_.push_back(call(callable, args));
        break;
      }
      case 'b': {  // BUILD: only OrderedDict's {'_metadata': ...} attribute dict, which a state dict can drop
        Ref state = pop();
        if (!top()->ordered_dict || state->kind != Kind::Dict)
          throw Error("BUILD of " + describe(top()) + " with " + describe(state) + " is not supported");
        break;
      }
      case 'Q':
        stack_.push_back(persistent_load(pop()));
        break;
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args), a class instance such as a whole nn.Module
        pop();
        throw Error("unsupported " + describe(pop()) + " (a pickled class instance, e.g. a whole nn.Module)");
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        throw Error(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }

  Ref call(const Ref& callable, const Ref& args_tuple) {
    if (callable->kind != Kind::Global) throw Error("cannot call a " + describe(callable));
    if (args_tuple->kind != Kind::Tuple) throw Error("call arguments are a " + describe(args_tuple));
    const std::string& fn = callable->s;
    const std::vector<Ref>& args = args_tuple->items;
    auto arity = [&](size_t lo, size_t hi) {
      if (args.size() < lo || args.size() > hi)
        throw Error(fn + ": expected " + std::to_string(lo) + " arguments, found " + std::to_string(args.size()));
    };
    if (fn == "collections.OrderedDict") {
      arity(0, 0);
      auto d = arena_.make(Kind::Dict);
      d->ordered_dict = true;
      return d;
    }
    if (fn == "torch._utils._rebuild_tensor_v2") {
      arity(6, 7);  // (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
      return rebuild_tensor(arena_, args);
    }
    if (fn == "torch._utils._rebuild_tensor") {
      arity(4, 4);
      return rebuild_tensor(arena_, args);
    }
    if (fn == "torch._utils._rebuild_parameter") {  // nn.Parameter(data, requires_grad): the data is what we keep
      arity(3, 3);
      if (args[0]->kind != Kind::Tensor) throw Error(fn + ": expected a tensor, found " + describe(args[0]));
      return args[0];
    }
    if (fn == "torch.jit._pickle.restore_type_tag") {  // torch::pickle_save's typed containers
      arity(2, 2);
      return args[0];
    }
    if (fn == "torch.jit._pickle.build_tensorlist" || fn == "torch.jit._pickle.build_intlist" ||
        fn == "torch.jit._pickle.build_doublelist" || fn == "torch.jit._pickle.build_boollist") {
      arity(1, 1);  // torch::pickle_save's specialised lists: the list itself
      if (args[0]->kind != Kind::List) throw Error(fn + ": expected a list, found " + describe(args[0]));
      return args[0];
    }
    throw Error("unsupported Python object " + fn +
                " (only tensors, dicts, lists, tuples and plain values can be read)");
  }

  Ref persistent_load(const Ref& pid) {
    const auto& t = pid->items;
    if (pid->kind != Kind::Tuple || t.size() != 5 || t[0]->kind != Kind::Str || t[0]->s != "storage" ||
        t[1]->kind != Kind::Global || t[2]->kind != Kind::Str || t[3]->kind != Kind::Str || t[4]->kind != Kind::Int)
      throw Error("persistent id is not ('storage', type, key, location, numel)");
    const std::string& type = t[1]->s;
    const size_t dot = type.rfind('.');
    const std::string module = type.substr(0, dot), cls = type.substr(dot + 1);
    auto it = storage_dtypes().find(cls);
    if ((module != "torch" && module != "torch.cuda") || it == storage_dtypes().end())
      throw Error("unsupported storage type " + type);
    auto cached = storages_.find(t[2]->s);
    if (cached == storages_.end())
      cached = storages_.emplace(t[2]->s, load_storage_(t[2]->s, it->second, t[4]->i)).first;
    if (cached->second.scalar_type() != it->second) throw Error("storage " + t[2]->s + " is used with two dtypes");
    auto r = arena_.make(Kind::Storage);
    r->tensor = cached->second;
    return r;
  }
};

// Containers nested deeper than this are refused: real state dicts nest a handful of levels, and the IValue
// built (and later freed) recursively stays far from any stack limit.
constexpr int kMaxNesting = 1000;

// The IValue of an unpickled object. Each container is converted once and then shared, as the pickle shared it
// (a memo-built DAG of 2^64 paths costs its size, not its paths); a container holding itself is refused.
c10::IValue to_ivalue(const Ref& r, int depth = 0) {
  switch (r->kind) {
    case Kind::None:
      return c10::IValue();
    case Kind::Bool:
      return c10::IValue(r->i != 0);
    case Kind::Int:
      return c10::IValue(r->i);
    case Kind::Float:
      return c10::IValue(r->f);
    case Kind::Str:
      return c10::IValue(r->s);
    case Kind::Tensor:
      return c10::IValue(r->tensor);
    case Kind::Tuple:
    case Kind::List:
    case Kind::Dict:
      break;
    case Kind::Global:
    case Kind::Storage:
      throw Error("unsupported " + describe(r) + " in the file");
  }
  if (r->visit == PyObj::Visit::Done) return r->converted;
  if (r->visit == PyObj::Visit::Converting) throw Error("a " + describe(r) + " contains itself");
  if (depth >= kMaxNesting) throw Error("containers nested more than " + std::to_string(kMaxNesting) + " levels deep");
  r->visit = PyObj::Visit::Converting;
  c10::IValue out;
  if (r->kind == Kind::Tuple) {
    std::vector<c10::IValue> xs;
    xs.reserve(r->items.size());
    for (const Ref& x : r->items) xs.push_back(to_ivalue(x, depth + 1));
    out = c10::ivalue::Tuple::create(std::move(xs));
  } else if (r->kind == Kind::List) {
    c10::impl::GenericList list(c10::AnyType::get());
    list.reserve(r->items.size());
    for (const Ref& x : r->items) list.push_back(to_ivalue(x, depth + 1));
    out = list;
  } else {
    bool str_keys = true, tensor_values = true;
    for (size_t k = 0; k < r->items.size(); k += 2) {
      str_keys = str_keys && r->items[k]->kind == Kind::Str;
      tensor_values = tensor_values && r->items[k + 1]->kind == Kind::Tensor;
    }
    const c10::TypePtr any = c10::AnyType::get();
    const c10::TypePtr key_type = str_keys ? c10::TypePtr(c10::StringType::get()) : any;
    const c10::TypePtr value_type = tensor_values ? c10::TypePtr(c10::TensorType::get()) : any;
    c10::impl::GenericDict dict(key_type, value_type);
    for (size_t k = 0; k < r->items.size(); k += 2)
      dict.insert_or_assign(to_ivalue(r->items[k], depth + 1), to_ivalue(r->items[k + 1], depth + 1));
    out = dict;
  }
  r->converted = out;
  r->visit = PyObj::Visit::Done;
  return out;
}

// Zip bytes for PyTorchStreamReader; reads past the end come back short instead of overrunning.
class BoundedMemoryAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedMemoryAdapter(const std::vector<char>& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* what = "") const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    if (n == 0) return 0;  // an empty record's buffer may be null, which memcpy may not be given
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::vector<char>& bytes_;
};

std::string record_text(caffe2::serialize::PyTorchStreamReader& zip, const std::string& name) {
  auto [ptr, size] = zip.getRecord(name);
  return std::string(static_cast<const char*>(ptr.get()), size);
}

c10::IValue read_archive(caffe2::serialize::PyTorchStreamReader& zip) {
  if (zip.hasRecord("constants.pkl") || zip.hasRecord("bytecode.pkl"))
    throw Error("this is a TorchScript archive (torch.jit.save), not a torch.save file");
  if (!zip.hasRecord("data.pkl")) throw Error("zip archive has no data.pkl record: not written by torch.save");
  if (zip.hasRecord("byteorder") && record_text(zip, "byteorder") != "little")
    throw Error("tensors were saved big-endian; only little-endian files are supported");
  const std::string pickle = record_text(zip, "data.pkl");
  auto load_storage = [&zip](const std::string& key, at::ScalarType dtype, int64_t numel) {
    const std::string name = "data/" + key;
    if (!zip.hasRecord(name)) throw Error("storage record " + name + " is missing");
    const size_t size = zip.getRecordSize(name);  // bounded by the archive's size (check_zip_bounds)
    const size_t elem = c10::elementSize(dtype);
    if (numel < 0 || static_cast<uint64_t>(numel) > size / elem || size != static_cast<size_t>(numel) * elem)
      throw Error("storage record " + name + " holds " + std::to_string(size) + " bytes, expected " +
                  std::to_string(numel) + " x " + std::to_string(elem));
    at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(dtype));
    if (size) zip.getRecord(name, t.data_ptr(), size);  // straight into the tensor: no second copy at peak
    return t;
  };
  StateDictUnpickler unpickler(pickle, load_storage);
  return to_ivalue(unpickler.run());
}

}  // namespace

c10::IValue read_torch_save(const std::vector<char>& bytes) {
  if (bytes.empty()) throw Error("the file is empty");
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "PK\x03\x04", 4) != 0) {
    if (static_cast<uint8_t>(bytes[0]) == 0x80)
      throw Error("legacy non-zip torch.save format (_use_new_zipfile_serialization=False) is not supported");
    throw Error("not a zip archive, so not a file written by torch.save");
  }
  check_zip_bounds(bytes.data(), bytes.size());  // before PyTorchStreamReader allocates any declared size
  try {
    caffe2::serialize::PyTorchStreamReader zip(std::make_shared<BoundedMemoryAdapter>(bytes));
    return read_archive(zip);
  } catch (const c10::Error& e) {
    throw Error(std::string("corrupt or truncated torch.save archive: ") + e.what_without_backtrace());
  }
}

}  // namespace ddp
