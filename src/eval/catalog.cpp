#include "eval/catalog.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <unordered_map>

#include "eval/support.hpp"

namespace warm::eval {

namespace {

constexpr const char* catalog_header = "model_id,size_bytes,load_ms";

// Why `e` is not a valid entry, or empty when it is.
std::string entry_problem(const catalog_entry& e) {
  if (!detail::valid_csv_id(e.model))
    return "model_id '" + e.model +
           "' must be non-empty, without commas, line breaks or surrounding blanks";
  if (e.bytes == 0) return "size_bytes of " + e.model + " must be positive";
  if (!std::isfinite(e.load_ms) || e.load_ms < 0)
    return "load_ms of " + e.model + " must be a finite number >= 0, got " +
           detail::format_double(e.load_ms);
  return {};
}

}  // namespace

expected<catalog> read_catalog(const std::string& path) {
  auto reader = detail::line_reader::open(path);
  if (!reader) return std::move(reader).error();
  std::string line;
  if (!reader->next(line))
    return make_error(errc::invalid_argument,
                      path + " is empty (expected the header " + catalog_header + ")");
  {
    auto header = detail::split_fields(line);
    if (header.size() != 3 || header[0] != "model_id" || header[1] != "size_bytes" ||
        header[2] != "load_ms")
      return reader->bad_line(std::string("the header must be ") + catalog_header + ", got '" +
                              line + "'");
  }
  catalog out;
  std::unordered_map<std::string, std::size_t> first_line;  // id → line of its first row
  while (reader->next(line)) {
    if (detail::trim(line).empty()) continue;
    auto fields = detail::split_fields(line);
    if (fields.size() != 3)
      return reader->bad_line("expected 3 fields (model_id,size_bytes,load_ms), got " +
                              std::to_string(fields.size()));
    catalog_entry e;
    e.model = std::string(fields[0]);
    if (e.model.empty()) return reader->bad_line("model_id is empty");
    auto bytes = detail::parse_u64(fields[1]);
    if (!bytes || *bytes == 0)
      return reader->bad_line("size_bytes must be a positive integer, got '" +
                              std::string(fields[1]) + "'");
    e.bytes = *bytes;
    auto load = detail::parse_finite(fields[2]);
    if (!load || *load < 0)
      return reader->bad_line("load_ms must be a finite number >= 0, got '" +
                              std::string(fields[2]) + "'");
    e.load_ms = *load;
    auto [it, inserted] = first_line.emplace(e.model, reader->line_number());
    if (!inserted)
      return reader->bad_line("duplicate model_id '" + e.model + "' (first on line " +
                              std::to_string(it->second) + ")");
    out.push_back(std::move(e));
  }
  if (reader->failed()) return make_error(errc::load_failed, "cannot read " + path);
  if (out.empty()) return make_error(errc::invalid_argument, "catalog " + path + " has no models");
  return out;
}

expected<void> validate_catalog(const catalog& c) {
  if (c.empty()) return make_error(errc::invalid_argument, "the catalog has no models");
  std::unordered_map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < c.size(); ++i) {
    auto problem = entry_problem(c[i]);
    if (!problem.empty())
      return make_error(errc::invalid_argument,
                        "catalog entry " + std::to_string(i) + ": " + problem);
    auto [it, inserted] = seen.emplace(c[i].model, i);
    if (!inserted)
      return make_error(errc::invalid_argument, "catalog entries " + std::to_string(it->second) +
                                                    " and " + std::to_string(i) +
                                                    " have the same model_id '" + c[i].model + "'");
  }
  return {};
}

expected<void> write_catalog(const std::string& path, const catalog& c) {
  if (auto valid = validate_catalog(c); !valid) return valid;
  std::string text = std::string(catalog_header) + "\n";
  for (const auto& e : c)
    text += e.model + "," + std::to_string(e.bytes) + "," + detail::format_double(e.load_ms) + "\n";
  return detail::write_text_file(path, text);
}

std::uint64_t total_bytes(const catalog& c) {
  std::uint64_t sum = 0;
  for (const auto& e : c)
    sum += e.bytes;
  return sum;
}

std::string synthetic_model_id(std::size_t index, std::size_t models) {
  std::size_t width = 3;
  for (std::size_t last = models > 0 ? models - 1 : 0, limit = 1000; last >= limit && width < 20;
       limit *= 10)
    ++width;
  auto digits = std::to_string(index);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return "m" + digits;
}

catalog make_catalog(std::size_t models, std::uint64_t min_size, std::uint64_t max_size,
                     std::uint64_t seed) {
  assert(min_size >= 1 && min_size <= max_size);
  min_size = std::max<std::uint64_t>(min_size, 1);  // keep release builds defined
  max_size = std::max(max_size, min_size);
  detail::random_stream rng(seed, /*stream=*/0x636174616c6f67);  // "catalog"
  double lo = std::log(static_cast<double>(min_size)), hi = std::log(static_cast<double>(max_size));
  catalog out;
  out.reserve(models);
  for (std::size_t i = 0; i < models; ++i) {
    double size = std::round(std::exp(lo + rng.uniform() * (hi - lo)));
    auto bytes = std::clamp(static_cast<std::uint64_t>(size), min_size, max_size);
    out.push_back({synthetic_model_id(i, models), bytes, fitted_load_ms(bytes)});
  }
  return out;
}

double fitted_load_ms(std::uint64_t bytes) {
  return fit_intercept_ms + fit_slope_ms_per_mb * (static_cast<double>(bytes) / 1e6);
}

catalog mcache7_catalog() {
  // Parameter counts (docs/eval/catalog.md derives each from the model's configuration):
  // torchvision's weight metadata for the two CNNs, the Hugging Face base model for the rest.
  struct model {
    const char* id;
    std::uint64_t parameters;
  };
  static constexpr model models[] = {
      {"resnet50", 25'557'032},            // torchvision ResNet50_Weights.IMAGENET1K_V1
      {"ssd300_vgg16", 35'641'826},        // torchvision SSD300_VGG16_Weights.COCO_V1
      {"bert-base-uncased", 109'482'240},  // BertModel
      {"roberta-base", 124'645'632},       // RobertaModel
      {"xlnet-base-cased", 116'718'336},   // XLNetModel
      {"gpt2", 124'439'808},               // GPT2Model (GPT-2 small)
      {"t5-base", 222'903'552},            // T5Model (shared embedding counted once)
  };
  catalog out;
  for (const auto& m : models) {
    std::uint64_t bytes = 4 * m.parameters;  // fp32
    out.push_back({m.id, bytes, fitted_load_ms(bytes)});
  }
  return out;
}

}  // namespace warm::eval
