// codegen is built with hidden visibility (its internals speak LLVM types);
// this marks the few entry points libtessel exports.
#pragma once

#define TESSEL_CODEGEN_API __attribute__((visibility("default")))
