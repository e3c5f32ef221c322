// Where a run's state lives on disk, node by node, and where replicas go.
//
// A run root holds one directory per node (failure domain: a machine with
// its own disk), named by a node id that stays with the node across
// restarts, whatever rank runs there:
//
//   <root>/node-<k>/store          the store of the rank that runs on node k
//   <root>/node-<k>/replica-<j>    copies of node j's committed parts
//   <root>/node-<k>/worker.pid     the pid of the worker running there
//
// Losing a node loses its directory. With replicas, every committed part of
// rank r (on node nodes[r]) is also held by the nodes of ranks r+1, r+2, ...
// (mod the world size), skipping ranks on the same node as r or as an
// earlier holder, until `replicas` distinct other nodes hold it: the ring
// rule of Gemini / NVRx, so one node's copies land on different nodes and
// losing any `replicas` nodes leaves at least one copy of every part.
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
std::string PrimaryStorePath(const std::string& root, int node);
std::string ReplicaStorePath(const std::string& root, int holder, int source);

// The node ids with a directory under `root`, ascending; empty when `root`
// does not exist. Returns IOError if it cannot be listed.
Result<std::vector<int>> ListNodes(const std::string& root);

// One store found in a node's directory.
struct StoreLocation {
  int node = 0;         // Whose directory it is in.
  int source_node = 0;  // Whose parts it holds (== node for the primary).
  bool replica = false;
  std::string path;
};

// The stores in node `node`'s directory (primary first, then replicas by
// source node). Returns IOError if the directory cannot be listed.
Result<std::vector<StoreLocation>> ListNodeStores(const std::string& root,
                                                  int node);

// Every store under `root`: each node directory's (ListNodes order), as
// ListNodeStores gives them. Returns IOError if a directory cannot be
// listed.
Result<std::vector<StoreLocation>> ListRootStores(const std::string& root);

// The ranks whose nodes hold replicas of rank `rank`'s parts (ring rule
// above); fewer than `replicas` when there are not enough distinct nodes.
// REQUIRES: nodes.size() is the world size, 0 <= rank < nodes.size().
std::vector<int> ReplicaHolderRanks(int rank, const std::vector<int>& nodes,
                                    int replicas);
// The ranks whose parts rank `rank`'s node holds replicas of.
std::vector<int> ReplicaSourceRanks(int rank, const std::vector<int>& nodes,
                                    int replicas);

// Node ids for a world of hints.size() ranks: a rank keeps its hint (>= 0)
// unless an earlier rank has it; the others take the `existing` nodes
// nobody took, ascending, then fresh ids above every id seen.
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
