//! halite: the compact, order-preserving map behind `Map` with `preserve_order`.
//!
//! Upstream serde_json keeps a `preserve_order` map in an `IndexMap` held
//! inline in every `Value` (72 bytes a value, 104 bytes a map entry, a hash
//! table for even a one-entry map). Salt state data is millions of tiny maps,
//! so halite keeps the entries in a plain vector (56 bytes an entry, grown
//! one by one while small) and builds a hash index only once a map holds more
//! than `LINEAR_MAX` entries; smaller maps are searched by a scan.
//!
//! The behaviour is `IndexMap`'s, method by method, because output order
//! depends on it: `insert` of a present key keeps its position, `swap_remove`
//! moves the last entry into the hole, `shift_*` keep the order, and equality
//! ignores order.

use alloc::boxed::Box;
use alloc::vec::{self, Vec};
use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::iter::FusedIterator;
use core::mem;
use core::ops;
use core::slice;
use hashbrown::HashTable;

/// Maps up to this many entries are searched by a scan, without an index.
const LINEAR_MAX: usize = 16;

#[cfg(feature = "std")]
type HasherImpl = std::hash::RandomState;
#[cfg(not(feature = "std"))]
type HasherImpl = foldhash::fast::RandomState;

/// An insertion-ordered map: entries in a vector, a hash index when large.
pub struct OrderedMap<K, V> {
    entries: Vec<(K, V)>,
    index: Option<Box<Index>>,
}

/// Positions of a large map's entries, by the hash of their keys.
#[derive(Clone)]
struct Index {
    table: HashTable<usize>,
    hasher: HasherImpl,
}

impl Index {
    fn build<K: Hash, V>(entries: &[(K, V)]) -> Box<Index> {
        let hasher = HasherImpl::default();
        let mut table = HashTable::with_capacity(entries.len());
        for (i, (k, _)) in entries.iter().enumerate() {
            let hash = hasher.hash_one(k);
            table.insert_unique(hash, i, |&j| hasher.hash_one(&entries[j].0));
        }
        Box::new(Index { table, hasher })
    }

    /// Forgets position `i`, whose key hashes to `hash`.
    fn erase(&mut self, hash: u64, i: usize) {
        if let Ok(found) = self.table.find_entry(hash, |&j| j == i) {
            found.remove();
        }
    }

    /// Records that the entry hashing to `hash` moved from `from` to `to`.
    fn relocate(&mut self, hash: u64, from: usize, to: usize) {
        if let Some(slot) = self.table.find_mut(hash, |&j| j == from) {
            *slot = to;
        }
    }
}

impl<K, V> OrderedMap<K, V> {
    /// An empty map; allocates nothing.
    pub const fn new() -> Self {
        OrderedMap {
            entries: Vec::new(),
            index: None,
        }
    }

    /// An empty map with room for `capacity` entries.
    pub fn with_capacity(capacity: usize) -> Self {
        OrderedMap {
            entries: Vec::with_capacity(capacity),
            index: None,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.index = None;
    }

    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter {
            iter: self.entries.iter(),
        }
    }

    pub fn iter_mut(&mut self) -> IterMut<'_, K, V> {
        IterMut {
            iter: self.entries.iter_mut(),
        }
    }

    pub fn keys(&self) -> Keys<'_, K, V> {
        Keys {
            iter: self.entries.iter(),
        }
    }

    pub fn values(&self) -> Values<'_, K, V> {
        Values {
            iter: self.entries.iter(),
        }
    }

    pub fn values_mut(&mut self) -> ValuesMut<'_, K, V> {
        ValuesMut {
            iter: self.entries.iter_mut(),
        }
    }

    pub fn into_values(self) -> IntoValues<K, V> {
        IntoValues {
            iter: self.entries.into_iter(),
        }
    }

    /// Room for one more entry: small maps grow 1, 2, 4, 8... exactly
    /// (a `Vec` would start at 4), larger ones as a `Vec` does.
    fn reserve_one(&mut self) {
        let capacity = self.entries.capacity();
        if self.entries.len() == capacity {
            if capacity < LINEAR_MAX {
                self.entries.reserve_exact(capacity.max(1));
            } else {
                self.entries.reserve(1);
            }
        }
    }
}

impl<K: Hash + Eq, V> OrderedMap<K, V> {
    /// The position of `key` (by a scan, or through the index), and the
    /// key's hash when the map is indexed, for [`Self::push_new`].
    fn locate<Q>(&self, key: &Q) -> (Option<usize>, Option<u64>)
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        match &self.index {
            None => (
                self.entries.iter().position(|(k, _)| k.borrow() == key),
                None,
            ),
            Some(index) => {
                let hash = index.hasher.hash_one(key);
                let found = index
                    .table
                    .find(hash, |&i| self.entries[i].0.borrow() == key)
                    .copied();
                (found, Some(hash))
            }
        }
    }

    fn find<Q>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.locate(key).0
    }

    /// Appends an entry whose key is not in the map; returns its position.
    /// `hash` is what [`Self::locate`] gave for the key.
    fn push_new(&mut self, key: K, value: V, hash: Option<u64>) -> usize {
        self.reserve_one();
        let i = self.entries.len();
        match &mut self.index {
            Some(index) => {
                let hash = hash.unwrap_or_else(|| index.hasher.hash_one(&key));
                self.entries.push((key, value));
                let entries = &self.entries;
                let hasher = &index.hasher;
                index
                    .table
                    .insert_unique(hash, i, |&j| hasher.hash_one(&entries[j].0));
            }
            None => {
                self.entries.push((key, value));
                if self.entries.len() > LINEAR_MAX {
                    self.index = Some(Index::build(&self.entries));
                }
            }
        }
        i
    }

    /// Re-indexes after entries moved. A map has an index exactly when it
    /// has grown past `LINEAR_MAX` entries.
    fn rebuild_index(&mut self) {
        if self.index.is_some() {
            self.index = Some(Index::build(&self.entries));
        }
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.find(key).map(|i| &self.entries[i].1)
    }

    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.find(key).map(move |i| &mut self.entries[i].1)
    }

    pub fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.find(key).map(|i| {
            let (k, v) = &self.entries[i];
            (k, v)
        })
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.find(key).is_some()
    }

    /// Inserts or updates; an updated key keeps its position.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.locate(&key) {
            (Some(i), _) => Some(mem::replace(&mut self.entries[i].1, value)),
            (None, hash) => {
                self.push_new(key, value, hash);
                None
            }
        }
    }

    /// Inserts at `index`, or moves a present key there; `IndexMap`'s rules.
    pub fn shift_insert(&mut self, index: usize, key: K, value: V) -> Option<V> {
        match self.locate(&key) {
            (Some(i), _) => {
                let old = mem::replace(&mut self.entries[i].1, value);
                self.move_index(i, index);
                Some(old)
            }
            (None, hash) => {
                assert!(index <= self.entries.len(), "index out of bounds");
                let i = self.push_new(key, value, hash);
                self.move_index(i, index);
                None
            }
        }
    }

    fn move_index(&mut self, from: usize, to: usize) {
        if from == to {
            return;
        }
        if from < to {
            self.entries[from..=to].rotate_left(1);
        } else {
            self.entries[to..=from].rotate_right(1);
        }
        self.rebuild_index();
    }

    fn swap_remove_index(&mut self, i: usize) -> (K, V) {
        let last = self.entries.len() - 1;
        if let Some(index) = &mut self.index {
            index.erase(index.hasher.hash_one(&self.entries[i].0), i);
            if i != last {
                let moved = index.hasher.hash_one(&self.entries[last].0);
                index.relocate(moved, last, i);
            }
        }
        self.entries.swap_remove(i)
    }

    fn shift_remove_index(&mut self, i: usize) -> (K, V) {
        if let Some(index) = &mut self.index {
            index.erase(index.hasher.hash_one(&self.entries[i].0), i);
            for slot in index.table.iter_mut() {
                if *slot > i {
                    *slot -= 1;
                }
            }
        }
        self.entries.remove(i)
    }

    pub fn swap_remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.swap_remove_entry(key).map(|(_, v)| v)
    }

    pub fn swap_remove_entry<Q>(&mut self, key: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.find(key).map(|i| self.swap_remove_index(i))
    }

    pub fn shift_remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.shift_remove_entry(key).map(|(_, v)| v)
    }

    pub fn shift_remove_entry<Q>(&mut self, key: &Q) -> Option<(K, V)>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        self.find(key).map(|i| self.shift_remove_index(i))
    }

    pub fn entry(&mut self, key: K) -> Entry<'_, K, V> {
        match self.locate(&key) {
            (Some(index), _) => Entry::Occupied(OccupiedEntry { map: self, index }),
            (None, hash) => Entry::Vacant(VacantEntry {
                map: self,
                key,
                hash,
            }),
        }
    }

    pub fn retain<F>(&mut self, mut keep: F)
    where
        F: FnMut(&K, &mut V) -> bool,
    {
        let before = self.entries.len();
        self.entries.retain_mut(|(k, v)| keep(k, v));
        if self.entries.len() != before {
            self.rebuild_index();
        }
    }

    pub fn sort_unstable_keys(&mut self)
    where
        K: Ord,
    {
        self.entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.rebuild_index();
    }
}

impl<K, V> Default for OrderedMap<K, V> {
    fn default() -> Self {
        OrderedMap::new()
    }
}

impl<K: Clone, V: Clone> Clone for OrderedMap<K, V> {
    fn clone(&self) -> Self {
        OrderedMap {
            entries: self.entries.clone(),
            index: self.index.clone(),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        self.entries.clone_from(&source.entries);
        self.index.clone_from(&source.index);
    }
}

/// Equal when both hold the same keys with equal values, in any order
/// (as `IndexMap`).
impl<K: Hash + Eq, V: PartialEq> PartialEq for OrderedMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .entries
                .iter()
                .all(|(k, v)| other.get(k).is_some_and(|w| v == w))
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for OrderedMap<K, V> {
    fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.debug_map().entries(self.iter()).finish()
    }
}

impl<K, V, Q> ops::Index<&Q> for OrderedMap<K, V>
where
    K: Hash + Eq + Borrow<Q>,
    Q: ?Sized + Hash + Eq,
{
    type Output = V;

    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("no entry found for key")
    }
}

impl<K: Hash + Eq, V> Extend<(K, V)> for OrderedMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iterable: I) {
        let iter = iterable.into_iter();
        let (lower, _) = iter.size_hint();
        if self.is_empty() {
            self.entries.reserve_exact(lower);
        } else {
            self.entries.reserve((lower + 1) / 2);
        }
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K: Hash + Eq, V> FromIterator<(K, V)> for OrderedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iterable: I) -> Self {
        let mut map = OrderedMap::new();
        map.extend(iterable);
        map
    }
}

impl<K, V> IntoIterator for OrderedMap<K, V> {
    type Item = (K, V);
    type IntoIter = IntoIter<K, V>;

    fn into_iter(self) -> IntoIter<K, V> {
        IntoIter {
            iter: self.entries.into_iter(),
        }
    }
}

impl<'a, K, V> IntoIterator for &'a OrderedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;

    fn into_iter(self) -> Iter<'a, K, V> {
        self.iter()
    }
}

/// A vacant slot, from [`OrderedMap::entry`].
pub struct VacantEntry<'a, K, V> {
    map: &'a mut OrderedMap<K, V>,
    key: K,
    hash: Option<u64>,
}

/// A present entry, from [`OrderedMap::entry`].
pub struct OccupiedEntry<'a, K, V> {
    map: &'a mut OrderedMap<K, V>,
    index: usize,
}

/// [`OrderedMap::entry`]'s answer.
pub enum Entry<'a, K, V> {
    Occupied(OccupiedEntry<'a, K, V>),
    Vacant(VacantEntry<'a, K, V>),
}

impl<'a, K: Hash + Eq, V> VacantEntry<'a, K, V> {
    pub fn key(&self) -> &K {
        &self.key
    }

    pub fn insert(self, value: V) -> &'a mut V {
        let i = self.map.push_new(self.key, value, self.hash);
        &mut self.map.entries[i].1
    }
}

impl<'a, K: Hash + Eq, V> OccupiedEntry<'a, K, V> {
    pub fn key(&self) -> &K {
        &self.map.entries[self.index].0
    }

    pub fn get(&self) -> &V {
        &self.map.entries[self.index].1
    }

    pub fn get_mut(&mut self) -> &mut V {
        &mut self.map.entries[self.index].1
    }

    pub fn into_mut(self) -> &'a mut V {
        &mut self.map.entries[self.index].1
    }

    pub fn insert(&mut self, value: V) -> V {
        mem::replace(self.get_mut(), value)
    }

    pub fn swap_remove(self) -> V {
        self.swap_remove_entry().1
    }

    pub fn shift_remove(self) -> V {
        self.shift_remove_entry().1
    }

    pub fn swap_remove_entry(self) -> (K, V) {
        self.map.swap_remove_index(self.index)
    }

    pub fn shift_remove_entry(self) -> (K, V) {
        self.map.shift_remove_index(self.index)
    }
}

macro_rules! entry_iterator {
    ($(#[$attr:meta])* $name:ident<$($lt:lifetime,)? K, V> over $inner:ty, $item:ty, |$entry:pat_param| $map:expr) => {
        $(#[$attr])*
        pub struct $name<$($lt,)? K, V> {
            iter: $inner,
        }

        impl<$($lt,)? K, V> Iterator for $name<$($lt,)? K, V> {
            type Item = $item;

            fn next(&mut self) -> Option<$item> {
                self.iter.next().map(|$entry| $map)
            }

            fn size_hint(&self) -> (usize, Option<usize>) {
                self.iter.size_hint()
            }
        }

        impl<$($lt,)? K, V> DoubleEndedIterator for $name<$($lt,)? K, V> {
            fn next_back(&mut self) -> Option<$item> {
                self.iter.next_back().map(|$entry| $map)
            }
        }

        impl<$($lt,)? K, V> ExactSizeIterator for $name<$($lt,)? K, V> {
            fn len(&self) -> usize {
                self.iter.len()
            }
        }

        impl<$($lt,)? K, V> FusedIterator for $name<$($lt,)? K, V> {}

        impl<$($lt,)? K: fmt::Debug, V: fmt::Debug> fmt::Debug for $name<$($lt,)? K, V> {
            fn fmt(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.debug_struct(stringify!($name)).field("iter", &self.iter).finish()
            }
        }
    };
}

macro_rules! clone_iterator {
    ($name:ident) => {
        impl<'a, K, V> Clone for $name<'a, K, V> {
            fn clone(&self) -> Self {
                $name {
                    iter: self.iter.clone(),
                }
            }
        }
    };
}

entry_iterator!(
    /// The entries in order, borrowed.
    Iter<'a, K, V> over slice::Iter<'a, (K, V)>, (&'a K, &'a V), |(k, v)| (k, v)
);
entry_iterator!(
    /// The entries in order, values mutable.
    IterMut<'a, K, V> over slice::IterMut<'a, (K, V)>, (&'a K, &'a mut V), |(k, v)| (&*k, v)
);
entry_iterator!(
    /// The keys in order.
    Keys<'a, K, V> over slice::Iter<'a, (K, V)>, &'a K, |(k, _)| k
);
entry_iterator!(
    /// The values in order.
    Values<'a, K, V> over slice::Iter<'a, (K, V)>, &'a V, |(_, v)| v
);
entry_iterator!(
    /// The values in order, mutable.
    ValuesMut<'a, K, V> over slice::IterMut<'a, (K, V)>, &'a mut V, |(_, v)| v
);
entry_iterator!(
    /// The entries in order, owned.
    IntoIter<K, V> over vec::IntoIter<(K, V)>, (K, V), |entry| entry
);
entry_iterator!(
    /// The values in order, owned.
    IntoValues<K, V> over vec::IntoIter<(K, V)>, V, |(_, v)| v
);
clone_iterator!(Iter);
clone_iterator!(Keys);
clone_iterator!(Values);
