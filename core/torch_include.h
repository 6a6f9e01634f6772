// The one way ReluLens headers include LibTorch (the light <torch/types.h>). Qt defines a
// `slots` macro that breaks an ATen header (a member function named slots()), so the macro is
// hidden while torch is parsed.
#pragma once
#pragma push_macro("slots")
#undef slots
#include <torch/types.h>
#pragma pop_macro("slots")
