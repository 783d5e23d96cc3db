#include "rank_info.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace ccl::perf {

std::string local_hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

void encode_rank_record(int pid, const std::string& host, unsigned char* record) {
  std::memset(record, 0, kRankRecordBytes);
  const auto p = static_cast<uint32_t>(pid);
  std::memcpy(record, &p, sizeof p);
  const size_t room = kRankRecordBytes - sizeof p - 1;  // keeps a terminating zero
  std::memcpy(record + sizeof p, host.data(), std::min(host.size(), room));
}

std::vector<RankDesc> decode_rank_table(const unsigned char* table, int n) {
  std::vector<RankDesc> ranks;
  for (int r = 0; r < n; ++r) {
    const unsigned char* rec = table + static_cast<size_t>(r) * kRankRecordBytes;
    uint32_t pid;
    std::memcpy(&pid, rec, sizeof pid);
    RankDesc d;
    d.rank = r;
    d.pid = static_cast<int>(pid);
    d.host = reinterpret_cast<const char*>(rec + sizeof pid);
    for (const auto& earlier : ranks) d.device += earlier.host == d.host;
    ranks.push_back(d);
  }
  return ranks;
}

}  // namespace ccl::perf
