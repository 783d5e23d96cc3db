#include "algorithms/schedule.h"

#include <cstdint>
#include <sstream>

#include "base/error.h"

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

void Schedule::add(const Step& st) {
  Packed p;
  p.kind = st.kind;
  p.peer = st.peer;
  p.count = st.src.count != 0 ? st.src.count : st.dst.count;
  p.src_offset = st.src.offset;
  p.dst_offset = st.dst.offset;
  p.src_buffer = st.src.buffer;
  p.dst_buffer = st.dst.buffer;
  p.flags = (st.src.count != 0 ? kSrcCounted : 0) | (st.dst.count != 0 ? kDstCounted : 0);
  bool fits = (st.src.count == 0 || st.src.count == p.count) &&
              (st.dst.count == 0 || st.dst.count == p.count);
  if (st.src.slot != 0 || st.dst.slot != 0) {
    // A send from or receive into a Slot (send/recv groups): the slot in the unused offset.
    const bool in_src = st.dst == Region{};
    const bool in_dst = st.src == Region{};
    if (in_src) {
      p.dst_offset = st.src.slot;
      p.flags |= kSlotInSrc;
    } else if (in_dst) {
      p.src_offset = st.dst.slot;
      p.flags |= kSlotInDst;
    } else {
      fits = false;
    }
  }
  if (!fits) {
    p = Packed{};
    p.kind = st.kind;
    p.flags = kWide;
    p.count = wide_.size();
    wide_.push_back(st);
  }
  packed_.push_back(p);
}

Step Schedule::rare_step(const Packed& p) const {
  if ((p.flags & kWide) != 0) return wide_[p.count];
  Step st;
  st.kind = p.kind;
  st.peer = p.peer;
  if ((p.flags & kSlotInSrc) != 0) {
    st.src = Region{p.src_buffer, p.src_offset, p.count, static_cast<uint32_t>(p.dst_offset)};
  } else {
    st.dst = Region{p.dst_buffer, p.dst_offset, p.count, static_cast<uint32_t>(p.src_offset)};
  }
  return st;
}

void Schedule::end_round() {
  const size_t end = packed_.size();
  if (end == step_count()) return;  // nothing since the last round: no empty round
  if (end > UINT32_MAX) {
    throw_error(cclInvalidArgument, "schedule of more than %u steps", UINT32_MAX);
  }
  round_end_.push_back(static_cast<uint32_t>(end));
}

void Schedule::reserve(size_t steps, size_t rounds) {
  packed_.reserve(steps);
  round_end_.reserve(rounds);
}

size_t Schedule::memory_bytes() const {
  return packed_.capacity() * sizeof(Packed) + wide_.capacity() * sizeof(Step) +
         round_end_.capacity() * sizeof(uint32_t);
}

std::string Schedule::describe() const {
  std::ostringstream out;
  if (scratch_elems != 0) out << "scratch " << scratch_elems << " elems\n";
  for (size_t r = 0; r < round_count(); ++r) {
    for (const Step step : round(r)) {
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
  if (round_count() == 0) out << "(no rounds)\n";
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
  s.add_round({Step{StepKind::Copy, -1, Region{Buffer::Input, 0, count}, all_out}});
  s.add_round({Step{StepKind::Finalize, -1, Region{}, all_out}});
  return s;
}

}  // namespace ccl::algo
