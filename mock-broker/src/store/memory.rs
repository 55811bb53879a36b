//! What the single writer remembers between commands: caches and indexes, kept by type.
//!
//! Some engine state outlives a command but is not data: decoded queue records, the
//! partitions a wildcard pop may claim from (`engine::ready`), rebuilt from the file
//! whenever the memory starts afresh (a start, a reopen, a batch that failed). It belongs to
//! the writer that runs every command, not to the process: a thread-local or a static
//! would be shared by every broker of a process (a test suite starting several) and is
//! correct only while exactly one writer thread exists, which nothing in the types says.
//! So the writer owns one [`Memory`] and lends it to each command's [`super::Tx`];
//! a module keeps its own state type in it ([`super::Tx::with_memory`]) without the
//! storage layer knowing what that state is, as `http::Extensions` does for requests.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;

/// State kept across commands, one value per type, created on first use.
#[derive(Default)]
pub struct Memory {
    slots: RefCell<HashMap<TypeId, Box<dyn Any>>>,
}

impl Memory {
    /// Runs `f` on the state of type `S`, created with `S::default()` on first use.
    ///
    /// # Panics
    /// If `f` reaches for the memory again (a nested call for any type): the state
    /// is lent out once at a time.
    pub fn with<S: Default + 'static, R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        let mut slots = self.slots.borrow_mut();
        let slot = slots
            .entry(TypeId::of::<S>())
            .or_insert_with(|| Box::new(S::default()));
        f(slot
            .downcast_mut::<S>()
            .expect("each slot holds its own type"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counter(u32);

    #[test]
    fn each_type_has_its_own_state_and_each_memory_its_own_values() {
        let (a, b) = (Memory::default(), Memory::default());
        a.with(|c: &mut Counter| c.0 += 2);
        a.with(|s: &mut String| s.push('x'));
        assert_eq!(a.with(|c: &mut Counter| c.0), 2);
        assert_eq!(a.with(|s: &mut String| s.clone()), "x");
        assert_eq!(
            b.with(|c: &mut Counter| c.0),
            0,
            "two writers share nothing"
        );
    }
}
