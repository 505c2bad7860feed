// What the joined-group suites run in each rank: a plan over the group's
// symmetric buffer, its epochs checked byte for byte in every process.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/plans/bootstrap.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan.h"

namespace tessel::multiprocess {

// Each rank writes its shard, the plan runs, and each rank finds every
// rank's shard in its copy; for `epochs` epochs, then the plan goes.
inline absl::Status deliver_epochs(Group& g, Bootstrap& boot, const Schedule& s, uint64_t epochs) {
  const int self = boot.rank(), world = boot.size();
  TESSEL_ASSIGN_OR_RETURN(SymmetricBuffer buf, g.allocate(s.bytes()));
  TESSEL_ASSIGN_OR_RETURN(TriggeredPlan plan, TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s)));
  for (uint64_t epoch = 1; epoch <= epochs; ++epoch) {
    std::vector<unsigned char> bytes(s.bytes(), 0xEE);
    for (int64_t i = 0; i < s.shard_bytes(); ++i) bytes[s.shard_offset(self) + i] = epoch * 31 + self * 7 + i % 251;
    TESSEL_RETURN_IF_ERROR(buf.write(self, bytes.data(), bytes.size()));
    TESSEL_RETURN_IF_ERROR(boot.barrier());  // no peer's batch lands before this rank's poison
    TESSEL_RETURN_IF_ERROR(plan.run());
    TESSEL_RETURN_IF_ERROR(buf.read(self, bytes.data(), bytes.size()));
    for (int owner = 0; owner < world; ++owner) {
      for (int64_t i = 0; i < s.shard_bytes(); ++i) {
        if (bytes[s.shard_offset(owner) + i] != static_cast<unsigned char>(epoch * 31 + owner * 7 + i % 251)) {
          return absl::InternalError(absl::StrCat("epoch ", epoch, ": rank ", owner, "'s byte ", i, " on rank ", self));
        }
      }
    }
    if (epoch < epochs) TESSEL_RETURN_IF_ERROR(plan.next_epoch());
  }
  return plan.destroy();
}

}  // namespace tessel::multiprocess
