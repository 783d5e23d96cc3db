#include "symbolic_buffer.h"

#include <algorithm>
#include <sstream>

namespace ccl::algo::verify {

Value Value::input_of(int rank, int64_t delta) {
  return Value{true, false, {Term{rank, delta, 1}}};
}

Value Value::reduced(int nranks, int64_t delta, bool finalized) {
  Value v{true, finalized, {}};
  for (int r = 0; r < nranks; ++r) v.terms.push_back(Term{r, delta, 1});
  return v;
}

Value Value::shifted(int64_t shift) const {
  Value v = *this;
  for (Term& t : v.terms) t.delta += shift;
  return v;
}

std::string Value::describe() const {
  if (!defined) return "garbage";
  std::ostringstream out;
  out << (finalized ? "final{" : "{");
  for (size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    if (i) out << ' ';
    if (t.count != 1) out << t.count << '*';
    out << "in" << t.rank << "[x" << (t.delta >= 0 ? "+" : "") << t.delta << ']';
  }
  out << '}';
  return out.str();
}

Value combine(const Value& a, const Value& b) {
  if (!a.defined || !b.defined) {
    throw VerifyError{"reduction reads garbage (a buffer region never written): " + a.describe() +
                      " (op) " + b.describe()};
  }
  if (a.finalized || b.finalized) {
    throw VerifyError{"reduction of already finalized data: " + a.describe() + " (op) " +
                      b.describe()};
  }
  Value v{true, false, {}};
  v.terms.reserve(a.terms.size() + b.terms.size());
  const auto key_less = [](const Term& x, const Term& y) {
    return x.rank != y.rank ? x.rank < y.rank : x.delta < y.delta;
  };
  size_t i = 0, j = 0;
  while (i < a.terms.size() || j < b.terms.size()) {
    if (j == b.terms.size() || (i < a.terms.size() && key_less(a.terms[i], b.terms[j]))) {
      v.terms.push_back(a.terms[i++]);
    } else if (i == a.terms.size() || key_less(b.terms[j], a.terms[i])) {
      v.terms.push_back(b.terms[j++]);
    } else {
      Term t = a.terms[i++];
      t.count += b.terms[j++].count;
      v.terms.push_back(t);
    }
  }
  return v;
}

Runs combine_runs(const Runs& a, const Runs& b) {
  Runs out;
  size_t i = 0, j = 0, used_a = 0, used_b = 0;
  while (i < a.size() && j < b.size()) {
    const size_t len = std::min(a[i].len - used_a, b[j].len - used_b);
    if (len > 0) {
      // Both inputs are relative to their own run starts; bring them to this piece's start.
      const Value va = a[i].value.shifted(static_cast<int64_t>(used_a));
      const Value vb = b[j].value.shifted(static_cast<int64_t>(used_b));
      out.push_back(Run{len, combine(va, vb)});
    }
    used_a += len;
    used_b += len;
    if (used_a == a[i].len) ++i, used_a = 0;
    if (used_b == b[j].len) ++j, used_b = 0;
  }
  return out;
}

SymbolicBuffer::SymbolicBuffer(size_t size) : size_(size) {
  if (size > 0) segs_.emplace(0, Seg{size, Value::undefined()});
}

void SymbolicBuffer::split_at(size_t pos) {
  if (pos == 0 || pos >= size_) return;
  auto it = std::prev(segs_.upper_bound(pos));
  if (it->first == pos) return;
  Seg tail{it->second.end, it->second.value};
  it->second.end = pos;
  segs_.emplace(pos, std::move(tail));
}

Runs SymbolicBuffer::read(size_t off, size_t len) const {
  Runs out;
  if (len == 0) return out;
  auto it = std::prev(segs_.upper_bound(off));
  const size_t end = off + len;
  for (; it != segs_.end() && it->first < end; ++it) {
    const size_t b = std::max(it->first, off), e = std::min(it->second.end, end);
    // Stored: Input[x + d] at x. Relative to the read start `b`: element k is Input[b + k + d].
    out.push_back(Run{e - b, it->second.value.shifted(static_cast<int64_t>(b))});
  }
  return out;
}

void SymbolicBuffer::write(size_t off, const Runs& runs) {
  size_t len = 0;
  for (const Run& r : runs) len += r.len;
  if (len == 0) return;
  split_at(off);
  split_at(off + len);
  segs_.erase(segs_.lower_bound(off), segs_.lower_bound(off + len));
  size_t pos = off;
  for (const Run& r : runs) {
    if (r.len == 0) continue;
    segs_.emplace(pos, Seg{pos + r.len, r.value.shifted(-static_cast<int64_t>(pos))});
    pos += r.len;
  }
  coalesce(off, off + len);
}

// Merges equal neighbours around [from, to) so that the map stays small however fine the chunks.
void SymbolicBuffer::coalesce(size_t from, size_t to) {
  auto it = segs_.upper_bound(from);
  if (it != segs_.begin()) --it;
  if (it != segs_.begin()) --it;
  while (it != segs_.end()) {
    auto nx = std::next(it);
    if (nx == segs_.end() || it->first > to) break;
    if (nx->second.value == it->second.value) {
      it->second.end = nx->second.end;
      segs_.erase(nx);
    } else {
      it = nx;
    }
  }
}

}  // namespace ccl::algo::verify
