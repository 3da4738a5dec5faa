//! The one temporary-file scheme of the whole program.
//!
//! Every atomic replacement (a tool's write, a snapshot in the history store, tee's target and
//! mirror, `audit restore`) writes a temporary beside its target and renames it into place.
//! Temporaries are named `.filesystem-tmp-` followed by random characters. The guard refuses
//! every path with a component that starts with [`TEMP_PREFIX`], for reading, writing, moving and
//! listing, so no tool can create one, move a file to one, read a half-written one, or make a
//! user's file look like a leftover that `check --repair` would clear away.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// The name prefix of every temporary. Reserved: the guard refuses any path component that
/// starts with it.
pub const TEMP_PREFIX: &str = ".filesystem-tmp-";

/// How many random characters follow [`TEMP_PREFIX`] in a temporary's name.
pub const TEMP_RANDOM_LEN: usize = 6;

/// True when `name` has exactly the shape of a temporary: the prefix, then [`TEMP_RANDOM_LEN`]
/// ASCII letters or digits. `check` uses it to recognise leftovers of an interrupted write.
pub fn is_temp_name(name: &[u8]) -> bool {
    match name.strip_prefix(TEMP_PREFIX.as_bytes()) {
        Some(rest) => rest.len() == TEMP_RANDOM_LEN && rest.iter().all(u8::is_ascii_alphanumeric),
        None => false,
    }
}

/// True when an entry is provably a temporary this program left: the name has the exact shape,
/// and the file still has the permission bits `0000` every temporary is created with (its real
/// bits are only set right before it is renamed into place) and a single link. A user's file that
/// merely has such a name is never taken for one.
pub fn is_leftover(name: &[u8], stat: &super::Stat) -> bool {
    is_temp_name(name) && stat.is_file() && stat.mode == 0 && stat.nlink == 1
}

/// True when a path component is in the reserved temporary namespace (any name that starts with
/// the prefix, not only the exact shape): what the guard refuses.
pub fn is_reserved(name: &[u8]) -> bool {
    name.starts_with(TEMP_PREFIX.as_bytes())
}

/// A fresh candidate name. Creation is `O_CREAT | O_EXCL` relative to the directory, so names
/// need to be unlikely to collide, not unguessable; a collision only costs another try.
pub fn fresh_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(t.as_nanos());
    }
    let mut bits = hasher.finish();
    let mut name = String::with_capacity(TEMP_PREFIX.len() + TEMP_RANDOM_LEN);
    name.push_str(TEMP_PREFIX);
    for _ in 0..TEMP_RANDOM_LEN {
        name.push(ALPHABET[(bits % ALPHABET.len() as u64) as usize] as char);
        bits /= ALPHABET.len() as u64;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_names_have_the_temporary_shape_and_differ() {
        let a = fresh_name();
        let b = fresh_name();
        assert!(is_temp_name(a.as_bytes()), "{a}");
        assert_ne!(a, b);
        assert!(is_reserved(b".filesystem-tmp-anything-longer"));
        assert!(!is_temp_name(b".filesystem-tmp-anything-longer"));
        assert!(!is_reserved(b".filesystem-notes"));
    }
}
