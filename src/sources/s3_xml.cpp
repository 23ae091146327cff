#include "sources/s3_xml.hpp"
