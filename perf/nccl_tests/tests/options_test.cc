#include "options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "datatype.h"

namespace ccl::perf {
namespace {

ParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "all_reduce_perf");
  return parse_options(args);
}

TEST(Options, DefaultsAreNcclTests) {
  const ParseResult r = parse({});
  ASSERT_EQ(r.error, "");
  const Options& o = r.options;
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.step_bytes, 1u << 20);
  EXPECT_EQ(o.step_factor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup_iters, 1);
  EXPECT_EQ(o.agg_iters, 1);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.ops, std::vector<cclRedOp_t>{cclSum});
  EXPECT_EQ(o.types, std::vector<cclDataType_t>{cclFloat32});
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.blocking, 0);
  EXPECT_EQ(o.average, Average::Mean);
  EXPECT_TRUE(o.json_path.empty());
  EXPECT_TRUE(r.notes.empty());
}

TEST(Options, TheUsualCommandLine) {
  const ParseResult r = parse({"-b", "8", "-e", "64M", "-f", "2",        "-c", "1", "-n", "50",
                               "-w", "3", "-o", "max", "-d", "bfloat16", "-z", "1", "-a", "3",
                               "-m", "4", "-T", "30",  "-C", "1",        "-N", "2", "-y", "1"});
  ASSERT_EQ(r.error, "");
  const Options& o = r.options;
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 64u << 20);
  EXPECT_EQ(o.step_factor, 2u);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.iters, 50);
  EXPECT_EQ(o.warmup_iters, 3);
  EXPECT_EQ(o.ops, std::vector<cclRedOp_t>{cclMax});
  EXPECT_EQ(o.types, std::vector<cclDataType_t>{cclBfloat16});
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.average, Average::Max);
  EXPECT_EQ(o.agg_iters, 4);
  EXPECT_EQ(o.timeout_s, 30);
  EXPECT_EQ(o.report_cputime, 1);
  EXPECT_EQ(o.run_cycles, 2);
  EXPECT_EQ(o.stream_null, 1);
}

TEST(Options, LongNamesAttachedValuesAndJson) {
  const ParseResult r =
      parse({"--minbytes=1K", "--maxbytes", "1G", "-i4096", "--op", "avg", "--datatype=half",
             "--json", "out.json", "--root", "3", "--iters=7"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.min_bytes, 1024u);
  EXPECT_EQ(r.options.max_bytes, size_t{1} << 30);
  EXPECT_EQ(r.options.step_bytes, 4096u);
  EXPECT_EQ(r.options.ops, std::vector<cclRedOp_t>{cclAvg});
  EXPECT_EQ(r.options.types, std::vector<cclDataType_t>{cclFloat16});
  EXPECT_EQ(r.options.json_path, "out.json");
  EXPECT_EQ(r.options.root, 3);
  EXPECT_EQ(r.options.iters, 7);
  EXPECT_EQ(parse({"--json=x.json"}).options.json_path, "x.json");
}

TEST(Options, MemoryIsHostUnlessDeviceIsAsked) {
  EXPECT_FALSE(parse({}).options.device_memory);
  EXPECT_FALSE(parse({"--memory", "host"}).options.device_memory);
  EXPECT_TRUE(parse({"--memory=device"}).options.device_memory);
  const ParseResult bad = parse({"--memory", "gpu"});
  EXPECT_NE(bad.error.find("--memory must be host or device"), std::string::npos) << bad.error;
  EXPECT_NE(parse({"--memory"}).error, "");
}

TEST(Options, SizeSyntax) {
  EXPECT_EQ(parse_size("8"), 8.0);
  EXPECT_EQ(parse_size("64K"), 65536.0);
  EXPECT_EQ(parse_size("64k"), 65536.0);
  EXPECT_EQ(parse_size("1.5M"), 1.5 * 1024 * 1024);
  EXPECT_EQ(parse_size("2 G"), 2.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_size("0"), 0.0);
  EXPECT_LT(parse_size(""), 0);
  EXPECT_LT(parse_size("abc"), 0);
  EXPECT_LT(parse_size("8B"), 0);
  EXPECT_LT(parse_size("8MB"), 0);
  EXPECT_LT(parse_size("-8"), 0);
  EXPECT_NE(parse({"-b", "8X"}).error.find("minbytes"), std::string::npos);
}

TEST(Options, AllTypesOpsAndRoots) {
  const ParseResult r = parse({"-d", "all", "-o", "all", "-r", "all"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.types.size(), 12u);
  EXPECT_EQ(r.options.types.front(), cclInt8);
  EXPECT_EQ(r.options.types.back(), cclFloat8e5m2);
  EXPECT_EQ(r.options.ops, (std::vector<cclRedOp_t>{cclSum, cclProd, cclMax, cclMin, cclAvg}));
  EXPECT_EQ(r.options.root, -1);
  EXPECT_EQ(parse({"-r", "-1"}).options.root, -1);
}

TEST(Options, TypeNamesAndAliases) {
  const std::pair<const char*, cclDataType_t> cases[] = {
      {"int8", cclInt8},         {"char", cclInt8},         {"uint8", cclUint8},
      {"int32", cclInt32},       {"int", cclInt32},         {"uint32", cclUint32},
      {"int64", cclInt64},       {"uint64", cclUint64},     {"half", cclFloat16},
      {"fp16", cclFloat16},      {"float16", cclFloat16},   {"float", cclFloat32},
      {"fp32", cclFloat32},      {"double", cclFloat64},    {"fp64", cclFloat64},
      {"bfloat16", cclBfloat16}, {"bf16", cclBfloat16},     {"f8e4m3", cclFloat8e4m3},
      {"e4m3", cclFloat8e4m3},   {"f8e5m2", cclFloat8e5m2}, {"fp8_e5m2", cclFloat8e5m2},
  };
  for (const auto& [name, type] : cases) {
    const ParseResult r = parse({"-d", name});
    ASSERT_EQ(r.error, "") << name;
    EXPECT_EQ(r.options.types, std::vector<cclDataType_t>{type}) << name;
  }
  EXPECT_STREQ(type_info(cclFloat16).name, "half");
  EXPECT_STREQ(type_info(cclFloat8e4m3).name, "f8e4m3");
}

TEST(Options, Errors) {
  EXPECT_NE(parse({"-t", "2"}).error, "");  // host: one thread per process
  EXPECT_NE(parse({"-g", "2"}).error, "");  // host: one device per thread
  EXPECT_EQ(parse({"-t", "1", "-g", "1"}).error, "");
  EXPECT_NE(parse({"-b", "1M", "-e", "1K"}).error.find("invalid sizes"), std::string::npos);
  EXPECT_NE(parse({"-d", "float128"}).error.find("invalid type"), std::string::npos);
  EXPECT_NE(parse({"-o", "xor"}).error.find("invalid op"), std::string::npos);
  EXPECT_NE(parse({"-o", "mulsum"}).error.find("mulsum"), std::string::npos);
  EXPECT_NE(parse({"-q", "1"}).error.find("invalid option"), std::string::npos);
  EXPECT_NE(parse({"--bogus"}).error.find("invalid option"), std::string::npos);
  EXPECT_NE(parse({"-n"}).error.find("requires a value"), std::string::npos);
  EXPECT_NE(parse({"-n", "0"}).error, "");
  EXPECT_NE(parse({"-n", "ten"}).error, "");
  EXPECT_NE(parse({"-a", "4"}).error, "");
  EXPECT_NE(parse({"-z", "3"}).error, "");
  EXPECT_NE(parse({"stray"}).error, "");
  EXPECT_NE(parse({"-b", "0", "-e", "8", "-f", "2"}).error, "");  // 0 * 2 never ends
  EXPECT_NE(parse({"-b", "0", "-e", "8", "-i", "0"}).error, "");
  EXPECT_EQ(parse({"-b", "8", "-e", "8", "-i", "0"}).error, "");  // one size: fine
}

TEST(Options, AcceptedButIgnoredFlagsLeaveANote) {
  ParseResult r = parse({"-G", "4"});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.cuda_graph, 0);
  ASSERT_EQ(r.notes.size(), 1u);
  r = parse({"-R", "1"});  // registered buffers (cclMemAlloc): supported, no note
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.options.local_register, 1);
  EXPECT_TRUE(r.notes.empty());
  EXPECT_NE(parse({"-R", "3"}).error, "");
  r = parse({"-R", "0", "-G", "0", "-p", "1"});
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.notes.empty());
}

TEST(Options, Help) {
  EXPECT_TRUE(parse({"-h"}).options.help);
  EXPECT_TRUE(parse({"--help"}).options.help);
  const std::string u = usage("all_reduce_perf");
  EXPECT_EQ(u.rfind("USAGE: all_reduce_perf", 0), 0u);
  EXPECT_NE(u.find("--json"), std::string::npos);
  EXPECT_NE(u.find("[-b,--minbytes <min size in bytes>]"), std::string::npos);
}

}  // namespace
}  // namespace ccl::perf
