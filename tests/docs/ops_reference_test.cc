// docs/ops.md against the headers it documents: every free function of
// dsl/ops.h and dsl/random.h and every public method of KernelBuilder (dsl/builder.h) and
// TriggeredView is named in the reference as `name(`.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The names of functions declared on lines matching `pattern` (its group 1).
std::set<std::string> declared(const std::string& header, const std::regex& pattern) {
  std::set<std::string> names;
  std::istringstream lines(read(header));
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, pattern)) names.insert(m[1]);
  }
  return names;
}

TEST(OpsReference, NamesEveryBuilderCall) {
  const std::string reference = read("docs/ops.md");
  ASSERT_FALSE(reference.empty()) << "docs/ops.md is missing";
  std::set<std::string> names = declared("dsl/ops.h", std::regex(R"(^(?:Value|void) ([a-z_0-9]+)\()"));
  const size_t random_before = names.size();
  for (const std::string& n : declared("dsl/random.h", std::regex(R"(^(?:Value|std::array<Value, 4>) ([a-z_0-9]+)\()"))) {
    names.insert(n);
  }
  EXPECT_EQ(names.size(), random_before + 8);  // umulhi, philox and the six draws
  for (const std::string& n : declared(
           "dsl/builder.h",
           std::regex(
               R"(^  (?:Value|void|Var|TriggeredView|absl::StatusOr<Kernel>|std::vector<Value>) ([a-z_0-9]+)\()"))) {
    names.insert(n);
  }
  EXPECT_GT(names.size(), 50u);  // the patterns still find the declarations
  for (const std::string& n : names) {
    EXPECT_NE(reference.find("`" + n + "("), std::string::npos) << n << " is declared but not in docs/ops.md";
  }
}

}  // namespace
