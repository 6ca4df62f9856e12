// A typed set of flags over a scoped enum, so a WR's flags take only send flags and a completion's
// only completion flags, with none of the integer arithmetic unscoped enums allow. An enum opts in
// by declaring `constexpr bool prdma_flag_enum(E) { return true; }` in its namespace, which also
// gives it `a | b` between two of its values.
#pragma once

#include <compare>
#include <concepts>
#include <type_traits>

namespace prdma {

template <typename E>
concept FlagEnum = std::is_enum_v<E> && requires(E e) {
    { prdma_flag_enum(e) } -> std::same_as<bool>;
};

template <FlagEnum E>
class Flags {
public:
    using Bits = std::underlying_type_t<E>;

    constexpr Flags() noexcept = default;
    constexpr Flags(E flag) noexcept : bits_(static_cast<Bits>(flag)) {} // NOLINT: implicit
    [[nodiscard]] static constexpr Flags from_bits(Bits bits) noexcept {
        Flags flags;
        flags.bits_ = bits;
        return flags;
    }

    [[nodiscard]] constexpr Bits bits() const noexcept { return bits_; }
    [[nodiscard]] constexpr bool has(E flag) const noexcept {
        return (bits_ & static_cast<Bits>(flag)) != 0;
    }
    [[nodiscard]] constexpr bool any_of(Flags flags) const noexcept {
        return (bits_ & flags.bits_) != 0;
    }
    // Every flag of `flags` is set here (`flags` is a subset).
    [[nodiscard]] constexpr bool all_of(Flags flags) const noexcept {
        return (bits_ & flags.bits_) == flags.bits_;
    }
    // These flags but those of `flags`.
    [[nodiscard]] constexpr Flags without(Flags flags) const noexcept {
        return from_bits(static_cast<Bits>(bits_ & ~flags.bits_));
    }
    [[nodiscard]] constexpr bool empty() const noexcept { return bits_ == 0; }
    constexpr explicit operator bool() const noexcept { return bits_ != 0; }

    constexpr Flags& operator|=(Flags other) noexcept {
        bits_ = static_cast<Bits>(bits_ | other.bits_);
        return *this;
    }
    constexpr Flags& operator&=(Flags other) noexcept {
        bits_ = static_cast<Bits>(bits_ & other.bits_);
        return *this;
    }
    friend constexpr Flags operator|(Flags a, Flags b) noexcept { return a |= b; }
    friend constexpr Flags operator&(Flags a, Flags b) noexcept { return a &= b; }
    friend constexpr bool operator==(Flags a, Flags b) noexcept = default;
    // An order, so a flag set can be part of a map's key. (clang-tidy 14 takes the defaulted
    // operator's comparison with a literal 0 for a null pointer.)
    // NOLINTNEXTLINE(modernize-use-nullptr)
    friend constexpr auto operator<=>(Flags a, Flags b) noexcept = default;

private:
    Bits bits_ = 0;
};

template <FlagEnum E>
constexpr Flags<E> operator|(E a, E b) noexcept {
    return Flags<E>(a) | Flags<E>(b);
}

} // namespace prdma
