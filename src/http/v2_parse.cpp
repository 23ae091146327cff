#include "http/v2_parse.hpp"

#include <cmath>
#include <limits>

namespace warm::http {

namespace {

using json = nlohmann::json;

// A SAX handler that builds the DOM through nlohmann's own DOM builder, except for the values of
// inputs[i].data, which it turns into floats itself.
class request_sax {
 public:
  request_sax(parsed_request& out, const parse_bounds& bounds) : out_(out), bounds_(bounds), dom_(out.root, false) {}

  bool null() { return in_data() ? not_a_number("null") : scalar([&] { return dom_.null(); }); }
  bool boolean(bool v) {
    if (!in_data()) return scalar([&] { return dom_.boolean(v); });
    if (skip_depth_ == 0 && current_) ++current_->booleans;
    return number(v ? 1.0 : 0.0);
  }
  bool number_integer(json::number_integer_t v) {
    return in_data() ? integer(v < -exact_limit || v > exact_limit, static_cast<double>(v))
                     : scalar([&] { return dom_.number_integer(v); });
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return in_data() ? integer(v > static_cast<json::number_unsigned_t>(exact_limit), static_cast<double>(v))
                     : scalar([&] { return dom_.number_unsigned(v); });
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return in_data() ? number(v) : scalar([&] { return dom_.number_float(v, s); });
  }
  bool string(json::string_t& v) { return in_data() ? not_a_number("string") : scalar([&] { return dom_.string(v); }); }
  bool binary(json::binary_t& v) { return in_data() ? not_a_number("binary") : scalar([&] { return dom_.binary(v); }); }

  bool start_object(std::size_t n) {
    if (in_data_mode() || at_data()) {  // an object in data (or as data): refused, its contents skipped
      if (!in_data_mode()) {
        begin_data();
        if (!dom_.null()) return false;
      }
      not_a_number("object");
      ++skip_depth_;
      return true;
    }
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
    if (!count()) return false;
    frames_.push_back({false, {}, 0});
    return dom_.start_array(n);
  }
  bool end_array() {
    if (in_data_mode()) return end_data_container();
    frames_.pop_back();
    return dom_.end_array();
  }

  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    if (error_.empty()) error_ = std::string("request is not valid JSON: ") + e.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  struct frame {
    bool object;
    std::string key;    // an object's current key
    std::size_t index;  // an array's elements begun so far
  };

  // Whether the value beginning now is an input's "data": root{"inputs": [ {"data": HERE} ]}.
  bool at_data() const {
    return frames_.size() == 3 && frames_[0].object && frames_[0].key == "inputs" && !frames_[1].object &&
           frames_[2].object && frames_[2].key == "data";
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
    if (d.count < bounds_.max_values) d.values.push_back(v);
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
    return make_error(errc::invalid_argument, sax.error().empty() ? "request is not valid JSON" : sax.error());
  return out;
}

}  // namespace warm::http
