// Errors are values: a Result<T> holds either a value or a message a user can act on.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace relulens::core {

struct Error {
    std::string message;
};

template <typename T>
class Result {
public:
    Result(T value) : value_(std::move(value)) {}
    Result(Error error) : error_(std::move(error.message)) {}

    bool ok() const { return value_.has_value(); }
    explicit operator bool() const { return ok(); }
    const std::string& error() const { return error_; }

    T& value() {
        if (!value_) throw std::logic_error("Result::value() on an error: " + error_);
        return *value_;
    }
    const T& value() const {
        if (!value_) throw std::logic_error("Result::value() on an error: " + error_);
        return *value_;
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() { return value(); }

private:
    std::optional<T> value_;
    std::string error_;
};

// Result for operations that return nothing.
class Status {
public:
    Status() = default;
    Status(Error error) : error_(std::move(error.message)), failed_(true) {}
    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const std::string& error() const { return error_; }

private:
    std::string error_;
    bool failed_ = false;
};

}  // namespace relulens::core
