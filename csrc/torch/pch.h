// Precompiled header of the torch layer: the torch headers every file here needs.
#pragma once

#include <ATen/ATen.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>
