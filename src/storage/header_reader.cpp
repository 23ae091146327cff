#include "storage/header_reader.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

namespace warm::detail {
namespace {

using json = nlohmann::json;

// Deepest container the format needs: root object (0) > tensor object (1) > shape array (2).
constexpr int max_container_depth = 2;

std::string in_quotes(std::string_view name) {
  return "'" + std::string(name) + "'";
}

// One tensor entry as read, judged when its object closes (in the order of the checks that a
// whole entry gets: unknown fields, missing fields, dtype, shape, offsets).
struct tensor_fields {
  std::string name;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  std::optional<std::string> dtype;  // absent when the value is not a string
  bool shape_is_array = false;
  std::vector<std::uint64_t> shape;  // the dimensions before the first bad one
  bool shape_bad_entry = false;
  bool offsets_is_array = false;
  std::size_t offsets_count = 0;
  std::optional<std::uint64_t> offsets[2];
};

// Where the reader is: what the value or key it sees next belongs to.
enum class place {
  top,       // before the root value
  skipped,   // inside a root that is not an object (read to the end for its nesting, then refused)
  root,      // in the root object
  metadata,  // in __metadata__
  tensor,    // in a tensor entry
  dtype,     // in a dtype value that is a container (refused when the entry closes)
  shape,     // in a shape value (an array, or a container refused when the entry closes)
  offsets,   // in a data_offsets value
};

class reader : public nlohmann::json_sax<json> {
 public:
  std::optional<error> failure;
  header_contents out;
  bool root_is_object = false;

  bool null() override { return scalar(std::nullopt, false); }
  bool boolean(bool) override { return scalar(std::nullopt, false); }
  bool number_integer(number_integer_t v) override {
    return scalar(
        v >= 0 ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(v)) : std::nullopt, false);
  }
  bool number_unsigned(number_unsigned_t v) override { return scalar(v, false); }
  bool number_float(number_float_t, const string_t&) override {
    return scalar(std::nullopt, false);
  }
  bool binary(binary_t&) override { return scalar(std::nullopt, false); }
  bool string(string_t& s) override {
    string_ = &s;
    bool ok = scalar(std::nullopt, true);
    string_ = nullptr;
    return ok;
  }

  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    if (stack_.back() == place::root) {
      if (k == "__metadata__") {
        if (seen_metadata_) return refuse("header: duplicate key " + in_quotes(k));
        seen_metadata_ = true;
      }
      key_ = std::move(k);
      return true;
    }
    if (stack_.back() == place::metadata) {
      if (out.metadata.count(k)) return refuse("header: duplicate key " + in_quotes(k));
      if (out.metadata.size() >= max_metadata_entries)
        return refuse("__metadata__ holds more than " + std::to_string(max_metadata_entries) +
                      " entries");
      key_ = std::move(k);
      return true;
    }
    if (stack_.back() == place::tensor) {
      bool* seen = k == "dtype"          ? &fields_.has_dtype
                   : k == "shape"        ? &fields_.has_shape
                   : k == "data_offsets" ? &fields_.has_offsets
                                         : nullptr;
      if (!seen) return bad_tensor("unknown field " + in_quotes(k));
      if (*seen) return refuse("header: duplicate key " + in_quotes(k));
      *seen = true;
      key_ = std::move(k);
      return true;
    }
    return true;  // keys of a skipped root, or of a container refused when its entry closes
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    // The parser's own message quotes the bytes it last read: name only where it stopped.
    if (!failure)
      failure =
          make_error(errc::invalid_argument, "header is not valid JSON (at byte " +
                                                 std::to_string(position) + " of the header)");
    return false;
  }

 private:
  bool refuse(std::string message) {
    failure = make_error(errc::invalid_argument, std::move(message));
    return false;
  }
  bool bad_tensor(const std::string& why) {
    return refuse("tensor " + in_quotes(fields_.name) + ": " + why);
  }

  // A value that is not a container, in whatever place the reader is.
  bool scalar(std::optional<std::uint64_t> count, bool is_string) {
    switch (stack_.back()) {
      case place::top:
        stack_.push_back(place::skipped);  // a root that is a number or a string
        return true;
      case place::root:
        if (key_ == "__metadata__") return refuse("__metadata__ must be an object of strings");
        fields_.name = key_;
        return bad_tensor("entry is not an object");
      case place::metadata:
        if (!is_string)
          return refuse("__metadata__ value of " + in_quotes(key_) + " is not a string");
        out.metadata.emplace(std::move(key_), std::move(*string_));
        return true;
      case place::tensor:
        if (key_ == "dtype") {
          if (is_string) fields_.dtype = std::move(*string_);
        }  // a shape or data_offsets that is a scalar: "not an array", judged when the entry closes
        return true;
      case place::shape:
        if (!fields_.shape_is_array || fields_.shape_bad_entry) return true;
        if (!count) {
          fields_.shape_bad_entry = true;
          return true;
        }
        if (fields_.shape.size() >= max_header_rank)
          return bad_tensor("shape has more than " + std::to_string(max_header_rank) +
                            " dimensions");
        fields_.shape.push_back(*count);
        return true;
      case place::offsets:
        if (fields_.offsets_is_array && fields_.offsets_count < 2)
          fields_.offsets[fields_.offsets_count] = count;
        ++fields_.offsets_count;
        return true;
      case place::skipped:
      case place::dtype:
        return true;
    }
    return true;
  }

  bool open(bool object) {
    // stack_ holds `top` and one place per open container: the new one's depth is its size - 1.
    if (static_cast<int>(stack_.size()) - 1 > max_container_depth)
      return refuse("header: JSON nesting deeper than the format allows");
    switch (stack_.back()) {
      case place::top:
        root_is_object = object;
        stack_.push_back(object ? place::root : place::skipped);
        return true;
      case place::root:
        if (key_ == "__metadata__") {
          if (!object) return refuse("__metadata__ must be an object of strings");
          stack_.push_back(place::metadata);
          return true;
        }
        fields_ = tensor_fields{};
        fields_.name = key_;
        if (!object) return bad_tensor("entry is not an object");
        stack_.push_back(place::tensor);
        return true;
      case place::metadata:
        return refuse("__metadata__ value of " + in_quotes(key_) + " is not a string");
      case place::tensor:
        if (key_ == "shape") {
          fields_.shape_is_array = !object;
          stack_.push_back(place::shape);
        } else if (key_ == "data_offsets") {
          fields_.offsets_is_array = !object;
          stack_.push_back(place::offsets);
        } else {
          stack_.push_back(place::dtype);
        }
        return true;
      case place::skipped:
      case place::dtype:
      case place::shape:
      case place::offsets:
        stack_.push_back(stack_.back() == place::skipped ? place::skipped : place::dtype);
        return true;
    }
    return true;
  }

  bool close() {
    place closing = stack_.back();
    stack_.pop_back();
    if (closing == place::tensor) return finish_tensor();
    return true;
  }

  // The checks of a whole tensor entry, in the order parse_safetensors_header documents.
  bool finish_tensor() {
    auto& f = fields_;
    if (!f.has_dtype) return bad_tensor("missing dtype");
    if (!f.has_shape) return bad_tensor("missing shape");
    if (!f.has_offsets) return bad_tensor("missing data_offsets");
    tensor_info info;
    if (!f.dtype) return bad_tensor("dtype is not a string");
    auto type = parse_dtype(*f.dtype);
    if (!type) return bad_tensor("unknown dtype " + in_quotes(*f.dtype));
    info.dtype = *type;
    if (!f.shape_is_array) return bad_tensor("shape is not an array");
    std::uint64_t expected_bytes = dtype_size(info.dtype);
    for (auto d : f.shape)
      if (__builtin_mul_overflow(expected_bytes, d, &expected_bytes))
        return bad_tensor("shape size overflows");
    if (f.shape_bad_entry)
      return bad_tensor("shape has an entry that is not a non-negative integer");
    info.shape = std::move(f.shape);
    if (!f.offsets_is_array || f.offsets_count != 2)
      return bad_tensor("data_offsets is not [begin, end]");
    if (!f.offsets[0] || !f.offsets[1])
      return bad_tensor("data_offsets are not non-negative integers");
    if (*f.offsets[1] < *f.offsets[0]) return bad_tensor("data_offsets end before they begin");
    info.begin = *f.offsets[0];
    info.end = *f.offsets[1];
    if (info.bytes() != expected_bytes)
      return bad_tensor("shape and dtype need " + std::to_string(expected_bytes) +
                        " bytes but data_offsets span " + std::to_string(info.bytes()));
    info.name = std::move(f.name);
    out.tensors.push_back(std::move(info));
    return true;
  }

  std::vector<place> stack_{place::top};
  std::string key_;             // the key whose value comes next
  string_t* string_ = nullptr;  // the string being reported by string()
  bool seen_metadata_ = false;
  tensor_fields fields_;  // the tensor entry being read
};

}  // namespace

expected<header_contents> read_header_json(std::string_view text) {
  reader r;
  try {
    json::sax_parse(text.begin(), text.end(), &r);
  } catch (const json::exception&) {
    return make_error(errc::invalid_argument, "header is not valid JSON");
  } catch (const std::bad_alloc&) {
    return make_error(errc::invalid_argument, "header needs more memory than is available");
  }
  if (r.failure) return std::move(*r.failure);
  if (!r.root_is_object) return make_error(errc::invalid_argument, "header is not a JSON object");
  // Tensor names are the root's keys: each may appear once.
  std::vector<const tensor_info*> by_name;
  by_name.reserve(r.out.tensors.size());
  for (const auto& t : r.out.tensors)
    by_name.push_back(&t);
  std::sort(by_name.begin(), by_name.end(),
            [](const tensor_info* a, const tensor_info* b) { return a->name < b->name; });
  for (std::size_t i = 1; i < by_name.size(); ++i)
    if (by_name[i]->name == by_name[i - 1]->name)
      return make_error(errc::invalid_argument,
                        "header: duplicate key " + in_quotes(by_name[i]->name));
  return std::move(r.out);
}

}  // namespace warm::detail
