/**
 * @file training/mesh.hpp
 * @brief A device mesh for 3D parallelism: tensor (tp) × pipeline (pp) × data (dp) parallel
 * communicators split from one world communicator, placed by where each rank runs.
 *
 * Part of the training layer (`#include <ccl/training.hpp>`, in libccl).
 *
 * Placement (place_mesh, a pure function): the world ranks are put in locality order (hosts in
 * order of their lowest rank; inside a host by locality key, then rank), and position p of that
 * order gets the coordinates
 *   tp = p % tp_size,  dp = (p / tp_size) % dp_size,  pp = p / (tp_size · dp_size),
 * Megatron-LM's order (tp fastest, pp slowest). tp is innermost, so a tp group is tp_size
 * neighbours in locality order: inside one host, on the same NUMA node / adjacent GPUs whenever
 * those hold a multiple of tp_size ranks. The pipeline is outermost: its stages are as far apart
 * as the job is wide, so they land on different hosts as soon as a host holds no more than
 * tp_size · dp_size ranks (2 hosts × 4 ranks at tp 2 × pp 2 × dp 2: one stage per host). That
 * puts the small point-to-point activation traffic on the slow links and keeps the large
 * gradient all-reduce of dp (a replica per tp group, repeated at every step) inside the host.
 * dp is the outermost *parallelism* (each dp index holds a whole tp × pp model replica) while pp
 * is the outermost *placement*. A shape whose tp groups would cross a host (some host's rank count
 * is not a multiple of tp) is refused: tensor parallelism over the network is almost never what
 * was meant, and a mistake in the launch should not run slowly.
 *
 * @code
 * ccl::Communicator world = ccl::Communicator::from_env();
 * // The caller knows where it runs: e.g. {gpu index} or {numa node}; {} when nothing is known.
 * auto mesh = ccl::training::DeviceMesh::create(
 *     world, {.tp = 4, .pp = 2, .dp = 1}, ccl::training::local_mesh_place({gpu}));
 * if (world.rank() == 0) std::cout << mesh.describe();
 * mesh.tp().all_reduce(partial_sums);  // over the 4 ranks of this tensor-parallel group
 * @endcode
 */
#ifndef CCL_TRAINING_MESH_HPP_
#define CCL_TRAINING_MESH_HPP_

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "../ccl.hpp"

namespace ccl::training {

/// The sizes of the three axes; tp · pp · dp must be the world size.
struct MeshShape {
  int tp = 1;
  int pp = 1;
  int dp = 1;
};

/// Where a rank runs, as its caller knows it (gathered from every rank by DeviceMesh::create).
struct MeshPlace {
  /// Ranks with equal host names share a machine.
  std::string host;
  /// A locality key inside the host, compared lexicographically: ranks whose keys sort next to
  /// each other are close. E.g. {gpu index}, {numa node, gpu}, or the topology's locality key
  /// of the rank's device (the depth-first position in the host's topology tree). Empty when
  /// unknown: then the rank order decides.
  std::vector<int> locality;
};

/// A rank's coordinates in the mesh.
struct MeshCoord {
  int tp = 0;
  int pp = 0;
  int dp = 0;
  friend bool operator==(const MeshCoord&, const MeshCoord&) = default;
};

/// The arguments of one Communicator::split: ranks with equal color form a group, ordered by key.
struct MeshSplit {
  int color = 0;
  int key = 0;
  friend bool operator==(const MeshSplit&, const MeshSplit&) = default;
};

/// One world rank's coordinates and the splits that make its three groups.
struct MeshRank {
  MeshCoord coord;
  MeshSplit tp;
  MeshSplit pp;
  MeshSplit dp;
};

enum class MeshAxis { Tp, Pp, Dp };

/// "tp", "pp" or "dp".
const char* mesh_axis_name(MeshAxis axis);

/// The result of place_mesh.
struct MeshPlacement {
  MeshShape shape;
  /// World ranks in mesh order: order[p] is the rank at position p (see the file comment).
  std::vector<int> order;
  /// By world rank.
  std::vector<MeshRank> ranks;

  /// The world ranks of `world_rank`'s group along `axis`, in group-rank order (by key).
  std::vector<int> group(MeshAxis axis, int world_rank) const;
  /// Every group along `axis`, each in group-rank order, groups by their lowest mesh position.
  std::vector<std::vector<int>> groups(MeshAxis axis) const;
};

/**
 * @brief Places `places.size()` ranks (places[r] is world rank r's) on a tp × pp × dp mesh.
 * Pure: no communicator. Throws ccl::Error (cclInvalidArgument) naming the argument when a size
 * is below 1, when tp · pp · dp is not the number of ranks, or when a tp group would cross hosts.
 */
MeshPlacement place_mesh(const MeshShape& shape, std::span<const MeshPlace> places);

/// The transport between world ranks `a` and `b` of one group along `axis`, as `a` sees it;
/// empty when unknown.
using MeshTransportOf = std::function<std::string(MeshAxis axis, int a, int b)>;

/**
 * @brief A printable description: one line per world rank (host, locality, tp/pp/dp), then each
 * group along each axis with its members and, where `transport_of` is given, the transport of
 * each pair ("0-1 shm"). Pure.
 */
std::string describe_mesh(const MeshPlacement& placement, std::span<const MeshPlace> places,
                          const MeshTransportOf& transport_of = {});

/// This process's place: the host name (gethostname) and the `locality` the caller gives.
MeshPlace local_mesh_place(std::vector<int> locality = {});

/**
 * @brief The tp, pp and dp communicators of this rank, split from one world communicator.
 *
 * create() is collective over `world`: it gathers every rank's place (all-gather), runs
 * place_mesh, splits `world` three times (tp, then pp, then dp), and gathers the transport each
 * rank uses to each member of its groups for describe(). Every rank must pass the same shape
 * (checked first: ccl::Error with cclInvalidUsage on every rank otherwise).
 */
class DeviceMesh {
 public:
  static DeviceMesh create(Communicator& world, const MeshShape& shape, const MeshPlace& place);

  /// This rank's world rank and coordinates.
  int world_rank() const { return world_rank_; }
  const MeshCoord& coord() const { return placement_.ranks[world_rank_].coord; }
  const MeshShape& shape() const { return placement_.shape; }

  /// This rank's group communicators; the rank in each is the coordinate along that axis.
  Communicator& tp() { return tp_; }
  Communicator& pp() { return pp_; }
  Communicator& dp() { return dp_; }
  Communicator& along(MeshAxis axis);

  const MeshPlacement& placement() const { return placement_; }
  /// Every world rank's place, by world rank.
  const std::vector<MeshPlace>& places() const { return places_; }

  /// describe_mesh with the transports of every pair in every group (the same text on all ranks).
  std::string describe() const;

 private:
  DeviceMesh() = default;

  int world_rank_ = 0;
  MeshPlacement placement_;
  std::vector<MeshPlace> places_;
  /// transports_[world rank][axis] lists that rank's transport to each member of its group.
  std::vector<std::vector<std::vector<std::string>>> transports_;
  Communicator tp_;
  Communicator pp_;
  Communicator dp_;
};

}  // namespace ccl::training

#endif  // CCL_TRAINING_MESH_HPP_
