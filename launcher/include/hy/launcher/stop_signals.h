// The two signals that stop a training run (SIGINT: a terminal's Ctrl-C;
// SIGTERM: a scheduler or the launcher), held or released together.
//
// `hyctl train` holds them from the first line of main until its launcher
// or worker has installed its handlers, then releases them, so one that
// came meanwhile is a stop, not a killed process; children that must see
// them (the engine keeper, the programs it runs) release them too.
// Both functions are async-signal-safe (usable between fork and exec).
// Thread-safety: they change the calling thread's signal mask only.

#ifndef HY_LAUNCHER_STOP_SIGNALS_H_
#define HY_LAUNCHER_STOP_SIGNALS_H_

#include <signal.h>

namespace hy::launcher {

inline void SetStopSignalsHeld(bool held) {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  sigprocmask(held ? SIG_BLOCK : SIG_UNBLOCK, &stops, nullptr);
}

inline void HoldStopSignals() { SetStopSignalsHeld(true); }
inline void ReleaseStopSignals() { SetStopSignalsHeld(false); }

}  // namespace hy::launcher

#endif  // HY_LAUNCHER_STOP_SIGNALS_H_
