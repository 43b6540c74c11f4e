//! Bounded caches of device objects (pipelines, active-block buffers): a long run whose
//! sparse trees keep growing specialises new ones for every plan, and the old ones would
//! otherwise stay for ever. The least recently used entry goes when a cache is full.

use std::collections::HashMap;
use std::hash::Hash;

/// A map that keeps at most `capacity` entries, evicting the least recently used.
pub struct Lru<K, V> {
    entries: HashMap<K, (V, u64)>,
    clock: u64,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V> Lru<K, V> {
    pub fn new(capacity: usize) -> Self {
        Lru {
            entries: HashMap::new(),
            clock: 0,
            capacity: capacity.max(1),
        }
    }

    /// Whether `key` is cached; marks it as just used.
    pub fn touch(&mut self, key: &K) -> bool {
        self.clock += 1;
        match self.entries.get_mut(key) {
            Some((_, used)) => {
                *used = self.clock;
                true
            }
            None => false,
        }
    }

    /// The value of `key`, without marking it.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|(v, _)| v)
    }

    /// Caches `value` as just used. Returns what it evicted or replaced, for the caller to
    /// destroy. Entries used more recently than the oldest stay, so a launch keeps what it
    /// looked up as long as it uses fewer than `capacity` entries of one cache.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.clock += 1;
        let mut evicted = None;
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            evicted = oldest.and_then(|k| self.entries.remove(&k)).map(|(v, _)| v);
        }
        let replaced = self
            .entries
            .insert(key, (value, self.clock))
            .map(|(v, _)| v);
        evicted.or(replaced)
    }

    /// Every value, emptying the cache (to destroy them).
    pub fn drain(&mut self) -> impl Iterator<Item = V> + '_ {
        self.entries.drain().map(|(_, (v, _))| v)
    }
}

#[cfg(test)]
mod tests {
    use super::Lru;

    #[test]
    fn the_least_recently_used_entry_goes() {
        let mut c = Lru::new(2);
        assert_eq!(c.insert("a", 1), None);
        assert_eq!(c.insert("b", 2), None);
        assert!(c.touch(&"a"));
        // "b" is the oldest now.
        assert_eq!(c.insert("c", 3), Some(2));
        assert_eq!(c.peek(&"a"), Some(&1));
        assert_eq!(c.peek(&"b"), None);
        assert!(!c.touch(&"b"));
        // Replacing a key hands back the old value and evicts nothing.
        assert_eq!(c.insert("c", 4), Some(3));
        assert_eq!(c.peek(&"a"), Some(&1));
        let mut rest: Vec<i32> = c.drain().collect();
        rest.sort_unstable();
        assert_eq!(rest, vec![1, 4]);
    }
}
