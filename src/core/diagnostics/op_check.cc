#include "core/diagnostics/op_check.h"

#include <vector>

#include "algorithms/reduce/reduce.h"

namespace ccl {

namespace {

bool same(const OpDescriptor& a, const OpDescriptor& b) {
  return a.index == b.index && a.kind == b.kind && a.datatype == b.datatype && a.op == b.op &&
         a.root == b.root && a.count == b.count;
}

std::string call_text(const OpDescriptor& d) {
  std::string text = "#" + std::to_string(d.index) + " ";
  text += d.kind <= static_cast<uint32_t>(OpKind::SendRecv)
              ? op_kind_name(static_cast<OpKind>(d.kind))
              : "?";
  text += " count " + std::to_string(d.count);
  if (d.datatype >= 0) {
    text += " type ";
    text += reduce::datatype_name(static_cast<cclDataType_t>(d.datatype));
  }
  if (d.op >= 0) {
    text += " op ";
    if (d.op < cclNumOps) {
      text += reduce::op_name(static_cast<cclRedOp_t>(d.op));
    } else {
      text += "premulsum " + std::to_string(d.op);
    }
  }
  if (d.root >= 0) text += " root " + std::to_string(d.root);
  return text;
}

std::string differing_fields(const OpDescriptor& a, const OpDescriptor& b) {
  std::string fields;
  auto add = [&](bool differs, const char* name) {
    if (!differs) return;
    if (!fields.empty()) fields += ", ";
    fields += name;
  };
  add(a.index != b.index, "sequence number");
  add(a.kind != b.kind, "collective");
  add(a.count != b.count, "count");
  add(a.datatype != b.datatype, "datatype");
  add(a.op != b.op, "op");
  add(a.root != b.root, "root");
  return fields;
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce:
      return "allreduce";
    case OpKind::Broadcast:
      return "broadcast";
    case OpKind::Reduce:
      return "reduce";
    case OpKind::AllGather:
      return "allgather";
    case OpKind::AllGatherV:
      return "allgatherv";
    case OpKind::ReduceScatter:
      return "reducescatter";
    case OpKind::AlltoAll:
      return "alltoall";
    case OpKind::AlltoAllV:
      return "alltoallv";
    case OpKind::Barrier:
      return "barrier";
    case OpKind::SendRecv:
      return "send/recv";
  }
  return "?";
}

OpDescriptor describe(const OpInfo& info, uint64_t index) {
  OpDescriptor d{};
  d.index = index;
  d.kind = static_cast<uint32_t>(info.kind);
  d.datatype = info.datatype;
  d.op = info.op;
  d.root = info.root;
  d.count = info.kind == OpKind::AlltoAllV ? 0 : info.count;
  return d;
}

std::string mismatch_message(std::span<const OpDescriptor> all) {
  bool agree = true;
  for (const OpDescriptor& d : all) agree = agree && same(d, all[0]);
  if (agree) return {};
  // Ranks grouped by what they called, groups in order of their lowest rank.
  std::vector<int> group_of(all.size(), -1);
  std::string message = "ranks disagree on the collective they call:";
  int groups = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    if (group_of[r] >= 0) continue;
    std::string ranks;
    size_t members = 0;
    for (size_t q = r; q < all.size(); ++q) {
      if (group_of[q] >= 0 || !same(all[q], all[r])) continue;
      group_of[q] = groups;
      ranks += (members++ == 0 ? "" : ",") + std::to_string(q);
    }
    message += (groups == 0 ? " " : "; ") + std::string(members == 1 ? "rank " : "ranks ") + ranks +
               " called " + call_text(all[r]);
    if (groups > 0) message += " (differs from rank 0 in " + differing_fields(all[r], all[0]) + ")";
    ++groups;
  }
  return message;
}

}  // namespace ccl
