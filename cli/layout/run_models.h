// The models of a trainer run's checkpoint as the resharder sees them. A
// step that hyctl train committed holds several flat buffers, each cut by
// the trainer's FSDP layout on its own: the actor's parameters
// ("actor/<name>"), its Adam moments ("actor/exp_avg/<name>",
// "actor/exp_avg_sq/<name>"), the critic's likewise, and the frozen
// reference ("reference/<name>"), <name> as Hugging Face spells it. Each
// buffer is one RunModel: the tensors under one prefix, in the order the
// trainer flattens them (trainer::ModelTensors of the run's recorded
// config), with the run's split rules applied: rules for the stored names
// (what the trainer records), else for the Hugging Face names.
// hyctl reshard, plan and restore cut each RunModel for a new layout as
// the trainer of that layout would.
//
// A run root that records no trainer config (a Checkpointer written by
// another program) has its tensors in natural order (hy/reshard/
// stored_version.h), grouped the same way by prefix.
//
// Thread-safety: plain functions over a reader (whose calls are
// thread-safe).

#ifndef HY_CLI_LAYOUT_RUN_MODELS_H_
#define HY_CLI_LAYOUT_RUN_MODELS_H_

#include <string>
#include <vector>

#include "hy/common/result.h"
#include "hy/reshard/layout.h"
#include "hy/reshard/model_spec.h"
#include "hy/reshard/shard_map.h"

namespace hy::checkpoint {
class CheckpointReader;
}  // namespace hy::checkpoint

namespace hy::cli {

struct RunModel {
  std::string prefix;       // "actor/", "actor/exp_avg/", ... ("" if none).
  reshard::ModelSpec spec;  // Stored names (with the prefix), model order.
};

// The run's models at the reader's step, under `rules` (the file the user
// passed; empty: the rules the step records, else the shipped ones).
// Returns InvalidArgument for a tensor no rule matches (suggesting
// --rules), DataLoss for recorded rules or a recorded config that do not
// parse, or the reader's errors.
Result<std::vector<RunModel>> RunModelsOf(checkpoint::CheckpointReader* reader,
                                          const std::string& rules);

// Model `model` cut for `layout` (reshard::ShardMap::Build), its errors
// naming the layout and the model's prefix.
Result<reshard::ShardMap> CutModel(const RunModel& model,
                                   const reshard::Layout& layout);

}  // namespace hy::cli

#endif  // HY_CLI_LAYOUT_RUN_MODELS_H_
