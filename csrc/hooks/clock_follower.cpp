#include "clock_follower.h"

namespace perfcore {

bool ClockFollower::stepped(uintptr_t opt, int64_t t, int64_t* pending) {
  *pending = -1;
  if (clockOpt == 0) clockOpt = opt;
  if (opt == clockOpt) {
    nOthers = 0;
    return true;
  }
  for (int i = 0; i < nOthers; ++i) {
    if (otherOpt[i] != opt) continue;
    *pending = otherT[i];
    if (*pending >= 0) --others;  // that earlier step ends a step after all
    clockOpt = opt;
    ++handovers;
    nOthers = 0;
    return true;
  }
  ++others;
  if (nOthers == kOthers) {  // forget the oldest
    for (int i = 1; i < kOthers; ++i) {
      otherOpt[i - 1] = otherOpt[i];
      otherT[i - 1] = otherT[i];
    }
    --nOthers;
  }
  otherOpt[nOthers] = opt;
  otherT[nOthers] = t;
  ++nOthers;
  return false;
}

}  // namespace perfcore
