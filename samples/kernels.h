// The samples' kernels, built in one place: the samples run them, the GPU
// suites run them on cuda:0 and the host to compare, the GPU benchmark times
// them. Each returns the builder's result. By family: row_kernels.h
// (elementwise, row-wise and copies), gemm.h, attention.h, decode.h
// and allgather_kernels.h.
#pragma once

#include "samples/allgather_kernels.h"
#include "samples/attention.h"
#include "samples/decode.h"
#include "samples/gemm.h"
#include "samples/row_kernels.h"
