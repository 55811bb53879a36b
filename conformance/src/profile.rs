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
    /// Cases this profile's contract does not contain, by id, each with the reason:
    /// the `v0` profile judges a broker by the PostgreSQL page, so the cases that check
    /// a Queen 2 convention that page never promised are skipped there, by name.
    pub waived: &'static [(&'static str, &'static str)],
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
            waived: &[],
        }
    }

    const fn waiving(
        name: &'static str,
        about: &'static str,
        caps: &'static [Capability],
        waived: &'static [(&'static str, &'static str)],
    ) -> Profile {
        Profile {
            name: Cow::Borrowed(name),
            about: Cow::Borrowed(about),
            caps: Cow::Borrowed(caps),
            missing_why: Vec::new(),
            waived,
        }
    }

    /// Why the case `id` is not part of this profile's contract, if it is not.
    pub fn waiver(&self, id: &str) -> Option<String> {
        self.waived
            .iter()
            .find(|(w, _)| *w == id)
            .map(|(_, why)| format!("profile {}: a Queen 2 convention: {why}", self.name))
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
    Profile::waiving(
        "v0",
        "Queen v0, the PostgreSQL broker, judged by its own page (transaction-v0-postgres.md): no KV, timers, positions, locks or Queen 2 consumer rules, and the Queen 2 conventions that page never promised skipped by name",
        &[Core, Time],
        V0_WAIVED,
    ),
];

/// The cases the `v0` profile skips, each a Queen 2 convention that
/// `transaction-v0-postgres.md` (and the v0 broker's wire) never promised, with why.
/// The page's own MUSTs are the `txn.v0.*` cases (and the Queen 2 cases that state a
/// rule both pages share), which the profile runs.
pub const V0_WAIVED: &[(&str, &str)] = &[];

/// The profile named `name`.
pub fn find(name: &str) -> Option<Profile> {
    PROFILES.iter().find(|p| p.name == name).cloned()
}
