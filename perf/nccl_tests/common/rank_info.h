// Who the ranks are (pid, host, index on the host), for the "# Using devices" lines: each rank
// writes a fixed-size record into its slot of a zeroed table that an allreduce (max) combines.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "json_report.h"

namespace ccl::perf {

inline constexpr size_t kRankRecordBytes = 128;

std::string local_hostname();
// Writes pid and host (truncated to fit) into record[0, kRankRecordBytes).
void encode_rank_record(int pid, const std::string& host, unsigned char* record);
// Reads n records; `device` is the rank's index among the ranks with the same host.
std::vector<RankDesc> decode_rank_table(const unsigned char* table, int n);

}  // namespace ccl::perf
