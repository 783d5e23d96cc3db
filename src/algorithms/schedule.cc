#include "algorithms/schedule.h"

#include <sstream>

#include "core/error.h"

namespace ccl::algo {

namespace {

const char* kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::Send:
      return "Send";
    case StepKind::Recv:
      return "Recv";
    case StepKind::RecvReduce:
      return "RecvReduce";
    case StepKind::Copy:
      return "Copy";
    case StepKind::Finalize:
      return "Finalize";
  }
  return "?";
}

const char* buffer_name(Buffer buffer) {
  switch (buffer) {
    case Buffer::Input:
      return "Input";
    case Buffer::Output:
      return "Output";
    case Buffer::Scratch:
      return "Scratch";
    case Buffer::Slot:
      return "Slot";
  }
  return "?";
}

// "Output[10,15)": half-open element range, so adjacent regions read as adjacent.
void put_region(std::ostringstream& out, const char* label, const Region& r) {
  out << ' ' << label << '=' << buffer_name(r.buffer);
  if (r.buffer == Buffer::Slot) out << r.slot;
  out << '[' << r.offset << ',' << r.offset + r.count << ')';
}

}  // namespace

size_t Schedule::step_count() const {
  size_t total = 0;
  for (const Round& round : rounds) total += round.steps.size();
  return total;
}

size_t Schedule::memory_bytes() const {
  size_t total = rounds.capacity() * sizeof(Round);
  for (const Round& round : rounds) total += round.steps.capacity() * sizeof(Step);
  return total;
}

std::string Schedule::describe() const {
  std::ostringstream out;
  if (scratch_elems != 0) out << "scratch " << scratch_elems << " elems\n";
  for (size_t r = 0; r < rounds.size(); ++r) {
    for (const Step& step : rounds[r].steps) {
      out << "round " << r << ": " << kind_name(step.kind);
      // Only the fields a kind uses are printed; the others are meaningless defaults.
      switch (step.kind) {
        case StepKind::Send:
          out << " peer=" << step.peer;
          put_region(out, "src", step.src);
          break;
        case StepKind::Recv:
          out << " peer=" << step.peer;
          put_region(out, "dst", step.dst);
          break;
        case StepKind::RecvReduce:
          out << " peer=" << step.peer;
          put_region(out, "src", step.src);
          put_region(out, "dst", step.dst);
          break;
        case StepKind::Copy:
          put_region(out, "src", step.src);
          put_region(out, "dst", step.dst);
          break;
        case StepKind::Finalize:
          put_region(out, "dst", step.dst);
          break;
      }
      out << '\n';
    }
  }
  if (rounds.empty()) out << "(no rounds)\n";
  return out.str();
}

Piece split_even(size_t count, size_t parts, size_t index) {
  if (parts == 0 || index >= parts) {
    throw_error(cclInvalidArgument, "split_even: piece %zu of %zu", index, parts);
  }
  const size_t base = count / parts;
  const size_t extra = count % parts;  // the first `extra` pieces get one more element
  const size_t offset = index * base + (index < extra ? index : extra);
  return Piece{offset, base + (index < extra ? 1 : 0)};
}

Schedule single_rank_reduction(size_t count) {
  const Region all_out{Buffer::Output, 0, count};
  Schedule s;
  s.rounds.push_back(Round{{Step{StepKind::Copy, -1, Region{Buffer::Input, 0, count}, all_out}}});
  s.rounds.push_back(Round{{Step{StepKind::Finalize, -1, Region{}, all_out}}});
  return s;
}

}  // namespace ccl::algo
