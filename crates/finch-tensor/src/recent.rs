//! A map that keeps the most recently used entries up to a bound: the process-wide caches
//! of loaded kernels (`backend::c`) and of the array layer's compiled programs
//! (`array::program`) keep their memory bounded with it.

use std::collections::HashMap;
use std::hash::Hash;

/// At most `bound` entries; inserting past it drops the least recently used (by `get` or
/// `insert`). Finding that one scans the entries: the bounds are a few hundred, and an
/// insertion follows a compilation.
pub(crate) struct Recent<K, V> {
    entries: HashMap<K, (V, u64)>,
    uses: u64,
    bound: usize,
}

impl<K: Hash + Eq + Clone, V> Recent<K, V> {
    /// An empty map keeping at most `bound` entries.
    pub(crate) fn new(bound: usize) -> Self {
        Recent {
            entries: HashMap::new(),
            uses: 0,
            bound,
        }
    }

    /// The value of `key`, if kept, marked as used now.
    pub(crate) fn get(&mut self, key: &K) -> Option<&V> {
        self.uses += 1;
        let now = self.uses;
        let (value, used) = self.entries.get_mut(key)?;
        *used = now;
        Some(value)
    }

    /// Keeps `value` under `key`, dropping the least recently used entry past the bound.
    pub(crate) fn insert(&mut self, key: K, value: V) {
        self.uses += 1;
        self.entries.insert(key, (value, self.uses));
        if self.entries.len() > self.bound {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
    }

    /// How many entries are kept.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}
