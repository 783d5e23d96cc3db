// The config registry: parsers, lookups, defaults and the errors a bad value gives.
#include "base/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>
#include <string>

#include "../support/scoped_env.h"
#include "base/error.h"

namespace ccl {
namespace {

using ccl::test::ScopedEnv;

TEST(ConfigParse, Integers) {
  int64_t v = 0;
  EXPECT_TRUE(parse_int("0", &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(parse_int("-17", &v));
  EXPECT_EQ(v, -17);
  EXPECT_TRUE(parse_int("9223372036854775807", &v));
  EXPECT_EQ(v, INT64_MAX);
  for (const char* bad : {"", "abc", "12x", "1.5", "99999999999999999999", " "}) {
    EXPECT_FALSE(parse_int(bad, &v)) << bad;
  }
}

TEST(ConfigParse, Bytes) {
  int64_t v = 0;
  EXPECT_TRUE(parse_bytes("4096", &v));
  EXPECT_EQ(v, 4096);
  EXPECT_TRUE(parse_bytes("64K", &v));
  EXPECT_EQ(v, 64 << 10);
  EXPECT_TRUE(parse_bytes("4m", &v));
  EXPECT_EQ(v, 4 << 20);
  EXPECT_TRUE(parse_bytes("2G", &v));
  EXPECT_EQ(v, int64_t{2} << 30);
  for (const char* bad : {"", "K", "-1K", "4MB", "1T", "9999999999999G"}) {
    EXPECT_FALSE(parse_bytes(bad, &v)) << bad;
  }
}

TEST(ConfigParse, Booleans) {
  bool b = false;
  for (const char* t : {"1", "true", "TRUE", "yes", "on"}) {
    EXPECT_TRUE(parse_bool(t, &b) && b) << t;
  }
  for (const char* f : {"0", "false", "No", "off"}) {
    EXPECT_TRUE(parse_bool(f, &b) && !b) << f;
  }
  EXPECT_FALSE(parse_bool("2", &b));
  EXPECT_FALSE(parse_bool("", &b));
}

TEST(ConfigRegistry, EveryVariableIsDocumentedOnceAndItsDefaultParses) {
  std::set<std::string> names;
  for (const auto& var : config_vars()) {
    EXPECT_TRUE(names.insert(var.name).second) << var.name << " declared twice";
    EXPECT_EQ(std::string(var.name).rfind("CCL_", 0), 0u) << var.name;
    EXPECT_GT(strlen(var.doc), 10u) << var.name;
    int64_t v = 0;
    bool b = false;
    switch (var.type) {
      case ConfigType::Int:
        EXPECT_TRUE(parse_int(var.default_value, &v)) << var.name;
        break;
      case ConfigType::Bytes:
        EXPECT_TRUE(parse_bytes(var.default_value, &v)) << var.name;
        break;
      case ConfigType::Bool:
        EXPECT_TRUE(parse_bool(var.default_value, &b)) << var.name;
        break;
      case ConfigType::String:
        break;
    }
  }
}

TEST(ConfigRegistry, EnvironmentOverridesDefault) {
  unsetenv("CCL_BUFFSIZE");
  EXPECT_EQ(config_int("CCL_BUFFSIZE"), 4 << 20);
  ScopedEnv env("CCL_BUFFSIZE", "1M");
  EXPECT_EQ(config_int("CCL_BUFFSIZE"), 1 << 20);
  EXPECT_TRUE(config_is_set("CCL_BUFFSIZE"));
}

TEST(ConfigRegistry, BadValueIsInvalidUsageNamingTheVariable) {
  ScopedEnv env("CCL_TIMEOUT", "soon");
  try {
    config_int("CCL_TIMEOUT");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("CCL_TIMEOUT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("soon"), std::string::npos) << e.what();
  }
}

TEST(ConfigRegistry, BooleanVariable) {
  ScopedEnv env("CCL_SHM_DISABLE", "yes");
  EXPECT_TRUE(config_bool("CCL_SHM_DISABLE"));
}

TEST(ConfigRegistry, UnknownNameIsAnInternalError) {
  try {
    config_int("CCL_NO_SUCH_VARIABLE");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclInternalError);
  }
  EXPECT_THROW(config_int("CCL_DEBUG"), Error);  // a string is not a number
}

}  // namespace
}  // namespace ccl
