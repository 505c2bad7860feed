// Counter-based random numbers: Philox4x32 (Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011), a pure function
// of a key and a counter. The same seed and offsets give the same bits on
// every target and in every program, so a kernel can draw again what an
// earlier one drew (a dropout mask in the backward pass) instead of storing it.
//
// `seed` is an integer scalar; its value modulo 2^64 is the key (the low
// word key 0, the high word key 1). `offsets` is an integer scalar or tile
// naming each element's counter: its value modulo 2^64 fills the counter's
// first two words (the low one first), the other two are 0. Distinct
// offsets under one seed draw independent numbers; a kernel usually passes
// its elements' global indices. Each function of the 4x form returns the
// four words of one counter's block, the plain form its first.
#pragma once

#include <array>

#include "dsl/ops.h"

namespace tessel {

// Rounds of the Philox bijection: 10, the generator's standard and that of
// its published known answers; fewer are faster and mix less.
inline constexpr int kPhiloxRounds = 10;

// The high 32 bits of the 64-bit product of two 32-bit integers taken as
// unsigned, in the operands' dtype (i32 or u32): one instruction on GPUs.
Value umulhi(const Operand& a, const Operand& b, Loc loc = Loc::current());

// Philox4x32 of `counter` (four integer words, each taken modulo 2^32) under
// the key `seed` (see above): four u32 values of the operands' common shape.
std::array<Value, 4> philox(const Operand& seed, const std::array<Operand, 4>& counter, int rounds = kPhiloxRounds,
                            Loc loc = Loc::current());

// Uniform u32 values.
std::array<Value, 4> randint4x(const Operand& seed, const Operand& offsets, int rounds = kPhiloxRounds,
                               Loc loc = Loc::current());
Value randint(const Operand& seed, const Operand& offsets, int rounds = kPhiloxRounds, Loc loc = Loc::current());

// Uniform f32 values in [0, 1): a word's top 24 bits times 2^-24, so every
// multiple of 2^-24 below 1 is equally likely and 1 is never drawn.
std::array<Value, 4> rand4x(const Operand& seed, const Operand& offsets, int rounds = kPhiloxRounds,
                            Loc loc = Loc::current());
Value rand(const Operand& seed, const Operand& offsets, int rounds = kPhiloxRounds, Loc loc = Loc::current());

// Standard normal f32 values: the Box-Muller transform of two words, with
// the accurate log, sqrt, cos and sin (so the host and GPUs agree to the bit).
std::array<Value, 4> randn4x(const Operand& seed, const Operand& offsets, int rounds = kPhiloxRounds,
                             Loc loc = Loc::current());
Value randn(const Operand& seed, const Operand& offsets, int rounds = kPhiloxRounds, Loc loc = Loc::current());

}  // namespace tessel
