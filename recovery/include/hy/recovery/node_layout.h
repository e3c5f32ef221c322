// Where a run's state lives on disk, node by node, and where replicas go.
//
// A run root holds one directory per node (failure domain: a host with its
// own disk), named by a node id that stays with the host across restarts
// (node_identity.h), whatever ranks run there. Several ranks may run on one
// node; each has a slot there (0, 1, ...: its order among the node's ranks)
// and a store of its own, since RocksDB allows one writer per store:
//
//   <root>/node-<k>/store          the store of slot 0 on node k
//   <root>/node-<k>/store-<s>      the store of slot s > 0
//   <root>/node-<k>/replica-<j>    copies of the parts of slot 0 of node j
//   <root>/node-<k>/replica-<j>-<s>  ... of slot s > 0 of node j
//   <root>/node-<k>/host           the host identity (node_identity.h)
//   <root>/node-<k>/worker.pid     the pid of slot 0's worker
//   <root>/node-<k>/worker-<s>.pid ... of slot s > 0
//
// Losing a node loses its directory. With replicas, every committed part of
// rank r (slot s on node nodes[r]) is also held by the next `replicas`
// nodes in ring order (nodes ordered by their lowest rank), each time by the
// rank of slot s there (mod its ranks): the ring rule of Gemini / NVRx, so
// one node's copies land on other nodes, spread over their ranks, and
// losing any `replicas` nodes leaves at least one copy of every part. With
// fewer other nodes than that (one host), the remaining copies go to other
// ranks in ring order, on nodes already holding one (its own included):
// they then guard against a lost process or store directory, not a lost
// host.
//
// Versions: a checkpoint of step s written by the job's generation g (one
// per start of the job) is version (s << kGenerationBits) | g, so a version
// a dead generation left prepared is never reused by a later one and the
// newest version is the newest step.
//
// Thread-safety: plain functions.
#ifndef HY_RECOVERY_NODE_LAYOUT_H_
#define HY_RECOVERY_NODE_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "hy/common/result.h"

namespace hy::recovery {

inline constexpr int kGenerationBits = 16;
inline constexpr uint32_t kMaxGeneration = (1u << kGenerationBits) - 1;

// Exit status of a worker that stopped because a peer failed (heartbeat
// lost, collective failed): restartable; the launcher keeps its node.
inline constexpr int kExitPeerFailed = 75;
// Exit status when recovery cannot go on (too few nodes, every copy of a
// part lost): restarting would not help.
inline constexpr int kExitUnrecoverable = 76;

std::string NodeDir(const std::string& root, int node);
std::string PrimaryStorePath(const std::string& root, int node, int slot = 0);
// The copies, on node `holder`, of the parts of slot `source_slot` of node
// `source`.
std::string ReplicaStorePath(const std::string& root, int holder, int source,
                             int source_slot = 0);
std::string WorkerPidPath(const std::string& root, int node, int slot = 0);

// Rank `rank`'s slot on its node: how many lower ranks run on nodes[rank].
// REQUIRES: 0 <= rank < nodes.size().
int SlotOf(int rank, const std::vector<int>& nodes);
// The ranks that run on node `node`, ascending.
std::vector<int> RanksOnNode(int node, const std::vector<int>& nodes);
// The number of distinct nodes in `nodes`.
int CountNodes(const std::vector<int>& nodes);

// The node ids with a directory under `root`, ascending; empty when `root`
// does not exist. Returns IOError if it cannot be listed.
Result<std::vector<int>> ListNodes(const std::string& root);

// One store found in a node's directory.
struct StoreLocation {
  int node = 0;         // Whose directory it is in.
  int source_node = 0;  // Whose parts it holds (== node for the primary).
  int slot = 0;         // The slot on source_node whose parts it holds.
  bool replica = false;
  std::string path;
};

// The stores in node `node`'s directory (primaries by slot, then replicas
// by source node and slot). Returns IOError if the directory cannot be listed.
Result<std::vector<StoreLocation>> ListNodeStores(const std::string& root,
                                                  int node);

// Every store under `root`: each node directory's (ListNodes order), as
// ListNodeStores gives them. Returns IOError if a directory cannot be
// listed.
Result<std::vector<StoreLocation>> ListRootStores(const std::string& root);

// The ranks that hold replicas of rank `rank`'s parts (ring rule above,
// other nodes first, then other ranks on nodes already used); fewer than
// `replicas` only when the world has fewer other ranks.
// REQUIRES: nodes.size() is the world size, 0 <= rank < nodes.size().
std::vector<int> ReplicaHolderRanks(int rank, const std::vector<int>& nodes,
                                    int replicas);
// The ranks whose parts rank `rank`'s node holds replicas of.
std::vector<int> ReplicaSourceRanks(int rank, const std::vector<int>& nodes,
                                    int replicas);

// Node ids for a world of hints.size() ranks, one rank per node (the
// nodes hyctl train simulates on one machine): a rank keeps its hint (>= 0)
// unless an earlier rank has it; the others take the `existing` nodes
// nobody took, ascending, then fresh ids above every id seen. Workers map
// themselves to nodes by identity instead (node_identity.h).
std::vector<int> AssignNodes(const std::vector<int>& hints,
                             const std::vector<int>& existing);

inline uint64_t MakeVersion(uint64_t step, uint32_t generation) {
  return (step << kGenerationBits) | (generation & kMaxGeneration);
}
inline uint64_t VersionStep(uint64_t version) {
  return version >> kGenerationBits;
}
inline uint32_t VersionGeneration(uint64_t version) {
  return static_cast<uint32_t>(version & kMaxGeneration);
}

}  // namespace hy::recovery

#endif  // HY_RECOVERY_NODE_LAYOUT_H_
