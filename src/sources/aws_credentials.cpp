#include "sources/aws_credentials.hpp"
