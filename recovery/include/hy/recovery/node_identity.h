// Which node a rank runs on, from who it is rather than from the order of a
// directory listing.
//
// A node is a host: the ranks of one host share its failure domain and its
// node directory (node_layout.h). A rank's host identity is, first found:
//   HY_NODE_ID=<k>   an explicit node id (hyctl train's simulated nodes);
//   HY_HOST_ID=<s>   a name the user gives the host;
//   the hostname.
// Each node directory records the identity of its host in
// <root>/node-<k>/host, so a restarted job finds its node again by identity:
// a host whose directory is gone (a lost or replaced machine) comes back
// under a fresh id, and the old node counts as lost. Fresh ids are above
// every id any rank has seen, replica sources included, so an id is never
// given to a second host while copies of the first one's parts exist.
//
// Under torchrun the ranks of one agent share a host (GROUP_RANK): ranks of
// one agent that disagree about their host identity are refused.
//
// Thread-safety: plain functions.
#ifndef HY_RECOVERY_NODE_IDENTITY_H_
#define HY_RECOVERY_NODE_IDENTITY_H_

#include <string>
#include <string_view>
#include <vector>

#include "hy/common/result.h"

namespace hy::recovery {

// What one rank says about itself at start.
struct NodeReport {
  std::string key;       // Host identity; "node-<k>" for an explicit id.
  std::string hostname;  // The machine's name, for messages.
  int group = -1;        // torchrun's GROUP_RANK, -1 if none.
  int hint = -1;         // HY_NODE_ID, -1 if none.
  int found = -1;        // The node whose host file holds `key`, or -1.
  int max_seen = -1;     // The highest node id under this rank's root.
};

// This rank's report: identity from the environment, `found` and
// `max_seen` from the node directories under `root` (which need not
// exist). Returns IOError if a directory cannot be listed,
// InvalidArgument for a malformed HY_NODE_ID.
Result<NodeReport> ReportNode(const std::string& root);

// JSON for the exchange between ranks. Decode returns DataLoss for text
// Encode did not write.
std::string EncodeNodeReport(const NodeReport& report);
Result<NodeReport> DecodeNodeReport(std::string_view text);

// Node id of each rank: the ranks with one key share a node; its id is the
// explicit hint, else the node found by identity, else a fresh id above
// every id seen. Returns FailedPrecondition when ranks of one torchrun
// agent report different keys, when the ranks of one key found different
// nodes (one hostname on several disks: give each host HY_HOST_ID), or when
// two keys claim one node.
Result<std::vector<int>> AssignNodesByIdentity(
    const std::vector<NodeReport>& reports);

// Writes `report`'s identity into <root>/node-<node>/host (atomically,
// creating the directory). Returns IOError on failure.
Status RecordHost(const std::string& root, int node, const NodeReport& report);

// The hostname recorded for `node` under `root`; empty if none.
std::string RecordedHostname(const std::string& root, int node);

}  // namespace hy::recovery

#endif  // HY_RECOVERY_NODE_IDENTITY_H_
