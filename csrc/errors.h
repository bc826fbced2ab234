// Native error types. bindings.cpp maps each one onto perfcore.errors; nothing else knows Python.
#pragma once

#include <stdexcept>
#include <string>

namespace perfcore {

// Base of every error the native core raises on purpose.
class NativeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// API misuse that would otherwise corrupt a measurement (closing a phase that is not open, ...).
class UsageError : public NativeError {
 public:
  using NativeError::NativeError;
};

// No usable GPU (no device, no driver, driver too old). Raised as perfcore.errors.DeviceUnavailable.
class DeviceUnavailableError : public NativeError {
 public:
  using NativeError::NativeError;
};

// Any other CUDA runtime failure.
class CudaError : public NativeError {
 public:
  using NativeError::NativeError;
};

// A CUPTI call failed. code_ is the CUptiResult, so Python can tell "held by another
// profiler" from "no privileges" from "no device".
class CuptiError : public NativeError {
 public:
  CuptiError(const std::string& msg, int code) : NativeError(msg), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

}  // namespace perfcore
