#include "http/v2_parse.hpp"

#include <cmath>
#include <limits>

#include "warm/model_io.hpp"

namespace warm::http {

namespace {

using json = nlohmann::json;

// A SAX handler that builds the DOM through nlohmann's own DOM builder, except for the values of
// inputs[i].data, which it turns into floats itself.
class request_sax {
 public:
  request_sax(parsed_request& out, const parse_bounds& bounds)
      : out_(out), bounds_(bounds), dom_(out.root, false) {}

  bool null() {
    return in_data() ? not_a_number("null") : other_scalar([&] { return dom_.null(); });
  }
  bool boolean(bool v) {
    if (!in_data()) return other_scalar([&] { return dom_.boolean(v); });
    if (skip_depth_ == 0 && current_) ++current_->booleans;
    return number(v ? 1.0 : 0.0);
  }
  bool number_integer(json::number_integer_t v) {
    return in_data() ? integer(v < -exact_limit || v > exact_limit, static_cast<double>(v))
                     : other_scalar([&] { return dom_.number_integer(v); });
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (in_data())
      return integer(v > static_cast<json::number_unsigned_t>(exact_limit), static_cast<double>(v));
    if (in_shape()) {
      declared().shape.push_back(v);
      return scalar([&] { return dom_.number_unsigned(v); });
    }
    return other_scalar([&] { return dom_.number_unsigned(v); });
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return in_data() ? number(v) : other_scalar([&] { return dom_.number_float(v, s); });
  }
  bool string(json::string_t& v) {
    if (in_data()) return not_a_number("string");
    if (at_input_key("datatype")) declared().datatype = v;
    return other_scalar([&] { return dom_.string(v); });
  }
  bool binary(json::binary_t& v) {
    return in_data() ? not_a_number("binary") : other_scalar([&] { return dom_.binary(v); });
  }

  bool start_object(std::size_t n) {
    if (in_data_mode() ||
        at_data()) {  // an object in data (or as data): refused, its contents skipped
      if (!in_data_mode()) {
        begin_data();
        if (!dom_.null()) return false;
      }
      not_a_number("object");
      ++skip_depth_;
      return true;
    }
    observe_value();
    if (!count()) return false;
    frames_.push_back({true, {}, 0});
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    if (in_data_mode()) return true;
    frames_.back().key = k;
    return dom_.key(k);
  }
  bool end_object() {
    if (in_data_mode()) return end_data_container();
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (in_data_mode()) {
      ++(skip_depth_ > 0 ? skip_depth_ : data_depth_);
      return true;
    }
    if (at_data()) {
      begin_data();
      data_depth_ = 1;
      return dom_.null();
    }
    const bool shape_begins = at_input_key("shape");
    observe_value();
    if (shape_begins) declared().shape_ok = true;  // so far: an array
    if (!count()) return false;
    frames_.push_back({false, {}, 0});
    return dom_.start_array(n);
  }
  bool end_array() {
    if (in_data_mode()) return end_data_container();
    if (in_shape()) declared().shape_done = true;
    frames_.pop_back();
    return dom_.end_array();
  }

  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    if (error_.empty()) error_ = std::string("request is not valid JSON: ") + e.what();
    return false;
  }

  const std::string& error() const { return error_; }

  // By input: the first key it holds more than once.
  std::vector<std::string> repeated() const {
    std::vector<std::string> out;
    for (const auto& d : declared_)
      out.push_back(d.datatype_seen > 1 ? "datatype"
                    : d.shape_seen > 1  ? "shape"
                    : d.data_seen > 1   ? "data"
                                        : "");
    return out;
  }

 private:
  // What an input declared before its data, as far as the parse has come.
  struct declaration {
    std::string datatype;
    std::vector<std::uint64_t> shape;
    bool shape_ok = false;    // "shape" is an array of non-negative integers so far
    bool shape_done = false;  // and it has ended
    int datatype_seen = 0, shape_seen = 0, data_seen = 0;
  };

  struct frame {
    bool object;
    std::string key;    // an object's current key
    std::size_t index;  // an array's elements begun so far
  };

  // Whether the value beginning now is an input's "data": root{"inputs": [ {"data": HERE} ]}.
  bool at_data() const {
    return frames_.size() == 3 && frames_[0].object && frames_[0].key == "inputs" &&
           !frames_[1].object && frames_[2].object && frames_[2].key == "data";
  }
  // Whether the value beginning now is inputs[i][key].
  bool at_input_key(const char* key) const {
    return frames_.size() == 3 && frames_[0].object && frames_[0].key == "inputs" &&
           !frames_[1].object && frames_[2].object && frames_[2].key == key;
  }
  // Whether the value beginning now is an element of inputs[i]["shape"].
  bool in_shape() const {
    return frames_.size() == 4 && frames_[0].object && frames_[0].key == "inputs" &&
           !frames_[1].object && frames_[2].object && frames_[2].key == "shape" &&
           !frames_[3].object;
  }
  declaration& declared() {
    std::size_t input = frames_[1].index - 1;
    if (declared_.size() <= input) declared_.resize(input + 1);
    return declared_[input];
  }
  // A value outside data begins: counts an input's "datatype" and "shape", and spoils a shape that
  // holds anything but non-negative integers (number_unsigned adds those).
  void observe_value() {
    if (at_input_key("datatype")) ++declared().datatype_seen;
    if (at_input_key("shape")) {
      auto& d = declared();
      ++d.shape_seen;
      d.shape.clear();
      d.shape_ok = d.shape_done = false;
    }
    if (in_shape()) declared().shape_ok = false;
  }
  template <class F>
  bool other_scalar(F add) {
    observe_value();
    return scalar(add);
  }
  bool in_data_mode() const { return data_depth_ > 0 || skip_depth_ > 0; }
  bool end_data_container() {
    --(skip_depth_ > 0 ? skip_depth_ : data_depth_);
    if (!in_data_mode()) current_ = nullptr;
    return true;
  }
  // Whether a scalar beginning now belongs to an input's data.
  bool in_data() {
    if (in_data_mode()) return true;
    if (!at_data()) return false;
    begin_data();  // a scalar "data": one element
    scalar_data_ = true;
    return true;
  }

  void begin_data() {
    std::size_t input = frames_[1].index - 1;
    if (out_.data.size() <= input) out_.data.resize(input + 1);
    current_ = &out_.data[input];
    *current_ = data_values{};
    current_->present = true;
    auto& d = declared();
    ++d.data_seen;
    if (d.datatype_seen != 1 || d.shape_seen != 1 || !d.shape_ok || !d.shape_done) return;
    auto type = parse_v2_dtype(d.datatype);
    if (!type || dtype_size(*type) == 0) return;
    // The shape's count, as decode_input computes it; past max_tensor_bytes nothing is kept (the
    // shape is refused).
    const std::uint64_t max_count = bounds_.max_tensor_bytes / dtype_size(*type);
    std::uint64_t count = 1;
    for (auto dim : d.shape) {
      if (dim != 0 && count > max_count / dim) {
        count = 0;
        break;
      }
      count *= dim;
    }
    current_->type = type;
    current_->expected = count;
    // Room for the first elements at once; a body that holds fewer costs no more than it holds.
    current_->bytes.reserve(std::min<std::uint64_t>(count * dtype_size(*type), 1 << 20));
  }

  // The end of a scalar "data" value: the DOM gets null in its place.
  bool end_scalar_data() {
    if (!scalar_data_) return true;
    scalar_data_ = false;
    current_ = nullptr;
    return dom_.null();
  }

  // Integers beyond 2^53 are rounded by a double.
  static constexpr std::int64_t exact_limit = std::int64_t{1} << 53;

  bool integer(bool inexact, double v) {
    if (inexact && skip_depth_ == 0 && current_ && current_->inexact < 0)
      current_->inexact = static_cast<std::int64_t>(current_->count);
    return number(v);
  }
  bool number(double v) {
    if (skip_depth_ > 0) return true;
    auto& d = *current_;
    if (d.type) {
      if (d.count < d.expected && d.fault == element_fault::none) {
        const std::size_t size = dtype_size(*d.type), at = d.bytes.size();
        d.bytes.resize(at + size);
        if (auto fault = put_element(v, *d.type, d.bytes.data() + at);
            fault != element_fault::none) {
          d.fault = fault;
          d.fault_at = d.count;
          d.bytes.resize(at);
        }
      }
    } else if (d.count < bounds_.max_untyped_values) {
      d.values.push_back(v);
    }
    ++d.count;
    return end_scalar_data();
  }
  bool not_a_number(const char* type) {
    if (current_ && current_->not_a_number.empty()) current_->not_a_number = type;
    if (skip_depth_ == 0 && current_) ++current_->count;
    return end_scalar_data();
  }

  // Counts a DOM value about to begin; false (with the error) past the bound.
  bool count() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    if (++dom_values_ > bounds_.max_dom_values) {
      error_ = "request JSON holds more than " + std::to_string(bounds_.max_dom_values) +
               " values outside tensor data";
      return false;
    }
    return true;
  }
  template <class F>
  bool scalar(F add) {
    return count() && add();
  }

  parsed_request& out_;
  const parse_bounds& bounds_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  std::vector<frame> frames_;
  std::vector<declaration> declared_;  // by input index
  std::size_t dom_values_ = 0;
  data_values* current_ = nullptr;
  int data_depth_ = 0;  // containers open inside the current data, itself included
  int skip_depth_ = 0;  // objects (and what they hold) open inside data
  bool scalar_data_ = false;
  std::string error_;
};

}  // namespace

expected<parsed_request> parse_request(std::string_view body, const parse_bounds& bounds) {
  parsed_request out;
  request_sax sax(out, bounds);
  bool ok = json::sax_parse(body.begin(), body.end(), &sax, json::input_format_t::json, true);
  if (!ok || !sax.error().empty())
    return make_error(errc::invalid_argument,
                      sax.error().empty() ? "request is not valid JSON" : sax.error());
  out.repeated = sax.repeated();
  return out;
}

}  // namespace warm::http
