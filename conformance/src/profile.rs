//! Profiles: which capabilities a broker is expected to have, named (`queen2`,
//! `queen2-fast`, `v0`) or found by probing the broker (`auto`, see [`crate::probe`]).

use std::borrow::Cow;

use crate::case::Capability::{self, *};

/// A named set of capabilities.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Its name on the command line.
    pub name: Cow<'static, str>,
    /// What it says.
    pub about: Cow<'static, str>,
    /// The capabilities a broker of this profile has.
    pub caps: Cow<'static, [Capability]>,
    /// Why a capability is missing, when that is known (the probe's findings): the
    /// skip reason of the cases that need it.
    pub missing_why: Vec<(Capability, String)>,
}

impl Profile {
    const fn fixed(
        name: &'static str,
        about: &'static str,
        caps: &'static [Capability],
    ) -> Profile {
        Profile {
            name: Cow::Borrowed(name),
            about: Cow::Borrowed(about),
            caps: Cow::Borrowed(caps),
            missing_why: Vec::new(),
        }
    }

    /// Whether the profile has `cap`.
    pub fn has(&self, cap: Capability) -> bool {
        self.caps.contains(&cap)
    }

    /// Why a case that needs `missing` is skipped.
    pub fn skip_reason(&self, missing: &[Capability]) -> String {
        let parts: Vec<String> = missing
            .iter()
            .map(
                |cap| match self.missing_why.iter().find(|(c, _)| c == cap) {
                    Some((_, why)) => format!("{cap:?}: {why}"),
                    None => format!("{cap:?}"),
                },
            )
            .collect();
        format!("profile {} lacks {}", self.name, parts.join("; "))
    }
}

/// Every named profile (`auto` is built by probing, [`crate::probe::probe`]).
pub const PROFILES: &[Profile] = &[
    Profile::fixed(
        "queen2",
        "Queen 2: everything (the default)",
        &[Core, Kv, Timers, Positions, Locks, Time, Cursor],
    ),
    Profile::fixed(
        "queen2-fast",
        "Queen 2 without the cases that wait for real time (lease expiry, timer firing)",
        &[Core, Kv, Timers, Positions, Locks, Cursor],
    ),
    Profile::fixed(
        "v0",
        "an older broker without KV, timers, positions, locks and the Queen 2 consumer rules (the PostgreSQL design)",
        &[Core, Time],
    ),
];

/// The profile named `name`.
pub fn find(name: &str) -> Option<Profile> {
    PROFILES.iter().find(|p| p.name == name).cloned()
}
