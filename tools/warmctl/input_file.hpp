// `infer --input FILE.json`: the input tensors a JSON document holds (docs/warmctl.md, "infer").
//
// A document is one of
//   - a nested array of numbers (`[...]` one row, `[[...], ...]` a batch): one unnamed F32
//     tensor, which the server takes as the model's single input, whatever its name;
//   - an object {"shape": [...], "data": [...]} with an optional "name" and "dtype" (warm's names,
//     F32, I64, BOOL, ..., or KServe V2's, FP32, INT64, ...; "datatype" is read as "dtype"): one
//     tensor, F32 when no dtype is given. "data" is row-major, flat or nested;
//   - {"inputs": [OBJECT, ...]}: those tensors in order (a KServe V2 request body is one).
// Values are converted as tensor_values.hpp's append_element() says.
//
// Pure functions; errors are invalid_argument naming the input and what is wrong (not_found for a
// file that cannot be read).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "warm/error.hpp"
#include "warm/model_io.hpp"

namespace warm::ctl {

// The tensors of a parsed document.
expected<std::vector<tensor>> parse_input(const nlohmann::json& doc);

// The tensors of the file at `path`; its errors start with the path.
expected<std::vector<tensor>> read_input_file(const std::string& path);

// `--batch N` on one tensor: a rank-1 tensor becomes N copies of itself as rows ([N, w]); any
// other must already hold N rows (its first dimension). `batch` 0 changes nothing.
expected<void> apply_batch(tensor& t, std::uint64_t batch);

}  // namespace warm::ctl
