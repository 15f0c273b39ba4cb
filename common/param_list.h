// Name/value pairs in the order they were given: startup parameters, ParameterStatus values,
// carried settings.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pgwarden {

using ParamList = std::vector<std::pair<std::string, std::string>>;

}  // namespace pgwarden
