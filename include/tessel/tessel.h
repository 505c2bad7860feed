// The umbrella header: `#include <tessel/tessel.h>` gives the whole public API.
// Installed, it lives in include/tessel/ next to the dsl/, runtime/ and
// codegen/ headers it includes; both include/ and include/tessel/ are on the
// include path of tessel::tessel.
#pragma once

#include "codegen/compile_options.h"
#include "codegen/compiler.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "runtime/device.h"
#include "runtime/group.h"
#include "runtime/plan.h"
#include "runtime/schedule.h"
#include "runtime/tensor_map.h"
