// ClockFollower: which optimizer's steps end a step (the clock), following whichever is stepping.
// The first optimizer to step is the clock. Another that steps twice with no step of the clock
// between (a second training stage with its own optimizer, one re-made per epoch, the next layer
// of a layer-wise loop) takes the clock over, and its first of those steps ends a step too. One
// that steps once between two clock steps (a GAN's generator) leaves the clock where it is.
// Plain data, no Python: StepClock holds one and calls it with the GIL held.
#pragma once

#include <cstdint>

namespace perfcore {

struct ClockFollower {
  // Other optimizers remembered since the clock's last step (a GAN has one; past this many the
  // oldest is forgotten and cannot take the clock over).
  static constexpr int kOthers = 8;

  uintptr_t clockOpt = 0;  // the optimizer whose steps end a step, or 0 until one has stepped
  long long handovers = 0;  // how often another optimizer took the clock over
  long long others = 0;     // steps that ended no step: other optimizers' (a GAN's generator)
  uintptr_t otherOpt[kOthers] = {};
  int64_t otherT[kOthers] = {};  // the step end each of those could have made (-1: none)
  int nOthers = 0;

  void reset() { *this = ClockFollower{}; }

  // The step of `opt` closed at `t` (-1: it could not end a step). True when it ends one; then
  // *pending is the end of that optimizer's earlier step when it has just taken the clock over
  // (later than every end made before), else -1.
  bool stepped(uintptr_t opt, int64_t t, int64_t* pending);
};

}  // namespace perfcore
