//! Profiles: which capabilities a broker is expected to have.

use crate::case::Capability::{self, *};

/// A named set of capabilities.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it says.
    pub about: &'static str,
    /// The capabilities a broker of this profile has.
    pub caps: &'static [Capability],
}

/// Every profile.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "queen2",
        about: "Queen 2: everything (the default)",
        caps: &[Core, Kv, Timers, Positions, Locks, Time, Cursor],
    },
    Profile {
        name: "queen2-fast",
        about: "Queen 2 without the cases that wait for real time (lease expiry, timer firing)",
        caps: &[Core, Kv, Timers, Positions, Locks, Cursor],
    },
    Profile {
        name: "v0",
        about: "an older broker without KV, timers, positions and locks (the PostgreSQL design)",
        caps: &[Core, Time],
    },
];

/// The profile named `name`.
pub fn find(name: &str) -> Option<Profile> {
    PROFILES.iter().copied().find(|p| p.name == name)
}
