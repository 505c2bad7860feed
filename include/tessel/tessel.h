// The umbrella header: `#include <tessel/tessel.h>` gives the whole public API.
// Installed, it lives in include/tessel/ next to the dsl/, runtime/ and
// codegen/ headers it includes; both include/ and include/tessel/ are on the
// include path of tessel::tessel.
#pragma once

#include "base/float16.h"
#include "base/float8.h"
#include "codegen/compile_options.h"
#include "codegen/compiler.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/random.h"
#include "runtime/autotune.h"
#include "runtime/device.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan.h"
#include "runtime/plans/schedule.h"
#include "runtime/tensor_map.h"
