// ccl-info: which ccl this is, how it was built, and every CCL_* variable it reads.
//
// The version comes from the library at run time (cclGetVersion), not only from the header this
// tool was compiled with: a program that picks up another libccl.so than the one its header
// belongs to is the case this tool exists to show. The variables come from the one registry,
// src/base/config_table.cc (DESIGN.md principle 4), compiled into this tool (see CMakeLists.txt).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ccl/ccl.h"
#include "base/config.h"

namespace {

const char* usage_text() {
  return "usage: ccl-info [--version | --env | --env-markdown | --build | --help]\n"
         "\n"
         "Prints what ccl this is and the CCL_* environment variables it reads.\n"
         "\n"
         "  (no option)  version, build options and every variable\n"
         "  --version    the library's version (cclGetVersion) and the header's, if they differ\n"
         "  --env        every CCL_* variable: default, current value and what it does\n"
         "  --env-markdown\n"
         "               every CCL_* variable, default and what it does, as the Markdown page\n"
         "               docs/environment.md (no current values: the page does not depend on\n"
         "               the environment); regenerate it with\n"
         "               build/tools/ccl-info --env-markdown > docs/environment.md\n"
         "  --build      how this ccl was configured\n"
         "  -h, --help   print this text\n"
         "\n"
         "Exit status: 0; 1 if the library's version is not the header's or cannot be read;\n"
         "2 on bad usage.\n";
}

std::string version_string(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

// The file the dynamic loader took cclGetVersion from: the first thing to check when the
// versions differ.
std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cclGetVersion), &info) == 0 || info.dli_fname == nullptr) {
    return "(unknown)";
  }
  return info.dli_fname;
}

// Returns the process exit status: 0 when the library and the header agree.
int print_version() {
  int library_code = 0;
  cclResult_t result = cclGetVersion(&library_code);
  if (result != cclSuccess) {
    fprintf(stderr, "ccl-info: cclGetVersion failed: %s\n", cclGetErrorString(result));
    return 1;
  }
  printf("ccl %s (version code %d)\n", version_string(library_code).c_str(), library_code);
  if (library_code != CCL_VERSION_CODE) {
    printf("header ccl.h this tool was built with: ccl %s (version code %d)\n",
           version_string(CCL_VERSION_CODE).c_str(), CCL_VERSION_CODE);
    printf("library %s does not match the header\n", library_path().c_str());
    return 1;
  }
  return 0;
}

void print_build() {
  printf("library: %s\n", library_path().c_str());
  printf("build type: %s, compiler: %s\n", CCL_INFO_BUILD_TYPE, CCL_INFO_COMPILER);
  // Found by cmake/optional_deps.cmake; docs/transports.md, docs/cuda.md and docs/tuning.md say
  // what the code does with them.
  printf(
      "optional dependencies found when configured: hwloc %s, ibverbs %s, ucx %s, "
      "CUDA toolkit %s\n",
      CCL_INFO_HAVE_HWLOC ? "yes" : "no", CCL_INFO_HAVE_IBVERBS ? "yes" : "no",
      CCL_INFO_HAVE_UCX ? "yes" : "no", CCL_INFO_HAVE_CUDA_TOOLKIT ? "yes" : "no");
}

const char* type_name(ccl::ConfigType type) {
  switch (type) {
    case ccl::ConfigType::Int:
      return "int";
    case ccl::ConfigType::Bool:
      return "bool";
    case ccl::ConfigType::String:
      return "string";
    case ccl::ConfigType::Bytes:
      return "bytes";
  }
  return "?";
}

void print_env() {
  for (const ccl::ConfigVar& var : ccl::config_vars()) {
    // The raw text, as the user wrote it: also a malformed value, which config_int() would
    // reject with an error instead of showing it.
    const char* current = getenv(var.name);
    std::string default_text = var.default_value[0] != '\0' ? var.default_value : "(unset)";
    std::string current_text = current != nullptr ? std::string("'") + current + "'" : "(unset)";
    printf("%s (%s)  default: %s  current: %s\n    %s\n", var.name, type_name(var.type),
           default_text.c_str(), current_text.c_str(), var.doc);
  }
}

// Text of the registry made safe inside a Markdown table cell: a '|' would end the cell, '<' could
// start an HTML tag (CCL_TRACE_FILE's doc has "<rank>"), and '`', '*', '[', ']' and '\' would
// be read as markup.
std::string markdown_cell(const char* text) {
  std::string out;
  for (const char* c = text; *c != '\0'; ++c) {
    switch (*c) {
      case '|':
      case '`':
      case '*':
      case '[':
      case ']':
      case '\\':
        out += '\\';
        out += *c;
        break;
      case '<':
        out += "&lt;";
        break;
      case '\n':
        out += ' ';
        break;
      default:
        out += *c;
    }
  }
  return out;
}

// docs/environment.md: the registry as a Markdown page. Only the table's own text goes in (no
// current value, no build option), so the page is the same wherever it is generated and the ctest
// docs.environment can compare it with the checked-in file.
void print_env_markdown() {
  printf(
      "# Environment variables\n"
      "\n"
      "Read this when you want to know which `CCL_*` variable changes what, and what it is when\n"
      "unset.\n"
      "\n"
      "This page is generated from ccl's one table of variables (src/base/config_table.cc) by\n"
      "`build/tools/ccl-info --env-markdown > docs/environment.md`; do not edit it by hand. The\n"
      "ctest `docs.environment` fails when it differs from what ccl-info prints. `ccl-info --env`\n"
      "prints the same variables with their current values in this environment. Sizes (type\n"
      "bytes) take a K, M or G suffix (binary: 1M is 1048576); booleans 1/0, true/false, yes/no\n"
      "or on/off.\n"
      "\n"
      "| variable | type | default | what it does |\n"
      "|---|---|---|---|\n");
  for (const ccl::ConfigVar& var : ccl::config_vars()) {
    std::string default_text = var.default_value[0] != '\0'
                                   ? "`" + std::string(var.default_value) + "`"
                                   : std::string("(unset)");
    printf("| `%s` | %s | %s | %s |\n", var.name, type_name(var.type), default_text.c_str(),
           markdown_cell(var.doc).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    fputs(usage_text(), stderr);
    return 2;
  }
  std::string option = argc == 2 ? argv[1] : "";
  if (option == "-h" || option == "--help") {
    fputs(usage_text(), stdout);
    return 0;
  }
  if (option == "--version") return print_version();
  if (option == "--env") {
    print_env();
    return 0;
  }
  if (option == "--env-markdown") {
    print_env_markdown();
    return 0;
  }
  if (option == "--build") {
    print_build();
    return 0;
  }
  if (!option.empty()) {
    fprintf(stderr, "ccl-info: unknown option '%s'\n%s", option.c_str(), usage_text());
    return 2;
  }
  int status = print_version();
  print_build();
  printf("\nenvironment variables:\n");
  print_env();
  return status;
}
