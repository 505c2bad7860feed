// Shared by the host and GPU plan suites: shards filled with bytes that name
// (epoch, rank, position), and the check that every byte a schedule covers
// reached every peer while bytes it does not cover kept their poison.
#pragma once

#include <cstdint>
#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan.h"
#include "runtime/plans/schedule.h"

namespace tessel::plan_test {

inline constexpr unsigned char kPoison = 0xEE;

inline unsigned char shard_byte(uint64_t epoch, int rank, int64_t i) {
  return static_cast<unsigned char>(epoch * 31 + rank * 7 + i * 13);
}

// Rank r's own shard gets its bytes; every other byte of r's copy the poison.
inline void fill(const SymmetricBuffer& buf, const Schedule& s, int world, uint64_t epoch) {
  for (int r = 0; r < world; ++r) {
    std::vector<unsigned char> bytes(s.bytes(), kPoison);
    for (int64_t i = 0; i < s.shard_bytes(); ++i) bytes[s.shard_offset(r) + i] = shard_byte(epoch, r, i);
    ASSERT_TRUE(buf.write(r, bytes.data(), bytes.size()).ok());
  }
}

inline void expect_delivered(const SymmetricBuffer& buf, const Schedule& s, int world, uint64_t epoch) {
  for (int owner = 0; owner < world; ++owner) {
    std::vector<bool> covered(s.shard_bytes());
    for (const Batch& b : s.batches(owner)) {
      for (const Segment& seg : b.segments) {
        for (int64_t row = 0; row < seg.height; ++row) {
          for (int64_t x = 0; x < seg.width; ++x) covered[seg.offset + row * seg.pitch + x] = true;
        }
      }
    }
    for (int p = 0; p < world; ++p) {
      if (p == owner) continue;
      std::vector<unsigned char> bytes(s.shard_bytes());
      ASSERT_TRUE(buf.read(p, bytes.data(), bytes.size(), s.shard_offset(owner)).ok());
      for (int64_t i = 0; i < s.shard_bytes(); ++i) {
        unsigned char want = covered[i] ? shard_byte(epoch, owner, i) : kPoison;
        ASSERT_EQ(bytes[i], want) << "shard of rank " << owner << " on rank " << p << ", byte " << i;
      }
    }
  }
}

// `programs` programs each write count / programs consecutive i32 of a shard
// as (epoch << 24) | index and publish the one batch they share: the gate
// opens on the last publish. Args: view, out, epoch, batch, base (the shard's
// first element).
// A plan over `s` on every rank of `g`, run by the host for `epochs`
// epochs, each filled and then found delivered everywhere.
inline void expect_epochs_delivered(const Group& g, const Schedule& s, uint64_t epochs) {
  const int world = g.size();
  absl::StatusOr<SymmetricBuffer> buf = g.allocate(s.bytes());
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<TriggeredPlan> plan = TriggeredPlan::create(g, *buf, std::vector<Schedule>(world, s));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (uint64_t epoch = 1; epoch <= epochs; ++epoch) {
    fill(*buf, s, world, epoch);
    absl::Status ran = plan->run();
    ASSERT_TRUE(ran.ok()) << ran;
    expect_delivered(*buf, s, world, epoch);
    if (epoch < epochs) {
      ASSERT_TRUE(plan->next_epoch().ok());
    }
  }
}

inline Kernel contributors_kernel(int count, int programs) {
  constexpr int kBlock = 1024;
  KernelBuilder k("contributors");
  TriggeredView view = k.triggered_view("plan");
  Value out = k.arg(ptr(i32), "out"), epoch = k.arg(i32, "epoch"), batch = k.arg(i32, "batch");
  Value base = k.arg(i32, "base");
  k.for_range(0, count / programs, kBlock, [&](Value at) {
    Value index = k.program_id() * (count / programs) + at + k.arange(0, kBlock);  // [B] i32
    store(out + base + index, (epoch << 24) | index);
  });
  view.publish(batch);
  return *k.build();
}

}  // namespace tessel::plan_test
