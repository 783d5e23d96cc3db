/**
 * @file ccl.hpp
 * @brief The C++20 API of ccl: thin, header-only, inline wrappers over the C ABI of ccl.h.
 *
 * Handles are RAII and move-only, failures are thrown as ccl::Error, buffers are contiguous
 * ranges (std::span, std::vector, std::array, C arrays) whose element type gives the datatype.
 * Everything here calls only the public C functions, so it works with libccl.so and libccl.a.
 *
 * @code
 * #include <ccl/ccl.hpp>
 *
 * int main() {  // started by `cclrun -np 2 ./a.out`
 *   ccl::Communicator comm = ccl::Communicator::from_env();
 *   std::vector<float> x = {1, 2, 3, 4};
 *   comm.all_reduce(x);  // in place, cclSum: x = {2, 4, 6, 8} on both ranks
 * }
 * @endcode
 *
 * The library's own internals also live in namespace ccl; the classes here sit in an inline
 * namespace so that their symbols differ from the internal ones when linking libccl.a (users
 * still write ccl::Communicator).
 */
#ifndef CCL_CCL_HPP_
#define CCL_CCL_HPP_

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ccl.h"

namespace ccl {
inline namespace cpp_api {

/**
 * @brief What every wrapper throws when a call fails: the cclResult_t and a readable message.
 *
 * what() names the C function, the text of cclGetErrorString and the detail of
 * cclGetLastError, e.g. "cclBroadcast: invalid argument (...): root 5 is out of range [0, 2)".
 * Checks made on the C++ side (buffer sizes) throw it with cclInvalidArgument.
 */
class Error : public std::runtime_error {
 public:
  /// An error with result `code` and message `message` (what()).
  Error(cclResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  /// The result code of the failed call (never cclSuccess).
  cclResult_t code() const noexcept { return code_; }

 private:
  cclResult_t code_;
};

namespace detail {

/// Throws the Error for result `code` of C function `function` called with `comm` (or NULL).
[[noreturn]] inline void throw_result(cclResult_t code, const char* function, cclComm_t comm) {
  // A comm's last error is set only by calls that reached it; the calling thread's last error
  // is set by every failed call. Prefer whichever describes this call (it starts with its name).
  auto text = [](const char* s) { return std::string(s != nullptr ? s : ""); };
  const std::string name = function;
  std::string detail = comm != nullptr ? text(cclGetLastError(comm)) : "";
  if (!detail.starts_with(name)) {
    std::string thread_detail = text(cclGetLastError(nullptr));
    if (detail.empty() || thread_detail.starts_with(name)) detail = std::move(thread_detail);
  }
  if (detail.starts_with(name + ": ")) detail.erase(0, name.size() + 2);
  std::string message = name + ": " + cclGetErrorString(code);
  if (!detail.empty()) message += ": " + detail;
  throw Error(code, message);
}

/// Throws unless `result` is cclSuccess, or cclInProgress: a non-blocking communicator's call that
/// goes on in the background (Communicator::async_error() says when it is done).
inline void check(cclResult_t result, const char* function, cclComm_t comm = nullptr) {
  if (result != cclSuccess && result != cclInProgress) [[unlikely]]
    throw_result(result, function, comm);
}

/// Throws cclInvalidArgument for a check made on the C++ side.
[[noreturn]] inline void invalid_argument(const char* where, const std::string& what) {
  throw Error(cclInvalidArgument, std::string("ccl::Communicator::") + where + ": " + what);
}

}  // namespace detail

/// @name Element types for the 16- and 8-bit floating point datatypes (their raw bits)
/// @{
/// IEEE 754 binary16 (cclFloat16), e.g. ccl::half{0x3c00} is 1.0.
struct half {
  std::uint16_t bits;  ///< the raw bits
  /// Bitwise equality.
  friend constexpr bool operator==(const half&, const half&) = default;
};
/// bfloat16 (cclBfloat16), e.g. ccl::bfloat16{0x3f80} is 1.0.
struct bfloat16 {
  std::uint16_t bits;  ///< the raw bits
  /// Bitwise equality.
  friend constexpr bool operator==(const bfloat16&, const bfloat16&) = default;
};
/// 8-bit float with 4 exponent and 3 mantissa bits (cclFloat8e4m3), e.g. {0x38} is 1.0.
struct fp8_e4m3 {
  std::uint8_t bits;  ///< the raw bits
  /// Bitwise equality.
  friend constexpr bool operator==(const fp8_e4m3&, const fp8_e4m3&) = default;
};
/// 8-bit float with 5 exponent and 2 mantissa bits (cclFloat8e5m2), e.g. {0x3c} is 1.0.
struct fp8_e5m2 {
  std::uint8_t bits;  ///< the raw bits
  /// Bitwise equality.
  friend constexpr bool operator==(const fp8_e5m2&, const fp8_e5m2&) = default;
};
/// @}

namespace detail {

template <class T, class... Ts>
inline constexpr bool is_one_of = (std::is_same_v<T, Ts> || ...);

/// The cclDataType_t of U (cv-unqualified) as an int, or -1 when U has none.
template <class U>
consteval int datatype_code() {
  if constexpr (std::is_same_v<U, char>) {
    return cclInt8;  // whatever the signedness of char on this platform
  } else if constexpr (is_one_of<U, signed char, short, int, long, long long>) {
    return sizeof(U) == 1 ? cclInt8 : sizeof(U) == 4 ? cclInt32 : sizeof(U) == 8 ? cclInt64 : -1;
  } else if constexpr (is_one_of<U, unsigned char, unsigned short, unsigned, unsigned long,
                                 unsigned long long>) {
    return sizeof(U) == 1 ? cclUint8 : sizeof(U) == 4 ? cclUint32 : sizeof(U) == 8 ? cclUint64 : -1;
  } else if constexpr (std::is_same_v<U, float> && sizeof(float) == 4) {
    return cclFloat32;
  } else if constexpr (std::is_same_v<U, double> && sizeof(double) == 8) {
    return cclFloat64;
  } else if constexpr (std::is_same_v<U, half>) {
    return cclFloat16;
  } else if constexpr (std::is_same_v<U, bfloat16>) {
    return cclBfloat16;
  } else if constexpr (std::is_same_v<U, fp8_e4m3>) {
    return cclFloat8e4m3;
  } else if constexpr (std::is_same_v<U, fp8_e5m2>) {
    return cclFloat8e5m2;
  } else {
    return -1;
  }
}

}  // namespace detail

/// True when T (cv-qualifiers ignored) has a cclDataType_t.
template <class T>
inline constexpr bool is_supported_type_v = detail::datatype_code<std::remove_cv_t<T>>() >= 0;

/**
 * @brief The cclDataType_t of element type T; any other T fails to compile with a clear message.
 *
 * int8_t/char -> cclInt8, uint8_t -> cclUint8, int32_t, uint32_t, int64_t, uint64_t (and the
 * other integer types of those sizes), float -> cclFloat32, double -> cclFloat64, ccl::half,
 * ccl::bfloat16, ccl::fp8_e4m3, ccl::fp8_e5m2.
 */
template <class T>
struct datatype_traits {
  static_assert(is_supported_type_v<T>,
                "ccl: T is not a supported element type; use int8_t, uint8_t, char, int32_t, "
                "uint32_t, int64_t, uint64_t, float, double, ccl::half, ccl::bfloat16, "
                "ccl::fp8_e4m3 or ccl::fp8_e5m2");
  /// The datatype (cclInt8 for an unsupported T, after the static_assert above fired).
  static constexpr cclDataType_t value = static_cast<cclDataType_t>(
      is_supported_type_v<T> ? detail::datatype_code<std::remove_cv_t<T>>() : 0);
};

/// The cclDataType_t of element type T, e.g. `ccl::datatype_of<float> == cclFloat32`.
template <class T>
inline constexpr cclDataType_t datatype_of = datatype_traits<T>::value;

namespace detail {

/// A contiguous sized range that outlives the call (an lvalue container, a span, a C array).
template <class R>
concept buffer = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    std::ranges::borrowed_range<R>;
/// The element type of a buffer, with its const if it has one.
template <class R>
using element_t = std::remove_reference_t<std::ranges::range_reference_t<R>>;
/// A buffer that the library may write.
template <class R>
concept mutable_buffer = buffer<R> && !std::is_const_v<element_t<R>>;

template <class R>
std::span<element_t<R>> as_span(R&& range) {
  return std::span<element_t<R>>(std::ranges::data(range), std::ranges::size(range));
}

/// Checks that send and recv hold the same element type; returns the datatype.
template <class S, class R>
constexpr cclDataType_t pair_datatype() {
  static_assert(std::is_same_v<std::remove_cv_t<element_t<S>>, element_t<R>>,
                "ccl: send and recv must have the same element type");
  return datatype_of<element_t<R>>;
}

}  // namespace detail

class Event;

/**
 * @brief An in-order queue of host work (cclStream_t), run by a thread of its own. Move-only.
 *
 * An operation given a stream is queued and returns at once: its buffers must stay valid until
 * synchronize() (or the Stream's destruction, which waits for the queued work).
 * @code
 * ccl::Stream stream;
 * comm.all_reduce(x, cclSum, stream);  // queued
 * stream.synchronize();                // x holds the result; throws if the work failed
 * @endcode
 */
class Stream {
 public:
  /// Creates a stream (cclStreamCreate); throws ccl::Error on failure.
  Stream() { detail::check(cclStreamCreate(&stream_), "cclStreamCreate"); }
  /// Takes ownership of `stream` (from cclStreamCreate).
  explicit Stream(cclStream_t stream) noexcept : stream_(stream) {}
  /// Waits for the queued work and destroys the stream; never throws.
  ~Stream() { reset(); }
  /// Moves the stream; `other` becomes empty.
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  /// Destroys this stream (after its work), then takes `other`'s.
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      reset();
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// Waits for all queued work; throws the first error of that work (see Communicator::
  /// last_error() of the communicator it ran on for the detail).
  void synchronize() {
    cclResult_t result = cclStreamSynchronize(stream_);
    if (result == cclSuccess) return;
    if (stream_ == nullptr) detail::throw_result(result, "cclStreamSynchronize", nullptr);
    throw Error(result, std::string("cclStreamSynchronize: ") + cclGetErrorString(result) +
                            ": queued work failed (Communicator::last_error() says why)");
  }
  /// Later work queued here waits until `event`'s work is done (cclStreamWaitEvent).
  void wait(const Event& event);
  /// True when all queued work is done, false while some runs; throws the work's first error.
  bool query() {
    cclResult_t result = cclStreamQuery(stream_);
    if (result == cclInProgress) return false;
    detail::check(result, "cclStreamQuery");
    return true;
  }
  /// The C handle (NULL when empty).
  cclStream_t get() const noexcept { return stream_; }
  /// Gives up ownership: returns the handle and leaves this empty.
  cclStream_t release() noexcept { return std::exchange(stream_, nullptr); }
  /// True unless empty (moved from or released).
  explicit operator bool() const noexcept { return stream_ != nullptr; }

 private:
  void reset() noexcept {
    if (stream_ != nullptr) (void)cclStreamDestroy(std::exchange(stream_, nullptr));
  }
  cclStream_t stream_ = nullptr;
};

/**
 * @brief Where an operation runs, the last argument of every collective: nothing or nullptr
 * runs it now (the call returns with the result in place); a Stream, by pointer or reference,
 * queues it there.
 */
class StreamRef {
 public:
  /// Blocking: the call returns when the operation is complete.
  constexpr StreamRef() noexcept = default;
  /// Blocking, as the default.
  constexpr StreamRef(std::nullptr_t) noexcept {}
  /// Queued on `*stream`, or blocking if `stream` is nullptr.
  StreamRef(Stream* stream) noexcept : stream_(stream != nullptr ? stream->get() : nullptr) {}
  /// Queued on `stream`.
  StreamRef(Stream& stream) noexcept : stream_(stream.get()) {}
  /// The C handle (NULL: blocking).
  cclStream_t get() const noexcept { return stream_; }

 private:
  cclStream_t stream_ = nullptr;
};

/**
 * @brief A point in a stream's work (cclEvent_t), as a CUDA event: any thread may record, query,
 * synchronize or wait on it. Move-only.
 *
 * An event never recorded counts as complete; record() moves it to the work queued so far. It
 * reports the error of a failed operation queued before it.
 * @code
 * ccl::Stream stream;
 * ccl::Event reduced;
 * comm.all_reduce(grads, cclSum, stream);  // queued
 * reduced.record(stream);
 * // ... compute while the allreduce runs ...
 * reduced.synchronize();                   // grads hold the sum; throws if the allreduce failed
 * @endcode
 */
class Event {
 public:
  /// Creates an event (cclEventCreate); throws ccl::Error on failure.
  Event() { detail::check(cclEventCreate(&event_), "cclEventCreate"); }
  /// Takes ownership of `event` (from cclEventCreate).
  explicit Event(cclEvent_t event) noexcept : event_(event) {}
  /// Destroys the event; the work it marks goes on. Never throws.
  ~Event() { reset(); }
  /// Moves the event; `other` becomes empty.
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  /// Destroys this event, then takes `other`'s.
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      reset();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Marks the work queued on `stream` so far (cclEventRecord; nullptr: nothing, complete).
  void record(StreamRef stream) {
    detail::check(cclEventRecord(event_, stream.get()), "cclEventRecord");
  }
  /// True when the marked work is done, false while it runs; throws the error of failed work.
  bool query() {
    const cclResult_t result = cclEventQuery(event_);
    if (result == cclInProgress) return false;
    if (result != cclSuccess) failed(result, "cclEventQuery");
    return true;
  }
  /// Waits (bounded by the timeout) until the marked work is done; throws the error of failed
  /// work, or cclTimeout.
  void synchronize() {
    const cclResult_t result = cclEventSynchronize(event_);
    if (result != cclSuccess) failed(result, "cclEventSynchronize");
  }
  /// The C handle (NULL when empty).
  cclEvent_t get() const noexcept { return event_; }
  /// Gives up ownership: returns the handle and leaves this empty.
  cclEvent_t release() noexcept { return std::exchange(event_, nullptr); }
  /// True unless empty (moved from or released).
  explicit operator bool() const noexcept { return event_ != nullptr; }

 private:
  [[noreturn]] void failed(cclResult_t result, const char* function) const {
    if (event_ == nullptr) detail::throw_result(result, function, nullptr);
    throw Error(result, std::string(function) + ": " + cclGetErrorString(result) +
                            ": the marked work failed (Communicator::last_error() says why)");
  }
  void reset() noexcept {
    if (event_ != nullptr) (void)cclEventDestroy(std::exchange(event_, nullptr));
  }
  cclEvent_t event_ = nullptr;
};

inline void Stream::wait(const Event& event) {
  detail::check(cclStreamWaitEvent(stream_, event.get()), "cclStreamWaitEvent");
}

/// The rendezvous token of a communicator (cclUniqueId): made by one rank, copied to the others.
using UniqueId = cclUniqueId;

/**
 * @brief Makes a rendezvous token; this process serves the rendezvous until all ranks joined.
 * @code
 * ccl::UniqueId id;
 * if (my_rank == 0) id = ccl::get_unique_id();
 * // ... send id (sizeof(id) bytes) to the other ranks, by MPI, a file, a socket ...
 * auto comm = ccl::Communicator::init_rank(nranks, id, my_rank);
 * @endcode
 */
inline UniqueId get_unique_id() {
  UniqueId id{};
  detail::check(cclGetUniqueId(&id), "cclGetUniqueId");
  return id;
}

/// The library's version, major*10000 + minor*100 + patch (cclGetVersion).
inline int version() {
  int v = 0;
  detail::check(cclGetVersion(&v), "cclGetVersion");
  return v;
}

/// This host's topology as ccl sees it: the text ccl-topo prints (cclGetTopologyText).
inline std::string topology_text() {
  size_t length = 0;
  detail::check(cclGetTopologyText(nullptr, 0, &length), "cclGetTopologyText");
  std::string text(length + 1, '\0');
  detail::check(cclGetTopologyText(text.data(), text.size(), &length), "cclGetTopologyText");
  text.resize(std::min(length, text.size() - 1));
  return text;
}

/**
 * @brief Communicator settings (cclConfig_t); every field left unset takes the library default.
 * @code
 * ccl::Config config{.timeout = std::chrono::seconds(30), .name = "workers"};
 * @endcode
 */
struct Config {
  // The initializers ({}) keep -Wextra quiet about the fields a designated initializer omits.
  /// Bound on every wait of the communicator (default: CCL_TIMEOUT); must be positive.
  std::optional<std::chrono::milliseconds> timeout{};
  /// Name shown in logs (empty: none).
  std::string name{};
  /// cclConfig_t::blocking (default: blocking). With false, init, split and the operations on
  /// the default stream return at once and go on in the background, in order; poll
  /// Communicator::async_error() until it is no longer cclInProgress.
  std::optional<bool> blocking{};
};

namespace detail {
/// The C form of `config`; it points into config.name, so it lives no longer than `config`.
inline cclConfig_t to_c(const Config& config) {
  cclConfig_t c = CCL_CONFIG_INITIALIZER;
  if (config.timeout) {
    const auto ms = config.timeout->count();
    if (ms <= 0 || ms > INT_MAX) {
      throw Error(cclInvalidArgument, "ccl::Config: timeout " + std::to_string(ms) +
                                          " ms must be in [1, " + std::to_string(INT_MAX) + "]");
    }
    c.timeoutMs = static_cast<int>(ms);
  }
  if (!config.name.empty()) c.commName = config.name.c_str();
  if (config.blocking) c.blocking = *config.blocking ? 1 : 0;
  return c;
}
}  // namespace detail

/**
 * @brief A reduction operation owned by a communicator (from make_premul_sum). Move-only; the
 * destructor calls cclRedOpDestroy. Destroy it before its communicator. Converts to cclRedOp_t.
 */
class RedOp {
 public:
  /// An empty op (any collective given it fails with cclInvalidArgument).
  RedOp() noexcept = default;
  /// Takes ownership of `op`, created on `comm` (which must outlive this).
  RedOp(cclRedOp_t op, cclComm_t comm) noexcept : op_(op), comm_(comm) {}
  /// Destroys the op (cclRedOpDestroy); never throws.
  ~RedOp() { reset(); }
  /// Moves the op; `other` becomes empty.
  RedOp(RedOp&& other) noexcept
      : op_(std::exchange(other.op_, cclMaxRedOp)), comm_(std::exchange(other.comm_, nullptr)) {}
  /// Destroys this op, then takes `other`'s.
  RedOp& operator=(RedOp&& other) noexcept {
    if (this != &other) {
      reset();
      op_ = std::exchange(other.op_, cclMaxRedOp);
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  RedOp(const RedOp&) = delete;
  RedOp& operator=(const RedOp&) = delete;

  /// The C value to pass as a reduction op.
  cclRedOp_t get() const noexcept { return op_; }
  /// Lets a RedOp stand where a cclRedOp_t is expected.
  operator cclRedOp_t() const noexcept { return op_; }
  /// True unless empty.
  explicit operator bool() const noexcept { return comm_ != nullptr; }

 private:
  void reset() noexcept {
    if (comm_ != nullptr) (void)cclRedOpDestroy(op_, std::exchange(comm_, nullptr));
    op_ = cclMaxRedOp;
  }
  cclRedOp_t op_ = cclMaxRedOp;  // not a valid op: an empty RedOp cannot pass for cclSum
  cclComm_t comm_ = nullptr;
};

namespace detail {
inline std::string str(std::size_t n) { return std::to_string(n); }
}  // namespace detail

/**
 * @brief A buffer registered with a communicator (cclCommRegister), deregistered when this goes
 * out of scope (cclCommDeregister). Move-only; must not outlive its communicator or its memory.
 * @code
 * std::vector<float> grad(1 << 20);
 * ccl::Registration reg = comm.register_buffer(std::span(grad));
 * for (int step = 0; step < 100; ++step) comm.all_reduce(grad, cclSum);  // registered once
 * @endcode
 */
class Registration {
 public:
  Registration() noexcept = default;
  /// Takes ownership of `handle` from cclCommRegister on `comm`.
  Registration(cclComm_t comm, void* handle) noexcept : comm_(comm), handle_(handle) {}
  ~Registration() { reset(); }
  Registration(Registration&& other) noexcept
      : comm_(std::exchange(other.comm_, nullptr)),
        handle_(std::exchange(other.handle_, nullptr)) {}
  Registration& operator=(Registration&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  explicit operator bool() const noexcept { return handle_ != nullptr; }
  void* handle() const noexcept { return handle_; }
  /// Deregisters now (never throws: a failure is in cclGetLastError of the communicator).
  void reset() noexcept {
    if (handle_ != nullptr) (void)cclCommDeregister(comm_, handle_);
    comm_ = nullptr;
    handle_ = nullptr;
  }

 private:
  cclComm_t comm_ = nullptr;
  void* handle_ = nullptr;
};

/**
 * @brief A communicator (cclComm_t): RAII and move-only; the destructor calls cclCommDestroy.
 *
 * Buffers are contiguous ranges that outlive the call: std::span, an lvalue std::vector or
 * std::array, a C array. The element type gives the datatype (see datatype_of); send and recv
 * must have the same one. Sizes the C call cannot check are checked here (ccl::Error with
 * cclInvalidArgument naming the argument). The last argument of every operation is a StreamRef:
 * omitted or nullptr, the call returns when the result is in place; a Stream queues it there.
 * Every rank must call the same collectives in the same order. Any failure throws ccl::Error.
 *
 * @code
 * // One rank of `nranks`; `id` from ccl::get_unique_id() on rank 0, shared by other means.
 * auto comm = ccl::Communicator::init_rank(nranks, id, rank,
 *                                          ccl::Config{.timeout = std::chrono::seconds(30)});
 * std::vector<float> grad(1024, 1.0f), sum(1024);
 * comm.all_reduce(grad, sum);          // sum[i] == nranks
 * comm.all_reduce(grad, cclAvg);       // in place: grad[i] == 1
 * std::vector<int> all(comm.size());
 * int mine = comm.rank();
 * comm.all_gather(std::span(&mine, 1), all);  // all[r] == r
 * @endcode
 */
class Communicator {
 public:
  /// An empty communicator (operator bool is false; operations on it throw).
  Communicator() noexcept = default;
  /// Takes ownership of `comm` (from the C API).
  explicit Communicator(cclComm_t comm) noexcept : comm_(comm) {}
  /// Destroys the communicator (cclCommDestroy); never throws.
  ~Communicator() { reset(); }
  /// Moves the communicator; `other` becomes empty.
  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  /// Destroys this communicator, then takes `other`'s.
  Communicator& operator=(Communicator&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, nullptr);
    }
    return *this;
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /**
   * @brief Joins the communicator described by the launcher's variables (cclCommInitFromEnv):
   * cclrun, mpirun, Hydra, srun or torchrun.
   * @code
   * auto comm = ccl::Communicator::from_env();  // under `cclrun -np 4 ./prog`
   * @endcode
   */
  static Communicator from_env() {
    cclComm_t comm = nullptr;
    detail::check(cclCommInitFromEnv(&comm), "cclCommInitFromEnv");
    return Communicator(comm);
  }

  /// Joins communicator `id` as `rank` of `nranks` (cclCommInitRank); blocks until all joined.
  static Communicator init_rank(int nranks, const UniqueId& id, int rank) {
    cclComm_t comm = nullptr;
    detail::check(cclCommInitRank(&comm, nranks, id, rank), "cclCommInitRank");
    return Communicator(comm);
  }

  /// As init_rank(nranks, id, rank), with settings (cclCommInitRankConfig).
  static Communicator init_rank(int nranks, const UniqueId& id, int rank, const Config& config) {
    cclConfig_t c = detail::to_c(config);
    cclComm_t comm = nullptr;
    detail::check(cclCommInitRankConfig(&comm, nranks, id, rank, &c), "cclCommInitRankConfig");
    return Communicator(comm);
  }

  /// This process's rank, in [0, size()).
  int rank() const {
    int r = 0;
    detail::check(cclCommUserRank(comm_, &r), "cclCommUserRank", comm_);
    return r;
  }
  /// The number of ranks.
  int size() const {
    int n = 0;
    detail::check(cclCommCount(comm_, &n), "cclCommCount", comm_);
    return n;
  }
  /// The transport that reaches `peer` ("shm", "tcp", "loopback"; "self" for this rank).
  std::string peer_transport(int peer) const {
    const char* name = nullptr;
    detail::check(cclCommPeerTransport(comm_, peer, &name), "cclCommPeerTransport", comm_);
    return name;
  }
  /// The C handle (NULL when empty), for calling the C API directly.
  cclComm_t get() const noexcept { return comm_; }

  /// Registers `bytes` at `data` (cclCommRegister): calls whose buffers lie inside reuse it.
  Registration register_buffer(void* data, size_t bytes) {
    void* handle = nullptr;
    detail::check(cclCommRegister(comm_, data, bytes, &handle), "cclCommRegister", comm_);
    return Registration(comm_, handle);
  }
  template <class T>
  Registration register_buffer(std::span<T> data) {
    return register_buffer(static_cast<void*>(const_cast<std::remove_const_t<T>*>(data.data())),
                           data.size_bytes());
  }
  /// Gives up ownership: returns the handle and leaves this empty.
  cclComm_t release() noexcept { return std::exchange(comm_, nullptr); }
  /// True unless empty (default-constructed, moved from, released, aborted).
  explicit operator bool() const noexcept { return comm_ != nullptr; }

  /// The asynchronous error state (cclCommGetAsyncError): cclSuccess while healthy.
  cclResult_t async_error() const {
    cclResult_t error = cclSuccess;
    detail::check(cclCommGetAsyncError(comm_, &error), "cclCommGetAsyncError", comm_);
    return error;
  }
  /// The detail of the last failure on this communicator (cclGetLastError), e.g. of queued work.
  std::string last_error() const { return comm_ != nullptr ? cclGetLastError(comm_) : ""; }

  /// Completes the outstanding operations (cclCommFinalize); the destructor still frees it.
  void finalize() { detail::check(cclCommFinalize(comm_), "cclCommFinalize", comm_); }

  /// Aborts (cclCommAbort): stops pending operations and frees the communicator, which
  /// becomes empty. Does nothing on an empty one.
  void abort() {
    cclComm_t comm = std::exchange(comm_, nullptr);
    if (comm != nullptr) detail::check(cclCommAbort(comm), "cclCommAbort");
  }

  /**
   * @brief Splits by `color` (cclCommSplit, collective over all ranks): the ranks with the same
   * color form a communicator, ordered by `key` then rank. Settings as this communicator's.
   * @return the new communicator, or std::nullopt for color CCL_SPLIT_NOCOLOR.
   * @code
   * auto half = comm.split(comm.rank() % 2, comm.rank());  // even and odd ranks
   * @endcode
   */
  std::optional<Communicator> split(int color, int key) { return split_with(color, key, nullptr); }
  /// As split(color, key), with the new communicator's settings.
  std::optional<Communicator> split(int color, int key, const Config& config) {
    cclConfig_t c = detail::to_c(config);
    return split_with(color, key, &c);
  }

  /// Revokes (cclCommRevoke): every pending and later operation of this communicator, on every
  /// live rank, fails with cclRemoteError; it can still agree, shrink and be destroyed.
  void revoke() { detail::check(cclCommRevoke(comm_, 0), "cclCommRevoke", comm_); }
  /// The bitwise AND of every live rank's `flag`, the same on each (cclCommAgree).
  int agree(int flag) {
    detail::check(cclCommAgree(comm_, &flag), "cclCommAgree", comm_);
    return flag;
  }
  /// The ranks this communicator knows have failed, increasing (cclCommGetFailedRanks).
  std::vector<int> failed_ranks() const {
    int count = 0;
    detail::check(cclCommGetFailedRanks(comm_, nullptr, 0, &count), "cclCommGetFailedRanks", comm_);
    std::vector<int> ranks(static_cast<std::size_t>(count));
    detail::check(cclCommGetFailedRanks(comm_, ranks.data(), count, &count),
                  "cclCommGetFailedRanks", comm_);
    ranks.resize(std::min(ranks.size(), static_cast<std::size_t>(count)));
    return ranks;
  }
  /**
   * @brief Shrinks (cclCommShrink): every rank not in `exclude` calls it; with `abort_first`
   * (CCL_SHRINK_ABORT) the operation in flight is aborted first, and an empty `exclude` means
   * the ranks found dead. Survivors keep their order. Throws ccl::Error (cclRemoteError) if a
   * rank that should take part died during it: call it again.
   * @code
   * try { comm.all_reduce(grad); } catch (const ccl::Error&) {
   *   comm.revoke();
   *   comm = comm.shrink({}, true);  // the survivors, renumbered in order
   * }
   * @endcode
   */
  Communicator shrink(std::span<const int> exclude, bool abort_first) {
    cclComm_t child = nullptr;
    detail::check(
        cclCommShrink(comm_, const_cast<int*>(exclude.data()), static_cast<int>(exclude.size()),
                      &child, nullptr, abort_first ? CCL_SHRINK_ABORT : CCL_SHRINK_DEFAULT),
        "cclCommShrink", comm_);
    return Communicator(child);
  }
  Communicator shrink(std::initializer_list<int> exclude, bool abort_first) {
    return shrink(std::span<const int>(exclude.begin(), exclude.size()), abort_first);
  }
  /// Grows back to `nranks` (cclCommGrow): every member calls it and keeps its rank; the
  /// newcomers call Communicator::join_grown with the same `id` (get_unique_id() on a member).
  Communicator grow(int nranks, const UniqueId& id) {
    cclComm_t grown = nullptr;
    detail::check(cclCommGrow(comm_, nranks, &id, -1, &grown, nullptr), "cclCommGrow", comm_);
    return Communicator(grown);
  }
  /// A newcomer's side of grow(): joins as `rank` (at least the old size) of `nranks`.
  static Communicator join_grown(int nranks, const UniqueId& id, int rank) {
    cclComm_t grown = nullptr;
    detail::check(cclCommGrow(nullptr, nranks, &id, rank, &grown, nullptr), "cclCommGrow");
    return Communicator(grown);
  }

  /**
   * @brief Reduces `send` over all ranks into `recv` (cclAllReduce); sizes must be equal.
   * @code
   * comm.all_reduce(std::span<const float>(in), std::span<float>(out), cclMax);
   * @endcode
   */
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void all_reduce(Send&& send, Recv&& recv, cclRedOp_t op = cclSum, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    if (s.size() != r.size()) {
      detail::invalid_argument("all_reduce", "recv.size() " + detail::str(r.size()) +
                                                 " must equal send.size() " +
                                                 detail::str(s.size()));
    }
    detail::check(cclAllReduce(s.data(), r.data(), s.size(), type, op, comm_, stream.get()),
                  "cclAllReduce", comm_);
  }
  /// All-reduce in place: `data` is the input and the result.
  template <detail::mutable_buffer Data>
  void all_reduce(Data&& data, cclRedOp_t op = cclSum, StreamRef stream = {}) {
    auto d = detail::as_span(data);
    detail::check(cclAllReduce(d.data(), d.data(), d.size(), datatype_of<detail::element_t<Data>>,
                               op, comm_, stream.get()),
                  "cclAllReduce", comm_);
  }

  /**
   * @brief Copies `send` of rank `root` into `recv` of every rank (cclBroadcast). On the root
   * the sizes must be equal; elsewhere `send` is not used (may be empty).
   * @code
   * comm.broadcast(params, 0);  // in place: every rank gets rank 0's params
   * @endcode
   */
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void broadcast(Send&& send, Recv&& recv, int root, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    if (s.size() != r.size() && rank() == root) {
      detail::invalid_argument("broadcast", "on the root, send.size() " + detail::str(s.size()) +
                                                " must equal recv.size() " + detail::str(r.size()));
    }
    detail::check(cclBroadcast(s.data(), r.data(), r.size(), type, root, comm_, stream.get()),
                  "cclBroadcast", comm_);
  }
  /// Broadcast in place: `data` of rank `root` is copied into `data` of every rank.
  template <detail::mutable_buffer Data>
  void broadcast(Data&& data, int root, StreamRef stream = {}) {
    auto d = detail::as_span(data);
    detail::check(cclBroadcast(d.data(), d.data(), d.size(), datatype_of<detail::element_t<Data>>,
                               root, comm_, stream.get()),
                  "cclBroadcast", comm_);
  }

  /// Reduces `send` over all ranks into `recv` of rank `root` (cclReduce). On the root the
  /// sizes must be equal; elsewhere `recv` is not used (may be empty).
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void reduce(Send&& send, Recv&& recv, cclRedOp_t op, int root, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    if (s.size() != r.size() && rank() == root) {
      detail::invalid_argument("reduce", "on the root, recv.size() " + detail::str(r.size()) +
                                             " must equal send.size() " + detail::str(s.size()));
    }
    detail::check(cclReduce(s.data(), r.data(), s.size(), type, op, root, comm_, stream.get()),
                  "cclReduce", comm_);
  }
  /// Reduce in place: the result lands in `data` of rank `root`.
  template <detail::mutable_buffer Data>
  void reduce(Data&& data, cclRedOp_t op, int root, StreamRef stream = {}) {
    auto d = detail::as_span(data);
    detail::check(cclReduce(d.data(), d.data(), d.size(), datatype_of<detail::element_t<Data>>, op,
                            root, comm_, stream.get()),
                  "cclReduce", comm_);
  }

  /**
   * @brief Gathers `send` of every rank into `recv`, rank r's at r * send.size()
   * (cclAllGather); recv.size() must be size() * send.size().
   * @code
   * std::array<int, 2> mine{comm.rank(), 7};
   * std::vector<int> all(comm.size() * 2);
   * comm.all_gather(mine, all);  // all = {0, 7, 1, 7, ...}
   * @endcode
   */
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void all_gather(Send&& send, Recv&& recv, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    const std::size_t n = nranks();
    if (r.size() % n != 0 || r.size() / n != s.size()) {
      detail::invalid_argument("all_gather", "recv.size() " + detail::str(r.size()) +
                                                 " must be size() " + detail::str(n) +
                                                 " * send.size() " + detail::str(s.size()));
    }
    detail::check(cclAllGather(s.data(), r.data(), s.size(), type, comm_, stream.get()),
                  "cclAllGather", comm_);
  }
  /// All-gather in place: `data` has size() blocks; this rank's block (number rank()) is sent.
  template <detail::mutable_buffer Data>
  void all_gather(Data&& data, StreamRef stream = {}) {
    auto d = detail::as_span(data);
    const std::size_t n = nranks();
    if (d.size() % n != 0) {
      detail::invalid_argument("all_gather", "data.size() " + detail::str(d.size()) +
                                                 " must be a multiple of size() " + detail::str(n));
    }
    const std::size_t block = d.size() / n;
    detail::check(cclAllGather(d.data() + block * static_cast<std::size_t>(rank()), d.data(), block,
                               datatype_of<detail::element_t<Data>>, comm_, stream.get()),
                  "cclAllGather", comm_);
  }

  /// Reduces `send` (size() blocks of recv.size()) over all ranks; block r lands in `recv` of
  /// rank r (cclReduceScatter). send.size() must be size() * recv.size().
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void reduce_scatter(Send&& send, Recv&& recv, cclRedOp_t op = cclSum, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    const std::size_t n = nranks();
    if (s.size() % n != 0 || s.size() / n != r.size()) {
      detail::invalid_argument("reduce_scatter", "send.size() " + detail::str(s.size()) +
                                                     " must be size() " + detail::str(n) +
                                                     " * recv.size() " + detail::str(r.size()));
    }
    detail::check(cclReduceScatter(s.data(), r.data(), r.size(), type, op, comm_, stream.get()),
                  "cclReduceScatter", comm_);
  }
  /// Reduce-scatter in place over size() blocks of `data`; returns this rank's block, which
  /// holds the result (the other blocks are left unspecified).
  template <detail::mutable_buffer Data>
  std::span<detail::element_t<Data>> reduce_scatter(Data&& data, cclRedOp_t op = cclSum,
                                                    StreamRef stream = {}) {
    auto d = detail::as_span(data);
    const std::size_t n = nranks();
    if (d.size() % n != 0) {
      detail::invalid_argument("reduce_scatter", "data.size() " + detail::str(d.size()) +
                                                     " must be a multiple of size() " +
                                                     detail::str(n));
    }
    const std::size_t block = d.size() / n;
    auto mine = d.subspan(block * static_cast<std::size_t>(rank()), block);
    detail::check(cclReduceScatter(d.data(), mine.data(), block,
                                   datatype_of<detail::element_t<Data>>, op, comm_, stream.get()),
                  "cclReduceScatter", comm_);
    return mine;
  }

  /// Block p of `send` goes to rank p, which stores it as block r (the sender) of `recv`
  /// (cclAlltoAll). Sizes must be equal and a multiple of size().
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void all_to_all(Send&& send, Recv&& recv, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    const std::size_t n = nranks();
    if (s.size() != r.size() || s.size() % n != 0) {
      detail::invalid_argument("all_to_all", "send.size() " + detail::str(s.size()) +
                                                 " and recv.size() " + detail::str(r.size()) +
                                                 " must be equal and a multiple of size() " +
                                                 detail::str(n));
    }
    detail::check(cclAlltoAll(s.data(), r.data(), s.size() / n, type, comm_, stream.get()),
                  "cclAlltoAll", comm_);
  }

  /**
   * @brief Uneven all-gather (cclAllGatherV): rank q's `send` lands at recv[displs[q]]...;
   * recv_counts[q] is rank q's send.size(). recv_counts and displs have size() entries.
   * The count arrays must stay valid as long as the buffers (until the stream is synchronized).
   * @code
   * std::vector<size_t> counts = {1, 2}, displs = {0, 1};  // 2 ranks: 1 + 2 elements
   * std::vector<float> mine(counts[comm.rank()], 1.0f), all(3);
   * comm.all_gather_v(mine, all, counts, displs);
   * @endcode
   */
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void all_gather_v(Send&& send, Recv&& recv, std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> displs, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    check_blocks("all_gather_v", "recv", r.size(), "recv_counts", recv_counts, "displs", displs);
    const std::size_t me = static_cast<std::size_t>(rank());
    if (recv_counts[me] != s.size()) {
      detail::invalid_argument("all_gather_v",
                               "recv_counts[rank()] " + detail::str(recv_counts[me]) +
                                   " must equal send.size() " + detail::str(s.size()));
    }
    detail::check(cclAllGatherV(s.data(), s.size(), r.data(), recv_counts.data(), displs.data(),
                                type, comm_, stream.get()),
                  "cclAllGatherV", comm_);
  }

  /// Uneven all-to-all (cclAlltoAllV): send_counts[p] elements at send[send_displs[p]] go to
  /// rank p, which stores them at recv[recv_displs[q]] (q the sender; its recv_counts[q] must
  /// match). Every array has size() entries and must stay valid as long as the buffers.
  template <detail::buffer Send, detail::mutable_buffer Recv>
  void all_to_all_v(Send&& send, std::span<const std::size_t> send_counts,
                    std::span<const std::size_t> send_displs, Recv&& recv,
                    std::span<const std::size_t> recv_counts,
                    std::span<const std::size_t> recv_displs, StreamRef stream = {}) {
    constexpr cclDataType_t type = detail::pair_datatype<Send, Recv>();
    auto s = detail::as_span(send);
    auto r = detail::as_span(recv);
    check_blocks("all_to_all_v", "send", s.size(), "send_counts", send_counts, "send_displs",
                 send_displs);
    check_blocks("all_to_all_v", "recv", r.size(), "recv_counts", recv_counts, "recv_displs",
                 recv_displs);
    detail::check(cclAlltoAllV(s.data(), send_counts.data(), send_displs.data(), r.data(),
                               recv_counts.data(), recv_displs.data(), type, comm_, stream.get()),
                  "cclAlltoAllV", comm_);
  }

  /**
   * @brief Sends `data` to rank `peer` (cclSend), which must post a matching recv. Outside a
   * Group a blocking send returns when complete, so exchanges between ranks belong in a Group.
   * @code
   * {
   *   ccl::Group group;
   *   comm.send(out, (comm.rank() + 1) % comm.size());
   *   comm.recv(in, (comm.rank() + comm.size() - 1) % comm.size());
   *   group.end();  // both are issued here, without deadlock
   * }
   * @endcode
   */
  template <detail::buffer Data>
  void send(Data&& data, int peer, StreamRef stream = {}) {
    auto d = detail::as_span(data);
    detail::check(cclSend(d.data(), d.size(), datatype_of<detail::element_t<Data>>, peer, comm_,
                          stream.get()),
                  "cclSend", comm_);
  }
  /// Receives `data` from rank `peer` (cclRecv); the peer sends the same number of elements.
  template <detail::mutable_buffer Data>
  void recv(Data&& data, int peer, StreamRef stream = {}) {
    auto d = detail::as_span(data);
    detail::check(cclRecv(d.data(), d.size(), datatype_of<detail::element_t<Data>>, peer, comm_,
                          stream.get()),
                  "cclRecv", comm_);
  }

  /// Receives `data` from whichever peer's message arrives first and returns that peer
  /// (cclRecvAnySource: blocks until the message is in, after the communicator's queued work).
  template <detail::mutable_buffer Data>
  int recv_any_source(Data&& data, StreamRef stream = {}) {
    auto d = detail::as_span(data);
    int peer = -1;
    detail::check(cclRecvAnySource(d.data(), d.size(), datatype_of<detail::element_t<Data>>, &peer,
                                   comm_, stream.get()),
                  "cclRecvAnySource", comm_);
    return peer;
  }

  /// Returns (or, on a stream, completes) once every rank has called it (cclBarrier).
  void barrier(StreamRef stream = {}) {
    detail::check(cclBarrier(comm_, stream.get()), "cclBarrier", comm_);
  }

 private:
  void reset() noexcept {
    if (comm_ != nullptr) (void)cclCommDestroy(std::exchange(comm_, nullptr));
  }

  std::size_t nranks() const { return static_cast<std::size_t>(size()); }

  std::optional<Communicator> split_with(int color, int key, cclConfig_t* config) {
    cclComm_t child = nullptr;
    detail::check(cclCommSplit(comm_, color, key, &child, config), "cclCommSplit", comm_);
    if (child == nullptr) return std::nullopt;  // CCL_SPLIT_NOCOLOR
    return Communicator(child);
  }

  // Checks that `counts` and `displs` have size() entries and that each block lies in the
  // buffer `name` of `size` elements, which the C call cannot know.
  void check_blocks(const char* where, const char* name, std::size_t size, const char* counts_name,
                    std::span<const std::size_t> counts, const char* displs_name,
                    std::span<const std::size_t> displs) const {
    const std::size_t n = nranks();
    if (counts.size() != n || displs.size() != n) {
      detail::invalid_argument(where, std::string(counts_name) + ".size() " +
                                          detail::str(counts.size()) + " and " + displs_name +
                                          ".size() " + detail::str(displs.size()) +
                                          " must equal size() " + detail::str(n));
    }
    for (std::size_t q = 0; q < n; ++q) {
      if (counts[q] > size || displs[q] > size - counts[q]) {
        detail::invalid_argument(where, std::string(displs_name) + "[" + detail::str(q) + "] " +
                                            detail::str(displs[q]) + " + " + counts_name + "[" +
                                            detail::str(q) + "] " + detail::str(counts[q]) +
                                            " exceeds " + name + ".size() " + detail::str(size));
      }
    }
  }

  cclComm_t comm_ = nullptr;
};

/**
 * @brief Groups operations (cclGroupStart/cclGroupEnd): those called while a Group is open are
 * queued and issued together by end(), so send/recv pairs between ranks cannot deadlock.
 *
 * Call end() to issue them and learn whether that failed. If the Group is destroyed without
 * end() (e.g. an exception left the scope), the destructor calls cclGroupEnd itself and ignores
 * its result (a destructor must not throw); the queued operations then still run, and a peer's
 * failure shows in the communicator's next call. Not copyable or movable: it is a scope.
 * @code
 * ccl::Group group;
 * for (int peer = 0; peer < comm.size(); ++peer) {
 *   comm.send(std::span(out).subspan(peer * n, n), peer);
 *   comm.recv(std::span(in).subspan(peer * n, n), peer);
 * }
 * group.end();
 * @endcode
 */
class Group {
 public:
  /// Opens the group (cclGroupStart); throws ccl::Error on failure.
  Group() { detail::check(cclGroupStart(), "cclGroupStart"); }
  /// Calls cclGroupEnd if end() was not called, ignoring its result.
  ~Group() {
    if (open_) (void)cclGroupEnd();
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  /// Issues the grouped operations (cclGroupEnd); throws ccl::Error if that fails. Only once.
  void end() {
    if (!open_) throw Error(cclInvalidUsage, "ccl::Group::end: the group has already ended");
    open_ = false;
    detail::check(cclGroupEnd(), "cclGroupEnd");
  }

 private:
  bool open_ = true;
};

/**
 * @brief A reduction that multiplies each rank's input by `scalar`, then sums
 * (cclRedOpCreatePreMulSum); use it with collectives whose element type is T. The RedOp must be
 * destroyed before `comm`.
 * @code
 * ccl::RedOp mean = ccl::make_premul_sum(comm, 1.0f / comm.size());
 * comm.all_reduce(grad, mean);  // grad = the average over the ranks
 * @endcode
 */
template <class T>
RedOp make_premul_sum(Communicator& comm, T scalar) {
  cclRedOp_t op = cclMaxRedOp;
  detail::check(cclRedOpCreatePreMulSum(&op, &scalar, datatype_of<T>, 0, comm.get()),
                "cclRedOpCreatePreMulSum", comm.get());
  return RedOp(op, comm.get());
}

}  // namespace cpp_api
}  // namespace ccl

#endif  // CCL_CCL_HPP_
