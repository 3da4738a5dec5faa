//! Choosing what a bounded cache of open things closes first.
//!
//! The server keeps two such caches, each stamping an entry with a counter when it is used: the
//! daemon's open roots and the call-log writer's open log files. Both close the least recently
//! used entry to make room, and both choose it here.

use std::collections::HashMap;

/// The key of the entry whose `used` stamp is the smallest (the least recently used), or `None`
/// when `map` is empty. Ties go to whichever the map yields first; either is as stale.
pub(crate) fn least_recently_used<K: Clone, V, U: Ord>(
    map: &HashMap<K, V>,
    used: impl Fn(&V) -> U,
) -> Option<K> {
    map.iter()
        .min_by_key(|(_, v)| used(v))
        .map(|(k, _)| k.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_smallest_stamp_and_nothing_from_an_empty_map() {
        let map: HashMap<&str, u64> = [("a", 7), ("b", 3), ("c", 9)].into_iter().collect();
        assert_eq!(least_recently_used(&map, |u| *u), Some("b"));
        let empty: HashMap<&str, u64> = HashMap::new();
        assert_eq!(least_recently_used(&empty, |u| *u), None);
    }
}
