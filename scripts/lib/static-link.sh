# Sourced by scripts/build and scripts/bench: how to link an executable as a static PIE here.
#
# Sets STATIC_LINK_FLAGS (rustc flags for the final link) when this machine can link one:
# Linux with glibc (its static libraries come with libc6-dev, which Rust there already needs).
# Relative relocations are packed (DT_RELR, binutils 2.38+) when the linker knows how: the
# start-up code then reads a few KiB of them instead of a couple of hundred.
STATIC_LINK_FLAGS=()
case "$(uname -s)-$(uname -m)" in
    Linux-x86_64 | Linux-aarch64)
        # Outputs are captured, not piped into `grep -q`: under pipefail, grep leaving early
        # would fail the pipeline with SIGPIPE.
        libc=$(ldd --version 2>&1 || true)
        if grep -qi 'glibc\|gnu libc' <<<"$libc"; then
            STATIC_LINK_FLAGS=(-C target-feature=+crt-static)
            linker=$(ld --help 2>/dev/null || true)
            if grep -q 'pack-relative-relocs' <<<"$linker"; then
                STATIC_LINK_FLAGS+=(-C link-arg=-Wl,-z,pack-relative-relocs)
            fi
        fi
        ;;
esac
