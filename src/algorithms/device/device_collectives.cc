#include "algorithms/device/device_collectives.h"

#include <algorithm>
#include <vector>

namespace ccl::algo::device {

Split split(uint64_t total, int parts, int part, uint64_t granule) {
  const uint64_t units = total / granule, tail = total % granule;
  const uint64_t base = units / parts, extra = units % parts;
  const auto p = static_cast<uint64_t>(part);
  Split s;
  s.lo = (p * base + std::min(p, extra)) * granule;
  s.len = (base + (p < extra ? 1 : 0)) * granule;
  if (part == parts - 1) s.len += tail;  // what is left of a last partial granule
  return s;
}

namespace {

// Bytes a scratch half moves at once, or a sub-slot of one (a 256-byte multiple where it is that
// large, so that every chunk starts aligned for the kernels' vector loads).
uint64_t usable(uint64_t bytes, size_t elem) {
  const uint64_t align = bytes >= 256 ? 256 : elem;
  return std::max<uint64_t>(bytes - bytes % align, elem);
}

class Builder {
 public:
  explicit Builder(const Shape& shape)
      : n(shape.nranks), r(shape.rank), elem(shape.elem_size), half(shape.half_bytes) {
    program.elem_size = elem;
  }

  // Elements of one chunk through a whole half, and through a sub-slot (1/n of a half).
  uint64_t chunk_elems() const { return usable(half, elem) / elem; }
  uint64_t sub_bytes() const { return usable(half / n, elem); }
  uint64_t sub_elems() const { return sub_bytes() / elem; }

  Flag flag(Line line, unsigned h, int producer, int consumer) const {
    return {line, static_cast<uint8_t>(h), static_cast<int16_t>(producer),
            static_cast<int16_t>(consumer)};
  }
  // r -> every peer, or every peer -> r.
  std::vector<Flag> to_all(Line line, unsigned h) const {
    std::vector<Flag> f;
    for (int q = 0; q < n; ++q) {
      if (q != r) f.push_back(flag(line, h, r, q));
    }
    return f;
  }
  std::vector<Flag> from_all(Line line, unsigned h) const {
    std::vector<Flag> f;
    for (int q = 0; q < n; ++q) {
      if (q != r) f.push_back(flag(line, h, q, r));
    }
    return f;
  }
  // Before writing scratch half h: every flag this rank produces for it is Empty.
  void guard(unsigned h) {
    std::vector<Flag> f = to_all(Line::Data, h);
    const std::vector<Flag> result = to_all(Line::Result, h);
    f.insert(f.end(), result.begin(), result.end());
    program.wait(f, FlagState::Empty);
  }
  void publish(Line line, unsigned h) { program.signal(to_all(line, h), FlagState::Full); }
  void await_all(Line line, unsigned h) { program.wait(from_all(line, h), FlagState::Full); }
  void release_all(Line line, unsigned h) { program.signal(from_all(line, h), FlagState::Empty); }
  void publish_to(int q, unsigned h) {
    const Flag f = flag(Line::Data, h, r, q);
    program.signal({&f, 1}, FlagState::Full);
  }
  void await_from(int q, unsigned h) {
    const Flag f = flag(Line::Data, h, q, r);
    program.wait({&f, 1}, FlagState::Full);
  }
  void release_from(int q, unsigned h) {
    const Flag f = flag(Line::Data, h, q, r);
    program.signal({&f, 1}, FlagState::Empty);
  }

  // The own contribution of a reduction into `dst`: a copy, or the PreMulSum scaling.
  void contribute(const Ref& dst, const Ref& src, uint64_t elems, const Reduction& reduction) {
    if (reduction.scale_input) {
      program.scale(dst, src, elems);
    } else {
      program.copy(dst, src, elems * elem);
    }
  }

  const int n, r;
  const size_t elem;
  const uint64_t half;
  Program program;
};

Ref at(Ref ref, uint64_t bytes) {
  ref.offset += bytes;
  return ref;
}

}  // namespace

Program all_reduce(const Shape& shape, uint64_t count, AllReduceAlgorithm algorithm,
                   Reduction reduction) {
  Builder b(shape);
  const uint64_t c = b.chunk_elems();
  const uint64_t granule = std::max<uint64_t>(16 / b.elem, 1);
  for (uint64_t k = 0, lo = 0; lo < count; ++k, lo += c) {
    const unsigned h = k % 2;
    const uint64_t len = std::min(c, count - lo), at_lo = lo * b.elem;
    b.guard(h);
    b.contribute(scratch(b.r, h), input(at_lo), len, reduction);
    b.publish(Line::Data, h);
    b.await_all(Line::Data, h);
    if (algorithm == AllReduceAlgorithm::OneShot) {
      // Every rank reduces all chunks in rank order: the same bits everywhere.
      std::vector<Ref> sources;
      for (int q = 0; q < b.n; ++q) sources.push_back(scratch(q, h));
      b.program.reduce(output(at_lo), sources, len);
      b.release_all(Line::Data, h);
      if (reduction.average) b.program.divide(output(at_lo), len);
      continue;
    }
    // Two-shot: slice r of every chunk reduced here (only here: the order is this rank's own),
    // into the own scratch, whose slice r no peer reads in this phase.
    const Split mine = split(len, b.n, b.r, granule);
    std::vector<Ref> sources{scratch(b.r, h, mine.lo * b.elem)};
    for (int q = 0; q < b.n; ++q) {
      if (q != b.r) sources.push_back(scratch(q, h, mine.lo * b.elem));
    }
    b.program.reduce(sources[0], sources, mine.len);
    if (reduction.average) b.program.divide(sources[0], mine.len);
    b.release_all(Line::Data, h);
    b.publish(Line::Result, h);
    b.await_all(Line::Result, h);
    std::vector<Piece> pieces;
    for (int q = 0; q < b.n; ++q) {
      const Split s = split(len, b.n, q, granule);
      pieces.push_back(
          {output(at_lo + s.lo * b.elem), scratch(q, h, s.lo * b.elem), s.len * b.elem});
    }
    b.program.copy(pieces);
    b.release_all(Line::Result, h);
  }
  return std::move(b.program);
}

Program broadcast(const Shape& shape, uint64_t count, int root, bool in_place) {
  Builder b(shape);
  const uint64_t c = b.chunk_elems();
  if (b.r == root && !in_place) b.program.copy(output(), input(), count * b.elem);
  for (uint64_t k = 0, lo = 0; lo < count; ++k, lo += c) {
    const unsigned h = k % 2;
    const uint64_t bytes = std::min(c, count - lo) * b.elem, at_lo = lo * b.elem;
    if (b.r == root) {
      b.guard(h);
      b.program.copy(scratch(b.r, h), input(at_lo), bytes);
      b.publish(Line::Data, h);
    } else {
      b.await_from(root, h);
      b.program.copy(output(at_lo), scratch(root, h), bytes);
      b.release_from(root, h);
    }
  }
  return std::move(b.program);
}

Program reduce(const Shape& shape, uint64_t count, int root, Reduction reduction) {
  Builder b(shape);
  const uint64_t c = b.chunk_elems();
  for (uint64_t k = 0, lo = 0; lo < count; ++k, lo += c) {
    const unsigned h = k % 2;
    const uint64_t len = std::min(c, count - lo), at_lo = lo * b.elem;
    if (b.r != root) {
      b.guard(h);
      b.contribute(scratch(b.r, h), input(at_lo), len, reduction);
      b.publish_to(root, h);
      continue;
    }
    // The root reduces its own input first (so an in-place output may be it), scaled into its
    // own scratch first for PreMulSum.
    Ref own = input(at_lo);
    if (reduction.scale_input) {
      b.guard(h);
      b.program.scale(scratch(b.r, h), own, len);
      own = scratch(b.r, h);
    }
    std::vector<Ref> sources{own};
    std::vector<Flag> from;
    for (int q = 0; q < b.n; ++q) {
      if (q == b.r) continue;
      sources.push_back(scratch(q, h));
      from.push_back(b.flag(Line::Data, h, q, b.r));
    }
    b.program.wait(from, FlagState::Full);
    b.program.reduce(output(at_lo), sources, len);
    b.program.signal(from, FlagState::Empty);
    if (reduction.average) b.program.divide(output(at_lo), len);
  }
  return std::move(b.program);
}

Program all_gather(const Shape& shape, uint64_t count, bool in_place) {
  Builder b(shape);
  const uint64_t bytes_per_rank = count * b.elem;
  if (!in_place) b.program.copy(output(b.r * bytes_per_rank), input(), bytes_per_rank);
  const uint64_t c = b.chunk_elems();
  for (uint64_t k = 0, lo = 0; lo < count; ++k, lo += c) {
    const unsigned h = k % 2;
    const uint64_t bytes = std::min(c, count - lo) * b.elem, at_lo = lo * b.elem;
    b.guard(h);
    b.program.copy(scratch(b.r, h), input(at_lo), bytes);
    b.publish(Line::Data, h);
    b.await_all(Line::Data, h);
    std::vector<Piece> pieces;
    for (int q = 0; q < b.n; ++q) {
      if (q != b.r) pieces.push_back({output(q * bytes_per_rank + at_lo), scratch(q, h), bytes});
    }
    b.program.copy(pieces);
    b.release_all(Line::Data, h);
  }
  return std::move(b.program);
}

Program all_gather_v(const Shape& shape, std::span<const size_t> counts,
                     std::span<const size_t> displs, bool in_place) {
  Builder b(shape);
  const size_t e = b.elem;
  if (!in_place) b.program.copy(output(displs[b.r] * e), input(), counts[b.r] * e);
  const uint64_t c = b.chunk_elems();
  const uint64_t most = *std::max_element(counts.begin(), counts.end());
  // Chunk k of every rank's block that has one: a rank with a shorter block leaves the later
  // chunks out, and every rank knows which (the counts are the same everywhere).
  for (uint64_t k = 0, lo = 0; lo < most; ++k, lo += c) {
    const unsigned h = k % 2;
    const auto piece = [&](int q) { return counts[q] > lo ? std::min(c, counts[q] - lo) : 0; };
    if (piece(b.r) > 0) {
      b.guard(h);
      b.program.copy(scratch(b.r, h), input(lo * e), piece(b.r) * e);
      b.publish(Line::Data, h);
    }
    std::vector<Flag> from;
    std::vector<Piece> pieces;
    for (int q = 0; q < b.n; ++q) {
      if (q == b.r || piece(q) == 0) continue;
      from.push_back(b.flag(Line::Data, h, q, b.r));
      pieces.push_back({output((displs[q] + lo) * e), scratch(q, h), piece(q) * e});
    }
    b.program.wait(from, FlagState::Full);
    b.program.copy(pieces);
    b.program.signal(from, FlagState::Empty);
  }
  return std::move(b.program);
}

Program reduce_scatter(const Shape& shape, uint64_t recvcount, Reduction reduction) {
  Builder b(shape);
  const size_t e = b.elem;
  const uint64_t c = b.sub_elems(), sub = b.sub_bytes();
  for (uint64_t k = 0, lo = 0; lo < recvcount; ++k, lo += c) {
    const unsigned h = k % 2;
    const uint64_t len = std::min(c, recvcount - lo);
    b.guard(h);
    // Chunk k of every block q into sub-slot q (the own block's too when it is scaled; else it
    // is read straight from the input).
    std::vector<Piece> pieces;
    for (int q = 0; q < b.n; ++q) {
      const Ref src = input((q * recvcount + lo) * e);
      if (q == b.r && !reduction.scale_input) continue;
      if (reduction.scale_input) {
        b.program.scale(scratch(b.r, h, q * sub), src, len);
      } else {
        pieces.push_back({scratch(b.r, h, q * sub), src, len * e});
      }
    }
    b.program.copy(pieces);
    b.publish(Line::Data, h);
    b.await_all(Line::Data, h);
    // Own first: an in-place output (recvbuff = sendbuff + rank * recvcount) is that block.
    std::vector<Ref> sources{reduction.scale_input ? scratch(b.r, h, b.r * sub)
                                                   : input((b.r * recvcount + lo) * e)};
    for (int q = 0; q < b.n; ++q) {
      if (q != b.r) sources.push_back(scratch(q, h, b.r * sub));
    }
    b.program.reduce(output(lo * e), sources, len);
    b.release_all(Line::Data, h);
    if (reduction.average) b.program.divide(output(lo * e), len);
  }
  return std::move(b.program);
}

Program all_to_all(const Shape& shape, uint64_t count, bool in_place) {
  Builder b(shape);
  const size_t e = b.elem;
  const uint64_t block = count * e;
  if (!in_place) b.program.copy(output(b.r * block), input(b.r * block), block);
  const uint64_t c = b.sub_elems(), sub = b.sub_bytes();
  for (uint64_t k = 0, lo = 0; lo < count; ++k, lo += c) {
    const unsigned h = k % 2;
    const uint64_t bytes = std::min(c, count - lo) * e, at_lo = lo * e;
    b.guard(h);
    std::vector<Piece> in, out;
    for (int q = 0; q < b.n; ++q) {
      if (q == b.r) continue;
      in.push_back({scratch(b.r, h, q * sub), input(q * block + at_lo), bytes});
      out.push_back({output(q * block + at_lo), scratch(q, h, b.r * sub), bytes});
    }
    b.program.copy(in);
    b.publish(Line::Data, h);
    b.await_all(Line::Data, h);
    // In place, chunk k of every block was copied out above, before this overwrites it.
    b.program.copy(out);
    b.release_all(Line::Data, h);
  }
  return std::move(b.program);
}

namespace {

// One piece of a pair's stream of messages: bytes [offset, offset + bytes) of `where`.
struct PairPiece {
  Ref where;
  uint64_t bytes = 0;
};

// Pairwise exchange: sends[q] and recvs[q] are the pieces of the pair (r -> q) and (q -> r), in
// order. Step j moves the j-th piece of every pair through half j % 2, the sender's sub-slot of
// the receiver. A pair handshakes only with itself, so a rank needs no other rank's counts; the
// guard (every flag of the half Empty) keeps a half from being overwritten while a peer of an
// earlier call still reads it.
void exchange_pairwise(Builder& b, const std::vector<std::vector<PairPiece>>& sends,
                       const std::vector<std::vector<PairPiece>>& recvs) {
  size_t steps = 0;
  for (int q = 0; q < b.n; ++q) steps = std::max({steps, sends[q].size(), recvs[q].size()});
  const uint64_t sub = b.sub_bytes();
  for (size_t j = 0; j < steps; ++j) {
    const unsigned h = j % 2;
    std::vector<Piece> in, out;
    std::vector<Flag> to, from;
    for (int q = 0; q < b.n; ++q) {
      if (q == b.r) continue;
      if (j < sends[q].size()) {
        in.push_back({scratch(b.r, h, q * sub), sends[q][j].where, sends[q][j].bytes});
        to.push_back(b.flag(Line::Data, h, b.r, q));
      }
      if (j < recvs[q].size()) {
        out.push_back({recvs[q][j].where, scratch(q, h, b.r * sub), recvs[q][j].bytes});
        from.push_back(b.flag(Line::Data, h, q, b.r));
      }
    }
    if (!to.empty()) {
      b.guard(h);
      b.program.copy(in);
      b.program.signal(to, FlagState::Full);
    }
    b.program.wait(from, FlagState::Full);
    b.program.copy(out);
    b.program.signal(from, FlagState::Empty);
  }
}

// `bytes` from `start` cut into pieces of at most `most`, appended to `pieces`.
void cut(std::vector<PairPiece>& pieces, Ref start, uint64_t bytes, uint64_t most) {
  for (uint64_t done = 0; done < bytes; done += most) {
    pieces.push_back({at(start, done), std::min(most, bytes - done)});
  }
}

}  // namespace

Program all_to_all_v(const Shape& shape, std::span<const size_t> sendcounts,
                     std::span<const size_t> sdispls, std::span<const size_t> recvcounts,
                     std::span<const size_t> rdispls, bool in_place) {
  Builder b(shape);
  const size_t e = b.elem;
  // In place, blocks received would overwrite blocks not yet sent: send from a copy.
  Ref from = input();
  if (in_place) {
    uint64_t extent = 0;
    for (int q = 0; q < b.n; ++q) {
      if (sendcounts[q] != 0) extent = std::max<uint64_t>(extent, (sdispls[q] + sendcounts[q]) * e);
    }
    b.program.temp_bytes = extent;
    b.program.copy(temp(), input(), extent);
    from = temp();
  }
  b.program.copy(output(rdispls[b.r] * e), at(from, sdispls[b.r] * e), recvcounts[b.r] * e);
  const uint64_t most = b.sub_bytes();
  std::vector<std::vector<PairPiece>> sends(b.n), recvs(b.n);
  for (int q = 0; q < b.n; ++q) {
    if (q == b.r) continue;
    cut(sends[q], at(from, sdispls[q] * e), sendcounts[q] * e, most);
    cut(recvs[q], output(rdispls[q] * e), recvcounts[q] * e, most);
  }
  exchange_pairwise(b, sends, recvs);
  return std::move(b.program);
}

Program point_to_point(const Shape& shape, std::span<const PointToPoint> operations) {
  Builder b(shape);
  const uint64_t most = b.sub_bytes();
  std::vector<std::vector<PairPiece>> sends(b.n), recvs(b.n);
  std::vector<uint32_t> self_sends, self_recvs;
  for (uint32_t i = 0; i < operations.size(); ++i) {
    const PointToPoint& op = operations[i];
    if (op.bytes == 0) continue;
    if (op.peer == b.r) {
      (op.send ? self_sends : self_recvs).push_back(i);
      continue;
    }
    cut(op.send ? sends[op.peer] : recvs[op.peer], slot(i), op.bytes, most);
  }
  for (size_t i = 0; i < std::min(self_sends.size(), self_recvs.size()); ++i) {
    b.program.copy(slot(self_recvs[i]), slot(self_sends[i]), operations[self_sends[i]].bytes);
  }
  exchange_pairwise(b, sends, recvs);
  return std::move(b.program);
}

Program barrier(const Shape& shape) {
  Builder b(shape);
  b.guard(0);
  b.publish(Line::Data, 0);
  b.await_all(Line::Data, 0);
  b.release_all(Line::Data, 0);
  return std::move(b.program);
}

}  // namespace ccl::algo::device
