// hyctl's maintenance commands, on a store or a whole run root:
//   gc     PATH --keep N [--pin STEP]  drop versions no one needs: beyond
//                                      the newest N (of the live
//                                      generation, on a run root),
//                                      superseded generations, and stores
//                                      left empty (recovery/retention.h)
//   drop   RUN_ROOT --step N [--force] remove every version of step N
//                                      from every copy; the newest
//                                      recoverable step only with --force
//                                      (exit 64 without it)
//   repair PATH [--from STORE]         write damaged chunks again from an
//                                      intact copy (a replica, or --from)
// Steps are the unit (--pin takes a step). Both open stores for writing:
// they refuse a store a running job holds.

#ifndef HY_CLI_STORE_MAINTENANCE_COMMANDS_H_
#define HY_CLI_STORE_MAINTENANCE_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "hy/common/status.h"
#include "hy/recovery/run_root.h"

namespace CLI {
class App;
}  // namespace CLI

namespace hy::cli {

// root.DropSteps(which), saying on `out` what went from each store (also
// when a later store fails) and in all.
Status DropSteps(const recovery::RunRoot& root,
                 const std::function<bool(uint64_t step)>& which,
                 std::ostream& out);

// Adds gc, drop and repair to `app`; a command that runs stores its exit
// code in `*exit_code`, which must outlive app.parse().
void AddMaintenanceCommands(CLI::App* app, int* exit_code);

}  // namespace hy::cli

#endif  // HY_CLI_STORE_MAINTENANCE_COMMANDS_H_
