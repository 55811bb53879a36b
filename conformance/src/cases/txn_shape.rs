//! (cases to be written)

use crate::case::Case;

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![]
}
