// How the torch layer waits at a sync point, and what it does with errors nobody synced.
//
// Note [Interruptible waits]: a sync point (.item(), .cpu(), torch.tpu.synchronize(), an event,
// debug mode's per-op wait) waits for queued device work that may take seconds or minutes. The
// wait wakes every few milliseconds to run Python's pending signal handlers (with the GIL taken
// for that moment only); when one raises -- Ctrl-C's KeyboardInterrupt -- the queued work that
// has not started is cancelled on every device (Queue::Cancel: its new values fail as cancelled,
// what it was to update in place keeps its value) and the Python exception propagates from the
// sync point. The device task running at that moment finishes in the background; the device is
// usable at once.
//
// Note [Errors at exit]: an error that no sync point reported (its data was never read, and
// nothing synchronized the device) is not lost: at interpreter exit torch_tpu cuts the fused
// windows, synchronizes every device and prints every unreported error to stderr, and a process
// that would have exited with status 0 exits with status 1. The check runs from an `atexit`
// handler registered when torch_tpu is imported, so handlers registered later (the program's
// own) run before it and may still sync; the exit status is changed after Python has finished
// (a glibc on_exit handler, which sees the status exit() was given: sys.exit(3) stays 3, an
// uncaught exception stays 1), so the handlers registered before torch_tpu (logging,
// multiprocessing) still run and output is flushed -- os._exit(1) from the atexit handler would
// skip them, and sys.exit() from an atexit handler does not change the status. A process that
// leaves through os._exit (a multiprocessing child) skips the check, as it skips every handler;
// so does a forked child of the device's process (Note [Fork]).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/queue.h"

namespace tpu::torch_bridge {

// Waits until task `seq` of `queue` has finished, running Python's signal handlers meanwhile;
// throws the Python error (torch::python_error) a handler raises, after cancelling the queued
// work of every device.
void WaitInterruptibly(Queue& queue, uint64_t seq);

// Note [Errors at exit]: cuts the windows, synchronizes every device and returns the unreported
// errors, one per line ("" when there are none); remembers that some were, so the process exits
// with a nonzero status. Call with the GIL released.
std::string TakeErrorsAtExit();
// Note [Autograd threads at exit]: a backward pass's GraphTask holds the Python objects that
// torch.autograd stashed in the caller's thread-local state (the contextvars context), so the
// autograd engine's device thread, when it drops the last reference to a finished GraphTask,
// takes the GIL to release them. If that thread is still waiting for the GIL when the interpreter
// finalizes, CPython ends it with pthread_exit, whose unwinding through the (noexcept) destructor
// calls std::terminate: "terminate called without an active exception", status -6, at the exit
// of a program that trained on the device (seen 3 times in 100 runs of a 3-step loop on 2 cores).
// At exit, from the atexit handler, each device's autograd thread is made to run one more tiny
// backward (a view's, no device computation) issued from C++ -- so it carries no Python object --
// and waited for with the GIL released: the thread handles tasks one at a time, so when that one
// has finished, the earlier GraphTask has been released (with the GIL, which the wait lets it
// take), and the new one needs no GIL to release. Call with the GIL held.
void DrainAutogradDeviceThreads();
// Installs the on_exit handler that turns exit status 0 into 1 after TakeErrorsAtExit found
// errors (once; done when the device registers).
void RegisterExitStatusHandler();

}  // namespace tpu::torch_bridge
